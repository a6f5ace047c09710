"""How long Gedik's builds take (000, Figs. 12-14): Scan, Redist and Readj against sigma, N and skew z.

Construction time is the wall clock of `gedik_build.build` (median of repeats), measured for the three builds in
the same run and on the same inputs, so only ratios between them carry over to another machine; next to it is
the deterministic count of candidate placements each build scored, on which the directions are checked. Every
timing is the rebuild when channel N joins a consistent hash over N - 1 channels: every build starts from the
same p^t, so the times compare the algorithms and not the maps their earlier steps left.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from experiments.common import markdown_table, pyplot, write_csv
from experiments.gedik.figs import ALPHAS, REPLICAS, ring, span, than, tracked_count, zipf_keys
from experiments.registry import register
from groupings.adaptive import gedik_build as gb
from groupings.adaptive import gedik_cost as gcost
from groupings.adaptive.gedik_function import make_ring


def _median_time(fn, reps: int) -> tuple[float, object]:
    """Median wall clock of `reps` calls of fn() and the last result."""
    times, got = [], None
    for _ in range(reps):
        started = time.perf_counter()
        got = fn()
        times.append(time.perf_counter() - started)
    return float(np.median(times)), got


def build_cost(domain: int, z: float, sigma: float, n: int, reps: int, res: str = "LCL") -> dict:
    """Per build: median time and candidate evaluations placing the tracked keys on n channels from p^t =
    consistent hashing over n - 1; and the median time to construct the consistent hash over n channels."""
    kinds = gcost.parse_resources(res)
    keys, pmf = zipf_keys(z, domain, 5)
    r = tracked_count(pmf, kinds, sigma, n)
    tracked, tf = keys[:r], pmf[:r]
    old, new = ring(n - 1).channel_of(tracked), ring(n).channel_of(tracked)
    out: dict = {"tracked": r}
    for build in gb.BUILDS:
        seconds, placed = _median_time(lambda b=build: gb.build(b, tf, old, new, n, kinds, ALPHAS), reps)
        out[f"{build}_s"], out[f"{build}_evals"] = seconds, placed.evaluations
    out["ring_s"], _ = _median_time(lambda: make_ring(n, REPLICAS), reps)
    return out


def _time_panels(path: Path, sweeps: list[tuple[str, list, list[dict]]], title: str) -> None:
    """One panel per sweep: each build's time (solid, log) and the ring's construction time (dotted)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(sweeps), figsize=(5.5 * len(sweeps), 4.2), squeeze=False)
    for ax, (label, xs, rows) in zip(axes[0], sweeps, strict=True):
        for build in gb.BUILDS:
            ax.plot(xs, [r[f"{build}_s"] * 1e3 for r in rows], "o-", ms=3, label=build)
        ax.plot(xs, [r["ring_s"] * 1e3 for r in rows], "k:", label="consistent hash (ring)")
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("construction time (ms, median)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@register(
    "gedik-build-time",
    "Gedik (000), Figs. 12-14: construction time of Scan, Redist and Readj against sigma, N and skew z, LCL",
    "Readj takes the longest at low sigma, many times Redist, and Scan is the fastest; all grow super-linearly "
    "with N; Scan is insensitive to skew while Redist and Readj grow for z > 0.8, Readj faster",
    volatile=("_s",),  # the builds' wall-clock times; their evaluation counts are compared
)
def build_time(out: Path, quick: bool) -> dict:
    """Median build times and candidate evaluations over the sweeps of Figs. 12, 13 and 14."""
    if quick:
        domain, reps = 100_000, 3
        sigmas, ns, zs = (0.05, 0.1, 1.0), (4, 8, 16), (0.6, 0.8, 0.9, 1.0)
    else:
        domain, reps = 1_000_000, 5
        sigmas, ns = (0.008, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), (2, 4, 8, 16, 24, 32, 48, 64)
        zs = tuple(round(0.1 * i, 1) for i in range(1, 11))
    by_sigma = [build_cost(domain, 1.0, s, 10, reps) for s in sigmas]
    by_n = [build_cost(domain, 1.0, 0.1, n, reps) for n in ns]
    by_z = [build_cost(domain, z, 0.1, 10, reps) for z in zs]
    sweeps = [("sigma", sigmas, by_sigma), ("N", ns, by_n), ("z", zs, by_z)]
    write_csv(out / "build_time.csv", [{"sweep": name, "x": x, **r} for name, xs, rows in sweeps
                                       for x, r in zip(xs, rows, strict=True)])
    _time_panels(out / "build_time.png", [("frequency threshold scaler sigma (z = 1, N = 10)", list(sigmas), by_sigma),
                                          ("channels N (z = 1, sigma = 0.1)", list(ns), by_n),
                                          ("Zipf exponent z (sigma = 0.1, N = 10)", list(zs), by_z)],
                 f"|D| = {domain:,}, LCL, alpha = 1.2, U^APM; median of {reps} builds, all in one run")

    (out / "build_time.md").write_text(build_time_report(domain, reps, sigmas, ns, zs, by_sigma, by_n, by_z))
    return {"domain": domain, "reps": reps, "sigma": list(sigmas), "n": list(ns), "z": list(zs),
            "by_sigma": by_sigma, "by_n": by_n, "by_z": by_z}


def build_time_report(domain: int, reps: int, sigmas: list | tuple, ns: list | tuple, zs: list | tuple,
                      by_sigma: list[dict], by_n: list[dict], by_z: list[dict]) -> str:
    """build_time.md: the table against Figs. 12-14 and the note, every comparison in them taken from the sweeps'
    rows (as numbers.json holds them)."""
    low, default = by_sigma[0], by_sigma[sigmas.index(0.1)]
    z8 = zs.index(0.8)

    def grow(rows: list[dict], build: str, i: int, j: int) -> float:
        return rows[j][f"{build}_evals"] / max(rows[i][f"{build}_evals"], 1)

    table = [
        {"Fig.": "12", "claim": f"lowest sigma ({sigmas[0]:g}): Readj slowest, Redist ~20x faster",
         "paper": "Readj ~10 s, Redist > 0.5 s (sigma 0.008)",
         "ours": f"Readj {low['readj_s']:.3g} s, Redist {low['redist_s']:.3g} s, Scan {low['scan_s']:.2g} s "
                 f"(Readj / Redist {low['readj_s'] / low['redist_s']:.1f}x), R = {low['tracked']}"},
        {"Fig.": "12", "claim": "default sigma = 0.1: Readj fast", "paper": "Readj < 0.05 s",
         "ours": f"Readj {default['readj_s']:.2g} s, Redist {default['redist_s']:.2g} s, "
                 f"Scan {default['scan_s']:.2g} s, ring {default['ring_s']:.2g} s, R = {default['tracked']}"},
        {"Fig.": "12", "claim": "Scan is the fastest",
         "paper": "Scan cheapest; for Scan the ring costs about as much as the explicit hash",
         "ours": "Scan's evaluations / Redist's, Readj's at the lowest sigma: "
                 f"{low['scan_evals'] / low['redist_evals']:.3f}, {low['scan_evals'] / low['readj_evals']:.4f}; "
                 f"Scan's time / ring's at sigma = 0.1: {default['scan_s'] / default['ring_s']:.2f}"},
        {"Fig.": "13", "claim": "super-linear in N", "paper": "all super-linear (R grows linearly with N)",
         "ours": f"evaluations x{ns[-1] // ns[0]} N: " + ", ".join(
             f"{b} x{grow(by_n, b, 0, -1):.0f}" for b in gb.BUILDS) + f"; R {by_n[0]['tracked']} -> "
             f"{by_n[-1]['tracked']}"},
        {"Fig.": "14", "claim": "Scan insensitive to skew; Redist, Readj grow for z > 0.8, Readj faster",
         "paper": "flat until z = 0.8, then Readj rises faster than Redist",
         "ours": "evaluations z 0.8 -> 1: " + ", ".join(f"{b} x{grow(by_z, b, z8, -1):.1f}" for b in gb.BUILDS)
                 + "; Scan + ring time over z: " + ", ".join(f"{1e3 * (r['scan_s'] + r['ring_s']):.1f}" for r in by_z)
                 + " ms"},
    ]
    built = [z for z, r in zip(zs, by_z, strict=True) if r["tracked"] > 0]
    empty = [r for r in by_z if r["tracked"] == 0]
    ring_share = [r["ring_s"] / (r["scan_s"] + r["ring_s"]) for r in empty]
    paper_redist = 0.5  # Fig. 12: Redist over 0.5 s at sigma = 0.008
    note = (
        f"\nOurs: |D| = {domain:,} Zipf keys with exact frequencies, LCL, alpha = 1.2, U^APM; each time is the "
        f"median of {reps} builds on one core of a shared 2-core machine, so the absolute numbers are this "
        "machine's and only the ratios between builds (measured in the same run) carry over; the evaluation "
        "counts (candidate placements scored) are deterministic. Each build places the tracked keys when channel "
        "N joins a consistent hash over N - 1 channels (the same inputs for every build); the paper times the "
        "rebuilds of its growth protocol, whose starting maps differ per build.\n\n"
        "How ours differs: our builds are compiled and Scan and Redist update the balance penalty in O(1) per "
        f"candidate; Redist takes {low['redist_s']:.2g} s at sigma = {sigmas[0]:g}, "
        f"{than(low['redist_s'], paper_redist, 'above', 'below', 'at', 3)} the paper's over {paper_redist:g} s. "
        "Readj scores every move and swap of the tracked keys "
        "in each of its many readjustments (it keeps going while one improves the balance), so at "
        f"sigma = {sigmas[0]:g} it takes {low['readj_s']:.2g} s, {low['readj_s'] / low['redist_s']:.0f}x Redist's "
        f"time (the paper: about 10 s, 20x a Redist of over 0.5 s; R = {low['tracked']} here, the paper's largest "
        f"explicit hash is about 500). For Scan the ring's {REPLICAS} points per channel cost "
        f"{than(default['ring_s'], default['scan_s'], 'more than', 'less than', 'as much as', 4)} the explicit hash "
        f"({default['ring_s'] / default['scan_s']:.2g}x Scan's build at sigma = 0.1, N = 10; the paper found them "
        "about equal)."
        + (f" Below z = {built[0]:g} no key reaches delta at N = 10, so nothing is built and the time is the call's "
           f"overhead; the consistent hash's {REPLICAS} points per channel then take {span(ring_share, '.0%')} of "
           "Scan's time with the ring, as the paper found it dominating.\n" if built and empty else "\n")
    )
    return markdown_table(table) + note
