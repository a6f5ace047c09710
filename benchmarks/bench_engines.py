"""The `make run` spec on both engines, as a user runs it: `scripts/run_topology.py` in a child process, per engine
and grouping, and what each run reports with the wall time of its whole process.

python benchmarks/bench_engines.py                          # cg and kg, 200k messages (about 2 minutes)
python benchmarks/bench_engines.py --grouping pkg --messages 50000

The spec is the first run's (Fig. 8 of Consistent Grouping: 2 sources, 10 workers of which three are 5x faster,
1 ms per tuple, input at 80% of what the workers serve together, a Zipf stream with Wikipedia's p1), with
`--messages` messages; everything else is the command line's default, so the simulator models Ray's transit.
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


def run(engine: str, grouping: str, messages: int) -> dict:
    """One whole `run_topology.py` process: its summary's headline figures and its wall time."""
    stream = f"zipf:z=1.0224,keys=100000,messages={messages},seed=7"
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", engine, "--grouping",
                   grouping, "--stream", stream, "--out", f"{tmp}/run", "--no-plots", "--json", "--quiet"]
        clock = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - clock
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "the run failed"
        raise SystemExit(f"bench_engines.py: {engine} {grouping}: {last}")
    s = json.loads(done.stdout.strip().splitlines()[-1])
    room = s["headroom"]
    return {"engine": engine, "grouping": grouping, "tps": s["throughput_tps"], "delivered": room["delivered_share"],
            "p50_ms": s["latency_ms"]["p50"], "p99_ms": s["latency_ms"]["p99"], "imbalance": s["imbalance"],
            "bottleneck": room["bottleneck"], "process_s": wall}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--grouping", action="append", help="grouping, repeatable (default: cg and kg)")
    p.add_argument("--messages", type=int, default=200_000, help="messages of the stream (default 200,000)")
    add_numbers_option(p, "every row")
    args = p.parse_args(argv)
    if args.messages < 1:
        p.exit(2, "bench_engines.py: --messages must be at least 1\n")
    rows = []
    print(f"the make run spec, {args.messages:,} messages; whole process = run_topology.py's wall time")
    print(f"{'engine':6s} {'grouping':8s} {'tuples/s':>9s} {'deliv':>6s} {'p50 ms':>8s} {'p99 ms':>9s} "
          f"{'imbal':>6s} {'process s':>9s}  bottleneck")
    for grouping in args.grouping or ["cg", "kg"]:
        for engine in ("sim", "ray"):
            r = run(engine, grouping, args.messages)
            rows.append(r)
            print(f"{engine:6s} {grouping:8s} {r['tps']:9,.0f} {r['delivered']:6.1%} {r['p50_ms']:8.1f} "
                  f"{r['p99_ms']:9.1f} {r['imbalance']:6.3f} {r['process_s']:9.1f}  {r['bottleneck']}", flush=True)
    if args.json:
        print(json.dumps({"messages": args.messages, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
