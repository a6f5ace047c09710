"""Gedik (000): uniform hashing's migration as channels are added, under the two ways a hash picks a channel, over
ten hash seeds.

The paper reports uniform hashing's relative migration m (migrated state over the ideal, one new channel's share)
as "more than 8x" at N = 10 (Fig. 3), 6.5-7.5x over domain sizes (Fig. 8) and about 22x at N = 32 (Fig. 6), without
saying how its hash maps onto N channels. The two usual ways move different shares of the keys when N - 1 becomes N:

  * multiply-shift, ((h x N) >> 64), the project's `bucket`: a key moves when its point of [0, 1) crosses one of the
    N - 1 new boundaries, about half of the keys, so m is about N / 2;
  * modulo, h mod N: a key stays only when h mod (N - 1) = h mod N, one key in N, so m is about N - 1.

Both run here on gedik-scaling's setting (Zipf z = 1 over 10^6 keys, exact frequencies, memory linear in the
frequency, LCL), N grown from 1 to 32, under ten salts of the hash; each step's m is weighed by frequency, so the
heaviest keys' luck is the only spread.
"""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

from experiments.common import against_paper, markdown_table, pyplot, write_csv
from experiments.registry import register
from groupings.adaptive import gedik_cost as gcost
from groupings.hashing import mix64, seeded_hashes

SALTS = tuple(range(10))
READINGS = ("multiply-shift", "modulo")
PAPER = {"m at N = 10": 8.0, "m at N = 32": 22.0}


@numba.njit(cache=True)
def _modulo(keys, salt, n):
    out = np.empty(keys.size, dtype=np.int32)
    for i in range(keys.size):
        out[i] = mix64(keys[i], salt) % np.uint64(n)
    return out


def channels(keys: np.ndarray, salt: int, n: int, reading: str) -> np.ndarray:
    """The channel of every key under uniform hashing, hash number `salt`, read one of the two ways."""
    if reading == "multiply-shift":
        return seeded_hashes(keys, salt, n)
    return _modulo(np.ascontiguousarray(keys, dtype=np.uint64), np.uint64(salt), n)


def migration(pmf: np.ndarray, keys: np.ndarray, top: int, salt: int, reading: str) -> list[float]:
    """m at N = 2..top: the state moved from N - 1 to N channels over one channel's share (Eq. 12), memory linear
    in the frequency (LCL's first resource)."""
    kind = gcost.parse_resources("LCL")[0]
    beta = gcost.beta(kind, pmf)
    before, out = channels(keys, salt, 1, reading), []
    for n in range(2, top + 1):
        now = channels(keys, salt, n, reading)
        out.append(float(beta[before != now].sum() / (beta.sum() / n)))
        before = now
    return out


@register(
    "gedik-hash-migration",
    "Gedik (000), Figs. 3, 6, 8: uniform hashing's relative migration as N grows to 32, multiply-shift against "
    "modulo, over ten hash seeds (Zipf z = 1, 10^6 keys, LCL)",
    "uniform hashing migrates many times the ideal, more as N grows: about N / 2 by multiply-shift and N - 1 by "
    "modulo, the same under every seed",
)
def hash_migration(out: Path, quick: bool) -> dict:
    keys_count, top, salts = (100_000, 10, SALTS[:3]) if quick else (1_000_000, 32, SALTS)
    pmf = np.arange(1, keys_count + 1, dtype=float) ** -1.0
    pmf /= pmf.sum()
    keys = np.random.default_rng(5).integers(0, 2**64 - 1, keys_count, dtype=np.uint64, endpoint=True)
    per = {(r, s): migration(pmf, keys, top, s, r) for r in READINGS for s in salts}
    rows = [{"reading": r, "channels": n, **{f"salt_{s}": per[(r, s)][n - 2] for s in salts},
             "min": min(per[(r, s)][n - 2] for s in salts), "max": max(per[(r, s)][n - 2] for s in salts)}
            for r in READINGS for n in range(2, top + 1)]
    write_csv(out / "hash_migration.csv", rows)

    def at(reading: str, n: int) -> dict:
        return next(r for r in rows if r["reading"] == reading and r["channels"] == n)

    # Fig. 8's measure: the mean of m over the growth to N = 10
    grown = {r: [float(np.mean(per[(r, s)][: 10 - 1])) for s in salts] for r in READINGS}
    numbers = {r: {"m10": [at(r, 10)["min"], at(r, 10)["max"]],
                   "m_top": [at(r, top)["min"], at(r, top)["max"]],
                   "mean_to_10": [min(grown[r]), max(grown[r])]} for r in READINGS}
    paper = [{"claim": f"uniform hashing's {k}", "paper": f"{v:g}x",
              "ours": "; ".join(f"{r} {numbers[r]['m10' if '10' in k else 'm_top'][0]:.3g} to "
                                f"{numbers[r]['m10' if '10' in k else 'm_top'][1]:.3g}" for r in READINGS)}
             for k, v in PAPER.items() if quick is False or "32" not in k]
    paper.append({"claim": "uniform hashing's m over domain sizes (mean over the growth to N = 10)",
                  "paper": "6.5x-7.5x", "ours": "; ".join(f"{r} {min(grown[r]):.3g} to {max(grown[r]):.3g}"
                                                        for r in READINGS)})
    note = (f"\nEach range is over {len(salts)} salts of the hash; memory is linear in the frequency (LCL), so "
            f"the heaviest keys ({pmf[0]:.1%} of it the first) make the spread.\n")
    (out / "hash_migration.md").write_text(markdown_table(rows) + against_paper(paper, note))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ns = list(range(2, top + 1))
    for r in READINGS:
        ax.fill_between(ns, [at(r, n)["min"] for n in ns], [at(r, n)["max"] for n in ns], alpha=0.4, label=r)
    ax.plot([10, 32], [8, 22], "k*", ms=10, label="paper (Figs. 3, 6)")
    ax.set_xlabel("channels N")
    ax.set_ylabel("relative migration m (1 = ideal)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "hash_migration.png", dpi=110)
    plt.close(fig)
    return {"readings": numbers, "top": top, "salts": list(salts)}
