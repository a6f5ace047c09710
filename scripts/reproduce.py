#!/usr/bin/env python3
"""Reproduce a headline experiment of the papers: `--list` names them, NAME runs one into results/NAME/."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

import experiments  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("name", nargs="?", help="experiment to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments and what each reproduces")
    p.add_argument("--quick", action="store_true", help="reduced size: seconds instead of minutes")
    p.add_argument("--out", default="results", help="parent directory of the experiment's folder (default: results)")
    args = p.parse_args(argv)
    if args.list or not args.name:
        for name in experiments.names():
            e = experiments.get(name)
            print(f"{name:22s} {e.paper}\n{'':22s} claim: {e.claim}")
        return 0
    try:
        exp = experiments.get(args.name)
    except ValueError as exc:
        print(f"reproduce.py: error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) / exp.name
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{exp.name}.", dir=out.parent))
    clock = time.perf_counter()
    try:
        numbers = exp.run(tmp, args.quick)
        (tmp / "numbers.json").write_text(json.dumps(numbers, indent=2, default=float) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)  # the folder appears whole or not at all
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"{exp.name}: {exp.paper}")
    for table in sorted(out.glob("*.md")):
        print(table.read_text())
    print(f"written to {out}/ in {time.perf_counter() - clock:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
