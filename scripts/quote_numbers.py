#!/usr/bin/env python3
"""Fill in every number the README and docs/ quote from an experiment, from its committed results/NAME/numbers.json
(the marker after each number says which experiment and which value: see experiments/quoted.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from experiments import quoted  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--check", action="store_true",
                   help="change nothing; list every quoted number that differs from its results and exit with "
                        "status 1 if there is one")
    args = p.parse_args(argv)
    try:
        if args.check:
            stale = quoted.stale()
            for doc, line, says, now in stale:
                print(f"{doc}:{line}: says {says}, its results say {now}")
            print(f"{quoted.marked()} quoted numbers, {len(stale)} stale")
            return 1 if stale else 0
        changed = quoted.quote()
    except (quoted.QuoteError, OSError) as exc:
        print(f"quote_numbers.py: error: {exc}", file=sys.stderr)
        return 2
    for doc in changed:
        print(f"rewrote {doc.relative_to(quoted.ROOT)}")
    print(f"{quoted.marked()} quoted numbers, {len(changed)} documents rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
