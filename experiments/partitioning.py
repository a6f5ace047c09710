"""Gedik's partitioning functions against uniform and consistent hashing as channels are added one at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import groupings
from experiments.common import markdown_table, pyplot, write_csv
from experiments.registry import register
from groupings.adaptive import gedik_build as gb
from groupings.hashing import seeded_hashes

ALPHAS = (1.2, 1.2, 1.2)  # the paper's default balance targets for memory, computation, communication


def _scores(pmf: np.ndarray, channel: np.ndarray, n: int, kinds: tuple[int, int, int]) -> tuple[float, float]:
    """Relative imbalance b (Eq. 11) and the communication load ratio r_n of one key -> channel map."""
    ratios = tuple(gb.imbalance(gb.channel_loads(pmf, channel, n, k)) for k in kinds)
    return gb.relative_imbalance(ratios, ALPHAS), ratios[2]


@register(
    "gedik-scaling",
    "Gedik (000), Fig. 6: Zipf z = 1, channels added one at a time, resource functions LCL",
    "gedik's partitioning function balances better than uniform and consistent hashing, and its migration stays "
    "close to consistent hashing's while uniform hashing migrates many times the ideal",
)
def scaling(out: Path, quick: bool) -> dict:
    """Grow N from 2 to 20 (quick: 10) with exact frequencies; imbalance and relative migration per step."""
    keys_count, top = (100_000, 10) if quick else (1_000_000, 20)
    pmf = np.arange(1, keys_count + 1, dtype=float) ** -1.0
    pmf /= pmf.sum()
    keys = np.random.default_rng(5).integers(0, 2**64 - 1, keys_count, dtype=np.uint64, endpoint=True)
    kinds = gb.parse_resources("LCL")
    ctl = groupings.make_controller("gedik", 1, seed=0, domain=keys_count)
    maps = {"gedik": ctl.lookup(keys), "uniform": np.zeros(keys_count, np.int32), "consistent": ctl.lookup(keys)}
    rows = []
    for n in range(2, top + 1):
        ctl.resize(n)
        ctl.install(ctl.plan(keys, pmf, reason="resize"))
        now = {
            "gedik": ctl.lookup(keys),
            "uniform": seeded_hashes(keys, 0, n),
            "consistent": ctl.ring(n).channel_of(keys),
        }
        ideal = float(gb.beta(kinds[0], pmf).sum()) / n  # L-bar_s: the state one channel should hold
        row: dict = {"channels": n}
        for name, channel in now.items():
            b, r_n = _scores(pmf, channel, n, kinds)
            moved = maps[name] != channel
            row[f"{name}_b"] = b
            row[f"{name}_r_n"] = r_n
            row[f"{name}_m"] = float(gb.beta(kinds[0], pmf[moved]).sum()) / ideal  # relative migration (Eq. 12)
        rows.append(row)
        maps = now
    write_csv(out / "scaling.csv", rows)
    means = {
        name: {"b": float(np.mean([r[f"{name}_b"] for r in rows])), "m": float(np.mean([r[f"{name}_m"] for r in rows]))}
        for name in ("gedik", "uniform", "consistent")
    }
    plot_b_and_m(out / "scaling.png", [r["channels"] for r in rows], rows, ("gedik", "uniform", "consistent"),
                 "channels N", f"Zipf z = 1 over {keys_count:,} keys, channels added one at a time (LCL, alpha = 1.2)")
    table = [{"method": k, "mean b": v["b"], "mean m": v["m"]} for k, v in means.items()]
    (out / "scaling.md").write_text(markdown_table(table))
    return means


def plot_b_and_m(path: Path, xs: list, rows: list[dict], names, xlabel: str, title: str) -> None:
    """Relative imbalance b and relative migration m (columns `<name>_b`, `<name>_m` of `rows`) against `xs`."""
    plt = pyplot()
    fig, (ax_b, ax_m) = plt.subplots(1, 2, figsize=(12, 4.2))
    for name in names:
        ax_b.plot(xs, [r[f"{name}_b"] for r in rows], "o-", ms=3, label=name)
        ax_m.plot(xs, [r[f"{name}_m"] for r in rows], "o-", ms=3, label=name)
    ax_b.axhline(1.0, color="black", ls=":", lw=1)
    ax_b.set_ylabel("relative imbalance b (1 = within the targets)")
    ax_m.set_ylabel("relative migration m (1 = ideal)")
    ax_m.set_yscale("log")
    for ax in (ax_b, ax_m):
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
