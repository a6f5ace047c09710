"""How fast the simulator runs, in one run: every grouping family at 10M messages over 100 workers, key grouping at
1M messages over 10, 100 and 1,000 workers, and the routing-only engine on the same streams as the floor.

python benchmarks/bench_sim.py                                  # the whole table (about 4 minutes on one core)
python benchmarks/bench_sim.py --messages 1000000 --grouping kg --workers 100 --workers 1000

Each row: wall time of `simulate` (the stream made beforehand; the median of `--repeat` runs, the fastest and slowest
in brackets), simulated tuples per wall second, the process's kernel CPU seconds in that run (mostly the first touch
of fresh memory, which on this virtual machine varies from run to run), the simulator's own clocks (the event loop,
the sources' steps within it unless the compiled loop ran, the outputs), buffers simulated, events the loop handled
and its time per event (a case whose cost grows only with its events costs nothing for idle workers), and the
routing-only engine's time on the same stream and grouping (`experiments.routing.route_stream`: no queues, no acks, no
clock), which no simulator of the same strategy can beat. Cost 0.1 ms per tuple, 1 source, saturating input, the
spec's default buffering (100 tuples, 5 ms linger, 16 buffers in flight); Zipf z = 1.2 over 100,000 keys.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from experiments.provenance import add_numbers_option  # noqa: E402
from experiments.routing import route_stream  # noqa: E402
from topo.data.dataset import load_stream  # noqa: E402
from topo.sim import simulate  # noqa: E402
from topo.spec import TopologySpec  # noqa: E402

FAMILIES = ("kg", "sg", "pkg", "cg", "fish", "gedik")  # hashing, shuffling, choices, and the adaptive ones
DEFAULT_CASES = [*((10_000_000, 100, g) for g in FAMILIES), *((1_000_000, n, "kg") for n in (10, 100, 1000))]


def bench(messages: int, workers: int, grouping: str, keys: int, z: float, streams: dict, repeat: int = 1) -> dict:
    """Simulate one configuration `repeat` times: the run of median wall time, where its time went, the fastest
    and slowest walls, and the routing-only floor on the same stream."""
    if messages not in streams:
        streams.clear()  # one stream in memory at a time
        streams[messages] = load_stream(f"zipf:z={z},keys={keys},messages={messages},seed=7")
    stream = streams[messages]
    spec = TopologySpec(grouping=grouping, engine="sim", workers=workers, sources=1, cost_ms=0.1)
    runs = []
    for _ in range(repeat):
        kernel, clock = resource.getrusage(resource.RUSAGE_SELF).ru_stime, time.perf_counter()
        result = simulate(spec, stream)
        wall, kernel = time.perf_counter() - clock, resource.getrusage(resource.RUSAGE_SELF).ru_stime - kernel
        runs.append((wall, kernel, result.summary))
        del result  # one run's outputs in memory at a time
    runs.sort(key=lambda run: run[0])
    wall, kernel, summary = runs[len(runs) // 2]
    clock = time.perf_counter()
    route_stream(grouping, stream.key_hash, workers, sources=1, seed=spec.seed)
    floor = time.perf_counter() - clock
    clocks = summary["wall_clock_s"]
    return {"grouping": grouping, "messages": messages, "workers": workers, "wall_s": wall, "kernel_s": kernel,
            "fastest_s": runs[0][0], "slowest_s": runs[-1][0],
            "tuples_per_s": messages / wall, "loop_s": clocks["loop"], "route_s": clocks["route"],
            "outputs_s": clocks["metrics"], "buffers": summary["sim"]["batches"], "events": summary["sim"]["events"],
            "floor_s": floor}


def line(r: dict) -> str:
    # the compiled event loop does not time its sources' steps apart
    inner = "compiled loop  " if r["route_s"] is None else f"sources {r['route_s']:6.2f}"
    spread = f" ({r['fastest_s']:.2f}-{r['slowest_s']:.2f})" if r["slowest_s"] > r["fastest_s"] else ""
    return (f"{r['grouping']:>6} {r['messages']:>11,} x {r['workers']:>5,} | wall {r['wall_s']:7.2f} s{spread} "
            f"{r['tuples_per_s'] / 1e6:5.2f} M tuples/s | kernel {r['kernel_s']:4.2f} s "
            f"| loop {r['loop_s']:6.2f} ({inner}) "
            f"outputs {r['outputs_s']:5.2f} | {r['buffers']:>10,} buffers {r['events']:>10,} events "
            f"{1e6 * r['loop_s'] / max(r['events'], 1):4.2f} us each | routing only {r['floor_s']:5.2f} s")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark cases (the whole table by default) and print one line each."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--messages", type=int,
                   help="messages in the stream (default: the whole table; 1,000,000 when another option is given)")
    p.add_argument("--workers", type=int, action="append",
                   help="workers, repeatable (default: the whole table; 100 when another option is given)")
    p.add_argument("--grouping", action="append",
                   help="grouping, repeatable (default: the whole table; kg when another option is given)")
    p.add_argument("--keys", type=int, default=100_000, help="distinct keys of the Zipf stream (default 100,000)")
    p.add_argument("--z", type=float, default=1.2, help="Zipf exponent of the stream (default 1.2)")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of each case; the line gives the run of median wall time, and the fastest and slowest "
                        "walls in brackets (default 3: this machine's first touch of fresh memory varies by seconds)")
    add_numbers_option(p, "every case's numbers")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1 (got {args.repeat})")
    if args.messages is None and args.workers is None and args.grouping is None:
        cases = DEFAULT_CASES
    else:
        cases = [(args.messages or 1_000_000, n, g) for g in args.grouping or ["kg"] for n in args.workers or [100]]
    streams: dict = {}
    spec = TopologySpec()
    print(f"simulator, 1 source, cost 0.1 ms, the spec's buffering ({spec.batch_size} tuples, {spec.linger_ms:g} ms "
          f"linger, {spec.max_pending} in flight), Zipf z={args.z} over {args.keys:,} keys, saturating input, "
          f"median of {args.repeat} run{'s' if args.repeat > 1 else ''}")
    rows = []
    for messages, workers, grouping in cases:
        rows.append(bench(messages, workers, grouping, args.keys, args.z, streams, args.repeat))
        print(line(rows[-1]), flush=True)
    if args.json:
        print(json.dumps({"z": args.z, "keys": args.keys, "repeat": args.repeat, "cases": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
