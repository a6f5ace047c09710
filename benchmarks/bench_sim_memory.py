"""Peak resident memory and wall time of one whole simulator run from the command line, outputs included.

python benchmarks/bench_sim_memory.py                       # 100M messages over 1,000 workers, cg (about 2 minutes)
python benchmarks/bench_sim_memory.py --messages 10000000 --workers 100

Runs `scripts/run_topology.py --engine sim` in a child process (its defaults: 2 sources, 1 ms per tuple, input at
80% of what the workers serve, word count) on a Zipf stream (z = 1.0224 over 1M keys), writes the run directory to a
temporary folder, and reports the child's wall time and peak resident set (the kernel's high-water mark, which
counts pages of the run's spilled log while they are mapped) against the size of its per-tuple log held in memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # runnable from a checkout without installing

from experiments.provenance import add_numbers_option  # noqa: E402
from topo.sim.queueing import LOG_ROW_BYTES  # noqa: E402  (the simulator's per-tuple log in memory, bytes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000_000, help="messages in the stream (default 100,000,000)")
    p.add_argument("--workers", type=int, default=1000, help="workers (default 1,000)")
    p.add_argument("--grouping", default="cg", help="grouping (default cg)")
    p.add_argument("--keys", type=int, default=1_000_000, help="distinct keys of the Zipf stream (default 1,000,000)")
    add_numbers_option(p, "its numbers")
    args = p.parse_args(argv)
    if args.messages < 1 or args.workers < 1 or args.keys < 1:
        p.exit(2, "bench_sim_memory.py: --messages, --workers and --keys must be at least 1\n")
    stream = f"zipf:z=1.0224,keys={args.keys},messages={args.messages},seed=7"
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", "sim", "--grouping",
                   args.grouping, "--workers", str(args.workers), "--stream", stream, "--out", f"{tmp}/run",
                   "--json", "--quiet"]
        clock = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - clock
        if done.returncode:
            print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "the run failed", file=sys.stderr)
            return done.returncode
        files = sorted(f.name for f in Path(f"{tmp}/run").iterdir())
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # kilobytes on Linux
    print(f"simulator, {args.grouping}, {args.messages:,} messages x {args.workers:,} workers, {stream}")
    print(f"  wall {wall:.1f} s | peak resident {peak / 1e9:.2f} GB ({peak / 2**30:.2f} GiB) | the per-tuple log "
          f"alone in memory would be {args.messages * LOG_ROW_BYTES / 1e9:.1f} GB | run directory: {', '.join(files)}")
    if args.json:
        print(json.dumps({"grouping": args.grouping, "messages": args.messages, "workers": args.workers,
                          "keys": args.keys, "wall_s": wall, "peak_gb": peak / 1e9,
                          "log_gb": args.messages * LOG_ROW_BYTES / 1e9}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
