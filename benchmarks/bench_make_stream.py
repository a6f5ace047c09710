"""How long precomputing a Zipf stream takes with Spark (`scripts/make_stream.py zipf`, as a user runs it) against
one process writing the same dataset (`topo.data.dataset.write_dataset`), and how much of Spark's time is its start.

python benchmarks/bench_make_stream.py                      # 10M messages, z = 1.2, 100k keys
python benchmarks/bench_make_stream.py --messages 1000000 --json

Each of the three is timed in the same run: a child `make_stream.py` process from start to exit; a child process that
only starts a Spark session and stops it (the start cost Spark pays before any work); and `write_dataset` of the
inline spec in this process, with numba's sampler compiled ahead (`make` does that once).
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
START_ONLY = "from spark.session import get_session; get_session(app='bench-make-stream').stop()"


def child(command: list[str]) -> float:
    """Wall seconds of a child process, start to exit; one line and status 2 if it fails."""
    clock = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        raise SystemExit(f"bench_make_stream.py: {' '.join(command[1:3])}: {last}")
    return time.perf_counter() - clock


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--messages", type=int, default=10_000_000, help="messages of the stream (default 10,000,000)")
    p.add_argument("--z", type=float, default=1.2, help="Zipf exponent (default 1.2)")
    p.add_argument("--keys", type=int, default=100_000, help="distinct keys (default 100,000)")
    add_numbers_option(p, "the times")
    args = p.parse_args(argv)
    from topo.data.dataset import write_dataset
    from topo.data.streamspec import StreamError, parse_stream_spec

    spec = f"zipf:z={args.z},keys={args.keys},messages={args.messages},seed=0"
    try:
        parse_stream_spec(spec)
    except StreamError as exc:
        p.exit(2, f"bench_make_stream.py: {exc}\n")
    with tempfile.TemporaryDirectory() as tmp:
        write_dataset(f"zipf:z={args.z},keys={args.keys},messages=1000,seed=0", f"{tmp}/warm")  # compiled ahead
        clock = time.perf_counter()
        write_dataset(spec, f"{tmp}/one")
        one = time.perf_counter() - clock
        spark = child([sys.executable, "scripts/make_stream.py", "zipf", "--z", str(args.z), "--keys",
                       str(args.keys), "--messages", str(args.messages), "--out", f"{tmp}/spark"])
        start = child([sys.executable, "-c", START_ONLY])
    print(f"zipf z = {args.z:g}, {args.keys:,} keys, {args.messages:,} messages")
    print(f"  make_stream.py (Spark, local[*], start included)  {spark:6.1f} s")
    print(f"  of which starting and stopping a Spark session     {start:6.1f} s")
    print(f"  write_dataset (one process, numpy + Arrow)         {one:6.1f} s   "
          f"spark / one process = {spark / one:.1f}x")
    if args.json:
        print(json.dumps({"messages": args.messages, "z": args.z, "keys": args.keys, "spark_s": spark,
                          "spark_start_s": start, "one_process_s": one}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
