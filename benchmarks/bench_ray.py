"""Overhead of the Ray engine: end-to-end tuples per second with acks, at zero service cost, next to the simulator.

python benchmarks/bench_ray.py                         # cg, 2 sources, 4 workers, 2M Zipf messages, batches of 4000
python benchmarks/bench_ray.py --batch-size 1000 --batch-size 5000 --grouping kg --messages 1000000

Throughput counts every tuple from the sources' start to the end of the run (all acked and merged); overhead is
wall time per tuple (and machine time per tuple: wall x cores). The simulator's figure for the same topology is
the baseline: it emulates the same queueing in one process, without messages.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from topo.ray_engine import run_ray
from topo.sim import simulate
from topo.spec import TopologySpec
from topo.streams import load_stream


def bench_once(spec: TopologySpec, stream, label: str) -> None:
    """Run one configuration on Ray and print its end-to-end figures."""
    result = run_ray(spec, stream)
    summary, clock = result.summary, result.summary["wall_clock_s"]
    tuples, loop = summary["tuples_processed"], clock["loop"]
    cores = os.cpu_count() or 1
    facts = summary["ray"]
    print(
        f"ray {label:>10} batch {spec.batch_size:>5} | {tuples / loop:>9,.0f} tuples/s end to end "
        f"({summary['throughput_tps'] or 0:>9,.0f} first arrival to last finish) | "
        f"{loop / tuples * 1e6:5.2f} us/tuple wall, {loop / tuples * 1e6 * cores:5.2f} us machine | "
        f"p50 latency {summary['latency_ms']['p50']:6.1f} ms | {facts['sub_batches']:,} calls | "
        f"exact {summary['exact']} | setup {clock['setup']:.1f} s, outputs {clock['metrics']:.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    """Time the Ray engine and the simulator on the same topology."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=2_000_000, help="messages in the Zipf stream")
    p.add_argument("--keys", type=int, default=100_000, help="distinct keys")
    p.add_argument("--z", type=float, default=1.2, help="Zipf exponent")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--sources", type=int, default=2)
    p.add_argument("--grouping", default="cg")
    p.add_argument("--batch-size", type=int, action="append", help="tuples per micro-batch (repeat to compare)")
    p.add_argument("--max-pending", type=int, default=16, help="batches in flight per (source, worker) pair")
    args = p.parse_args(argv)
    stream = load_stream(f"zipf:z={args.z},keys={args.keys},messages={args.messages},seed=7")
    import ray

    ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        for batch in args.batch_size or [4000]:
            spec = TopologySpec(grouping=args.grouping, engine="ray", workers=args.workers, sources=args.sources,
                                cost_ms=0.0, batch_size=batch, max_pending=args.max_pending, operator="wordcount")
            bench_once(spec, stream, args.grouping)
            clock = time.perf_counter()
            sim = simulate(spec.with_(engine="sim"), stream)
            wall, parts = time.perf_counter() - clock, sim.summary["wall_clock_s"]
            print(f"sim {args.grouping:>10} batch {batch:>5} | {args.messages / wall:>9,.0f} tuples/s of wall time "
                  f"(loop {parts['loop']:.2f} s, outputs {parts['metrics']:.2f} s) | exact {sim.summary['exact']}")
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
