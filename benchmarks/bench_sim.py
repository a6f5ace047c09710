"""How fast the simulator runs: wall time and simulated tuples per wall second, routing time reported apart.

python benchmarks/bench_sim.py                       # 10M x 100 workers and 1M x 10, with sg and kg
python benchmarks/bench_sim.py --messages 2000000 --workers 50 --sources 4 --grouping pkg
"""

from __future__ import annotations

import argparse
import sys
import time

from topo.data.dataset import load_stream
from topo.sim import simulate
from topo.spec import TopologySpec

DEFAULT_CASES = [(10_000_000, 100), (1_000_000, 10)]


def bench(messages: int, workers: int, sources: int, grouping: str, keys: int, z: float) -> None:
    """Simulate one configuration and print where the time went."""
    clock = time.perf_counter()
    stream = load_stream(f"zipf:z={z},keys={keys},messages={messages},seed=7")
    made = time.perf_counter() - clock
    spec = TopologySpec(grouping=grouping, engine="sim", workers=workers, sources=sources, cost_ms=0.1)
    clock = time.perf_counter()
    result = simulate(spec, stream)
    wall = time.perf_counter() - clock
    sim, clock_s = result.summary["sim"], result.summary["wall_clock_s"]
    engine = wall - clock_s["route"]
    print(
        f"{grouping:>4} {messages:>11,} msgs {workers:>4} workers {sources:>3} sources | "
        f"wall {wall:6.2f} s (loop {clock_s['loop']:5.2f}, routing {clock_s['route']:5.2f}, "
        f"outputs {clock_s['metrics']:5.2f}) | {messages / engine / 1e6:5.2f} M tuples/s without routing, "
        f"{messages / wall / 1e6:5.2f} M with | {sim['batches']:,} batches | stream {made:4.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark cases named on the command line (or the default ones)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, help="messages in the stream (default: 10M and 1M)")
    p.add_argument("--workers", type=int, help="workers (default: 100 and 10)")
    p.add_argument("--sources", type=int, default=1, help="sources, each with its own grouping")
    p.add_argument("--grouping", action="append", help="grouping(s) to time (default: sg and kg)")
    p.add_argument("--keys", type=int, default=100_000, help="distinct keys of the Zipf stream")
    p.add_argument("--z", type=float, default=1.2, help="Zipf exponent of the stream")
    args = p.parse_args(argv)
    if args.messages is None and args.workers is None:
        cases = DEFAULT_CASES
    else:
        cases = [(args.messages or DEFAULT_CASES[0][0], args.workers or DEFAULT_CASES[0][1])]
    for messages, workers in cases:
        for grouping in args.grouping or ["sg", "kg"]:
            bench(messages, workers, args.sources, grouping, args.keys, args.z)
    return 0


if __name__ == "__main__":
    sys.exit(main())
