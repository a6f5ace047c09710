#!/usr/bin/env python3
"""Table 1 of the Consistent Grouping paper: normalized imbalance vs number of bins, one source.

The same computation as `scripts/reproduce.py cg-table1`, with every size adjustable. Zipf streams with the p1 of
the paper's Wikipedia (9.32%) and Twitter (2.67%) traces stand in for them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from experiments.consistent_grouping.table1 import markdown, plot, table1  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=10_000_000, help="messages per stream (default 10,000,000)")
    p.add_argument("--keys", type=int, default=1_000_000, help="distinct keys per stream (default 1,000,000)")
    p.add_argument("--bins", default="10,100,1000", help="comma-separated bin counts (default 10,100,1000)")
    p.add_argument("--eps", type=float, default=0.3, help="eps of porc and chbl (default 0.3, as the paper)")
    p.add_argument("--seed", type=int, default=7, help="stream seed, and run seed of the grouping (default 7)")
    p.add_argument("--markdown", action="store_true", help="print a markdown table (for the README)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="also draw imbalance vs bins into this PNG file, e.g. runs/table1.png (the committed plot, "
                        "results/cg-table1/table1.png, is reproduce.py cg-table1's)")
    args = p.parse_args(argv)
    try:
        bins_list = [int(b) for b in args.bins.split(",")]
    except ValueError:
        p.error(f"--bins {args.bins}: expected comma-separated whole numbers")
    rows = table1(args.messages, args.keys, bins_list, args.eps, args.seed,
                  log=lambda line: print(line, file=sys.stderr))
    if args.plot:
        plot(Path(args.plot), rows, bins_list)
    if args.markdown:
        print(markdown(rows, bins_list), end="")
    else:
        for trace, name, vals in rows:
            print(trace, name, " ".join(f"{v:.4g}" for v in vals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
