"""Gedik's partitioning functions against uniform and consistent hashing as channels are added one at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import groupings
from experiments.common import markdown_table, pyplot, write_csv
from experiments.registry import register
from groupings.adaptive import gedik_build as gb
from groupings.adaptive import gedik_cost as gcost
from groupings.hashing import seeded_hashes

ALPHAS = (1.2, 1.2, 1.2)  # the paper's default balance targets for memory, computation, communication


def _scores(pmf: np.ndarray, channel: np.ndarray, n: int, kinds: tuple[int, int, int]) -> tuple[float, float]:
    """Relative imbalance b (Eq. 11) and the communication load ratio r_n of one key -> channel map."""
    ratios = tuple(gcost.imbalance(gcost.channel_loads(pmf, channel, n, k)) for k in kinds)
    return gcost.relative_imbalance(ratios, ALPHAS), ratios[2]


METHODS = (*gb.BUILDS, "uniform", "consistent")
PAPER_FIG6 = {  # Gedik (000), Fig. 6, as the text states it
    "scan": "m above 3x the ideal at N = 32",
    "redist": "m flat at about 1.15x the ideal; the most robust",
    "readj": "best b for N up to 20, worse than Redist and Scan above",
    "uniform": "m about 22x the ideal at N = 32; b up to 36% above Readj's for N in 2-20",
    "consistent": "b above 2 at N = 32; lowest m",
}


def grow_steps(
    pmf: np.ndarray, keys: np.ndarray, top: int, kinds: tuple[int, int, int], *, sigma: float = 0.1
) -> dict[str, list[dict]]:
    """Grow N from 1 to `top` one channel at a time, rebuilding at each step (the paper's protocol): per method one
    row per N = 2..top with b, m, r_n and each resource's r_k / alpha_k. The
    builds use the resource functions `kinds` (so the explicit hash balances what is scored) and threshold `sigma`."""
    letters = "".join("CLQ"[k] for k in kinds)  # the controller takes the paper's letters
    ctls = {
        b: groupings.make_controller("gedik", 1, seed=0, domain=keys.size, build=b, sigma=sigma, resources=letters)
        for b in gb.BUILDS
    }
    ring_of = ctls[gb.BUILDS[0]].ring
    maps = {name: np.zeros(keys.size, np.int32) for name in METHODS}
    out: dict[str, list[dict]] = {name: [] for name in METHODS}
    for n in range(2, top + 1):
        now = {"uniform": seeded_hashes(keys, 0, n), "consistent": ring_of(n).channel_of(keys)}
        for b, ctl in ctls.items():
            ctl.resize(n)
            ctl.install(ctl.plan(keys, pmf, reason="resize"))
            now[b] = ctl.lookup(keys)
        ideal = float(gcost.beta(kinds[0], pmf).sum()) / n  # L-bar_s (Eq. 10)
        for name, channel in now.items():
            b, r_n = _scores(pmf, channel, n, kinds)
            moved = float(gcost.beta(kinds[0], pmf[maps[name] != channel]).sum())
            row = {"n": n, "b": b, "r_n": r_n, "m": moved / ideal}  # relative migration m (Eq. 12)
            for res, kind, alpha in zip(gcost.RESOURCES, kinds, ALPHAS, strict=True):
                row[f"b_{res}"] = gcost.imbalance(gcost.channel_loads(pmf, channel, n, kind)) / alpha  # Fig. 3's b_k
            out[name].append(row)
        maps = now
    return out


@register(
    "gedik-scaling",
    "Gedik (000), Fig. 6: Zipf z = 1, channels added one at a time up to N = 32, resource functions LCL",
    "gedik's partitioning functions balance better than uniform and consistent hashing, and their migration stays "
    "close to consistent hashing's while uniform hashing migrates many times the ideal, more as N grows",
)
def scaling(out: Path, quick: bool) -> dict:
    """Grow N from 1 to 32 (quick: 10) with exact frequencies; b and m of every method at every step."""
    keys_count, top = (100_000, 10) if quick else (1_000_000, 32)
    pmf = np.arange(1, keys_count + 1, dtype=float) ** -1.0
    pmf /= pmf.sum()
    keys = np.random.default_rng(5).integers(0, 2**64 - 1, keys_count, dtype=np.uint64, endpoint=True)
    steps = grow_steps(pmf, keys, top, gcost.parse_resources("LCL"))
    rows = []
    for i, n in enumerate(range(2, top + 1)):
        row: dict = {"channels": n}
        for name in METHODS:
            step = steps[name][i]
            row.update({f"{name}_b": step["b"], f"{name}_r_n": step["r_n"], f"{name}_m": step["m"]})
        rows.append(row)
    write_csv(out / "scaling.csv", rows)
    means = {name: {"b": float(np.mean([r[f"{name}_b"] for r in rows])),
                    "m": float(np.mean([r[f"{name}_m"] for r in rows]))} for name in METHODS}
    plot_b_and_m(out / "scaling.png", [r["channels"] for r in rows], rows, METHODS, "channels N",
                 f"Zipf z = 1 over {keys_count:,} keys, channels added one at a time (LCL, alpha = 1.2)")
    last = rows[-1]
    small = [r for r in rows if r["channels"] <= 20]
    table = [{"method": name, "mean b": means[name]["b"], "mean m": means[name]["m"],
              f"b at N={top}": last[f"{name}_b"], f"m at N={top}": last[f"{name}_m"],
              "paper (Fig. 6)": PAPER_FIG6[name]} for name in METHODS]
    over_readj = max(r["uniform_b"] / r["readj_b"] - 1 for r in small)
    (out / "scaling.md").write_text(
        markdown_table(table)
        + f"\nOurs: {keys_count:,} keys (paper: 10^6), N grown 2..{top}, one run (paper: mean of 5). Uniform hashing's "
        f"b is up to {over_readj:.0%} above Readj's for N <= 20 (paper: up to 36%).\n"
        "Differences: uniform hashing here maps the 64-bit hash to a channel by multiply-shift ((h x N) >> 64), "
        "which moves about half of the keys when a channel is added, so its m is about N/2 per step; a modulo hash "
        "moves (N - 1)/N of them (m about N - 1). The paper's 22x at N = 32 lies between the two. No method reaches "
        "b <= 1 at z = 1 with many channels: the hottest key "
        "alone outweighs a channel's share of the load once N exceeds about 1/p1."
        + _build_remarks(rows, top) + "\n"
    )
    return {**means, "gedik": means["redist"], "rows": rows}


def _build_remarks(rows: list[dict], top: int) -> str:
    """Where our builds depart from the paper's Fig. 6, worked out from the rows."""
    last = rows[-1]
    mean = {b: float(np.mean([r[f"{b}_b"] for r in rows])) for b in gb.BUILDS}
    out = ""
    if last["scan_m"] < 2:
        out += (f" Scan's migration stays at {last['scan_m']:.3g}x the ideal at N = {top} (paper: above 3x at 32): "
                "with the migration penalty of U^APM it rarely moves a key away from its old channel.")
    if mean["readj"] > min(mean["scan"], mean["redist"]):
        out += (f" Readj balances worse than Scan and Redist here (mean b {mean['readj']:.3g} vs "
                f"{min(mean['scan'], mean['redist']):.3g}; paper: best up to N = 20) and migrates least (mean m "
                f"{float(np.mean([r['readj_m'] for r in rows])):.3g}): it starts from the previous map and stops at "
                "the first map no single move or swap improves, a local optimum that keeps more of the old placement.")
    return out


def plot_b_and_m(path: Path, xs: list, rows: list[dict], names, xlabel: str, title: str,
                 m_mark: tuple[float, str] | None = None) -> None:
    """Relative imbalance b and relative migration m (columns `<name>_b`, `<name>_m` of `rows`) against `xs`;
    `m_mark` (value, label) draws a reference line on the m side, such as the paper's figure."""
    plt = pyplot()
    fig, (ax_b, ax_m) = plt.subplots(1, 2, figsize=(12, 4.2))
    for name in names:
        ax_b.plot(xs, [r[f"{name}_b"] for r in rows], "o-", ms=3, label=name)
        ax_m.plot(xs, [r[f"{name}_m"] for r in rows], "o-", ms=3, label=name)
    ax_b.axhline(1.0, color="black", ls=":", lw=1)
    ax_b.set_ylabel("relative imbalance b (1 = within the targets)")
    ax_m.set_ylabel("relative migration m (1 = ideal)")
    ax_m.set_yscale("log")
    if m_mark is not None:
        ax_m.axhline(m_mark[0], color="black", ls="--", lw=1, label=m_mark[1])
    for ax in (ax_b, ax_m):
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
