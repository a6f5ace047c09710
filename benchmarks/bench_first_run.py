"""A new user's first `make run` against their second: a fresh clone of this checkout's commit, `make run` (the
install from requirements.lock, numba's cache filled by `python -m topo.warm`, then the default run on Ray actors),
then `make run` again, in the same clone.

python benchmarks/bench_first_run.py            # about 5 minutes on 2 cores
python benchmarks/bench_first_run.py --json

The second run is the baseline: the first should have the same headroom verdict, its throughput and p99 near the
second's, and no run may add a compiled entry to numba's cache (a kernel compiled while a run's clock runs is what
made first runs engine-bound).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.provenance import add_numbers_option

ROOT = Path(__file__).resolve().parents[1]


def make_run(clone: Path) -> tuple[dict, float]:
    """The summary of one `make run` in `clone`, and its wall seconds; one line and status 2 if it fails."""
    clock = time.perf_counter()
    done = subprocess.run(["make", "run"], cwd=clone, capture_output=True, text=True)
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        raise SystemExit(f"bench_first_run.py: make run: {last}")
    return json.loads((clone / "runs" / "make-run" / "summary.json").read_text()), time.perf_counter() - clock


def compiled(clone: Path) -> set[str]:
    """numba's compiled entries in the clone's caches (the project's folders, not the virtualenv's)."""
    return {str(p.relative_to(clone)) for p in clone.rglob("*.nbc") if ".venv" not in p.parts}


def facts(summary: dict, seconds: float) -> dict:
    rate = summary["config"].get("rate")
    return {"wall_s": seconds, "throughput_tps": summary["throughput_tps"],
            "of_rate": summary["throughput_tps"] / rate if rate else None,
            "p50_ms": summary["latency_ms"]["p50"], "p99_ms": summary["latency_ms"]["p99"],
            "bottleneck": summary["headroom"]["bottleneck"], "exact": summary["exact"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_numbers_option(p, "both runs' throughput, p99, verdict and wall time, and their ratios")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-first-run-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        first, first_s = make_run(clone)
        after_first = compiled(clone)
        second, second_s = make_run(clone)
        added = sorted(compiled(clone) - after_first)
    one, two = facts(first, first_s), facts(second, second_s)
    out = {"first": one, "second": two, "tps_first_over_second": one["throughput_tps"] / two["throughput_tps"],
           "p99_first_over_second": one["p99_ms"] / two["p99_ms"], "compiled_by_the_second": added}
    from rich.console import Console
    from rich.table import Table

    table = Table(title="make run on a fresh clone: the first (with the install) against the second")
    for col in ("run", "wall s", "tuples/s", "of the rate", "p50 ms", "p99 ms", "bottleneck", "exact"):
        table.add_column(col)
    for name, f in (("first", one), ("second", two)):
        table.add_row(name, f"{f['wall_s']:.0f}", f"{f['throughput_tps']:,.0f}", f"{f['of_rate']:.1%}",
                      f"{f['p50_ms']:.1f}", f"{f['p99_ms']:.0f}", f["bottleneck"], "yes" if f["exact"] else "no")
    Console(stderr=args.json).print(table)
    print(f"first / second: throughput {out['tps_first_over_second']:.3f}, p99 {out['p99_first_over_second']:.2f}; "
          f"compiled entries the second run added: {len(added)}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
