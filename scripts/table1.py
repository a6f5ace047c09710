#!/usr/bin/env python3
"""Table 1 of the Consistent Grouping paper: normalized imbalance vs number of bins, one source.

Normalized imbalance = (max bin load - mean bin load) / mean bin load after the whole stream is routed.
The paper's Wikipedia (p1 = 9.32%) and Twitter (p1 = 2.67%) traces are not available offline, so this uses
bounded Zipf streams whose exponent is solved for the same p1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

import numpy as np  # noqa: E402
from scipy.optimize import brentq  # noqa: E402

import groupings  # noqa: E402
from topo.streams import load_stream, zipf_p1  # noqa: E402

STRATEGIES = ("kg", "pkg", "potc", "sg", "porc", "chbl")
PAPER = {  # Table 1 of the paper, for the WP-like and TW-like columns
    "wp": {"kg": (0.8, 9.15, 93), "pkg": (8e-7, 3.67, 45.59), "potc": (8e-7, 8e-6, 9e-5),
           "sg": (4e-7, 3e-6, 4e-6), "porc": (0.3, 0.3, 0.3), "chbl": (0.3, 0.3, 0.3)},
    "tw": {"kg": (2.2, 25, 246), "pkg": (1.52, 11.34, 22), "potc": (9.5e-8, 2e-6, 2e-5),
           "sg": (0, 2e-7, 6e-6), "porc": (0.3, 0.3, 0.3), "chbl": (0.3, 0.3, 0.3)},
}
TARGET_P1 = {"wp": 0.0932, "tw": 0.0267}


def solve_z(p1: float, keys: int) -> float:
    """The Zipf exponent whose most frequent of `keys` ranks has probability p1."""
    return float(brentq(lambda z: zipf_p1(z, keys) - p1, 0.05, 4.0))


def normalized_imbalance(workers: np.ndarray, bins: int) -> float:
    """(max - mean) / mean of the per-bin message counts."""
    load = np.bincount(workers, minlength=bins).astype(float)
    return float(load.max() / load.mean() - 1.0)


def plot(path: Path, rows: list[tuple[str, str, list[float]]], bins_list: list[int]) -> None:
    """Imbalance vs bins on log axes, one panel per trace; the paper's values as hollow markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TARGET_P1), figsize=(11, 4.2), sharey=True)
    floor = 1e-7  # zero imbalance has no place on a log axis
    for ax, trace in zip(axes, TARGET_P1, strict=True):
        for i, name in enumerate(STRATEGIES):
            ours = next(v for t, n, v in rows if t == trace and n == name)
            color = f"C{i}"
            ax.plot(bins_list, np.maximum(ours, floor), "o-", color=color, label=name)
            ax.plot(bins_list, np.maximum(PAPER[trace][name], floor), "s", mfc="none", color=color, ms=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bins")
        ax.set_title(f"{trace.upper()}-like (p1 = {TARGET_P1[trace]:.2%}); hollow = paper")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("normalized imbalance")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=10_000_000, help="messages per stream (default 10,000,000)")
    p.add_argument("--keys", type=int, default=1_000_000, help="distinct keys per stream (default 1,000,000)")
    p.add_argument("--bins", default="10,100,1000", help="comma-separated bin counts (default 10,100,1000)")
    p.add_argument("--eps", type=float, default=0.3, help="eps of porc and chbl (default 0.3, as the paper)")
    p.add_argument("--seed", type=int, default=7, help="stream and grouping seed (default 7)")
    p.add_argument("--markdown", action="store_true", help="print a markdown table (for the README)")
    p.add_argument("--plot", default=None, metavar="PNG", help="also draw imbalance vs bins into this PNG file")
    args = p.parse_args(argv)
    bins_list = [int(b) for b in args.bins.split(",")]

    rows = []
    for trace, p1 in TARGET_P1.items():
        z = solve_z(p1, args.keys)
        stream = load_stream(f"zipf:z={z:.6f},keys={args.keys},messages={args.messages},seed={args.seed}")
        print(f"{trace.upper()}-like stream: z = {z:.4f}, keys = {args.keys:,}, messages = {args.messages:,}, "
              f"p1 = {stream.meta['p1']:.4f}", file=sys.stderr)
        for name in STRATEGIES:
            params = {"eps": args.eps} if name in ("porc", "chbl") else {}
            vals = []
            for b in bins_list:
                t0 = time.perf_counter()
                g = groupings.make(name, workers=b, seed=args.seed, **params)
                vals.append(normalized_imbalance(g.route(stream.key_hash), b))
                print(f"  {name:5s} bins={b:<5d} {vals[-1]:.3g}  ({time.perf_counter() - t0:.1f} s)",
                      file=sys.stderr)
            rows.append((trace, name, vals))

    if args.plot:
        plot(Path(args.plot), rows, bins_list)
    if args.markdown:
        head = " | ".join(f"{t.upper()} {b}" for t in TARGET_P1 for b in bins_list)
        print(f"| | {head} |")
        print("|---" * (1 + len(bins_list) * len(TARGET_P1)) + "|")
        for name in STRATEGIES:
            cells = []
            for trace in TARGET_P1:
                ours = next(v for t, n, v in rows if t == trace and n == name)
                cells += [f"{o:.3g} ({pp:.3g})" for o, pp in zip(ours, PAPER[trace][name], strict=True)]
            print(f"| {name} | " + " | ".join(cells) + " |")
    else:
        for trace, name, vals in rows:
            print(trace, name, " ".join(f"{v:.4g}" for v in vals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
