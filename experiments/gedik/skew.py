"""Gedik's builds against hashing as skew grows (000, Fig. 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.common import markdown_table, write_csv
from experiments.gedik.figs import span, than, uniform_fit
from experiments.gedik.scaling import METHODS as GEDIK_METHODS
from experiments.gedik.scaling import grow_steps, plot_b_and_m
from experiments.registry import register
from groupings.adaptive import gedik_build as gb
from groupings.adaptive import gedik_cost as gcost
from topo.data.zipf import zipf_pmf

# --- Gedik (000), Fig. 4: imbalance and migration against the Zipf exponent -----------------------------------------



def grow_means(
    pmf: np.ndarray, keys: np.ndarray, top: int, kinds: tuple[int, int, int], *, sigma: float = 0.1
) -> dict[str, tuple[float, float]]:
    """Grow N from 1 to `top` one channel at a time, rebuilding at each step (the paper's protocol); per method
    the mean relative imbalance b and the mean relative migration m over the steps N = 2..top."""
    steps = grow_steps(pmf, keys, top, kinds, sigma=sigma)
    return {name: (float(np.mean([s["b"] for s in rows])), float(np.mean([s["m"] for s in rows])))
            for name, rows in steps.items()}


@register(
    "gedik-skew",
    "Gedik (000), Fig. 4: Zipf exponent z from low to 1, N grown to 10 one channel at a time, resources LCL",
    "at high skew Scan, Redist and Readj balance better than uniform and consistent hashing (consistent hashing "
    "worst) with migration near consistent hashing's, while uniform hashing migrates several times the ideal",
)
def skew(out: Path, quick: bool) -> dict:
    """b and m (means over the growth steps) per Zipf exponent for the three builds, uniform and consistent hashing."""
    keys_count, top = (20_000, 8) if quick else (200_000, 10)
    zs = (0.25, 0.5, 0.75, 1.0) if quick else tuple(round(0.1 * i, 1) for i in range(1, 11))
    keys = np.random.default_rng(5).integers(0, 2**64 - 1, keys_count, dtype=np.uint64, endpoint=True)
    kinds = gcost.parse_resources("LCL")
    rows = []
    for z in zs:
        got = grow_means(zipf_pmf(z, keys_count), keys, top, kinds)
        row: dict = {"z": z}
        for name in GEDIK_METHODS:
            row[f"{name}_b"], row[f"{name}_m"] = got[name]
        rows.append(row)
    write_csv(out / "skew.csv", rows)

    plot_b_and_m(out / "skew.png", zs, rows, GEDIK_METHODS, "Zipf exponent z",
                 f"{keys_count:,} keys, N grown 1..{top}, LCL, alpha = 1.2, sigma = 0.1 (means over the steps)")

    (out / "skew.md").write_text(skew_report(rows, keys_count, top))
    best_build = min(gb.BUILDS, key=lambda b: rows[-1][f"{b}_b"])
    return {
        "z": list(zs),
        **{name: {"b": [r[f"{name}_b"] for r in rows], "m": [r[f"{name}_m"] for r in rows]} for name in GEDIK_METHODS},
        "best_build_at_high_skew": best_build,
    }


def skew_report(rows: list[dict], keys_count: int, top: int) -> str:
    """skew.md: the table against Fig. 4 and the note, every comparison in it taken from `rows` (one per z, with
    `{method}_b` and `{method}_m`, as in skew.csv), so that it can be rewritten from the committed numbers."""
    hi, lo = rows[-1], rows[0]
    paper = {
        "scan": "near ideal m until z > 0.8; worst m of the three",
        "redist": "near ideal m until z > 0.8; best m of the three",
        "readj": "lowest b, up to 8% below the others (LCL/LLL)",
        "uniform": "best b at low skew; m > 8x ideal",
        "consistent": "worst b at high skew (up to +50% vs Readj); lowest m",
    }
    table = [
        {
            "method": name,
            f"b at z={lo['z']}": lo[f"{name}_b"],
            f"b at z={hi['z']}": hi[f"{name}_b"],
            f"m at z={lo['z']}": lo[f"{name}_m"],
            f"m at z={hi['z']}": hi[f"{name}_m"],
            "paper (Fig. 4)": paper[name],
        }
        for name in GEDIK_METHODS
    ]
    hashes = ("uniform", "consistent")
    builds_b = [hi[f"{b}_b"] for b in gb.BUILDS]
    builds_m = [hi[f"{b}_m"] for b in gb.BUILDS]
    hashes_b = [hi[f"{h}_b"] for h in hashes]
    balance = ("every build balances better than both hashes" if max(builds_b) < min(hashes_b)
               else "not every build balances better than both hashes")
    migrate = ("migrates less than uniform hashing" if max(builds_m) < hi["uniform_m"]
               else "does not always migrate less than uniform hashing")
    law, fit = uniform_fit([r["uniform_m"] for r in rows], top)
    why = ("our multiply-shift hash moves about half of the keys when a channel is added, where a modulo hash moves "
           "nearly all of them (m about N - 1)" if law == "N / 2" else "our uniform hash moves nearly all of the keys "
           "when a channel is added, as a modulo hash does")
    paper_m = 8.0
    note = (
        f"\nOurs: {keys_count:,} keys (paper: 10^6), N grown to {top}, one run (paper: mean of 5), b and m averaged "
        f"over the growth steps. At z = {hi['z']} {balance} (b {span(builds_b)} against {span(hashes_b)}) and "
        f"{migrate} (m {span(builds_m)} against uniform's {hi['uniform_m']:.2f}; consistent's "
        f"{hi['consistent_m']:.2f}). Magnitudes differ with the smaller domain (fewer keys make balance harder, "
        "Fig. 8) and with our hash functions and ring: "
        f"{fit}; {why}. Averaged over the growth to N = {top}, our uniform m stays "
        f"{than(max(r['uniform_m'] for r in rows), paper_m, 'above', 'below', 'at')} the paper's {paper_m:g}x.\n"
    )
    return markdown_table(table) + note
