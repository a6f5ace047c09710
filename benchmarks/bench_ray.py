"""Overhead of the Ray engine: end-to-end tuples per second with acks at zero service cost, next to the simulator
and next to the machine's raw Ray call ceiling, all measured in the same run.

python benchmarks/bench_ray.py                              # pkg, 2 sources, 4 workers, 2M messages: default and
                                                            # large buffers (--whole: then whole-process times)
python benchmarks/bench_ray.py --batch-size 1000 --batch-size 16000 --grouping cg --messages 1000000

Throughput counts every tuple from the sources' start to the end of the run (all acked and merged). The ceiling is
what bare Ray calls reach here: empty calls per second from one caller, and tuples per second when each call
carries one packed buffer of the given size. The simulator emulates the same topology in one process, without
messages. `--whole` also times `run_topology.py` as a new user runs it (start, run, outputs, stop) on both engines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.provenance import add_numbers_option
from topo.data.dataset import load_stream
from topo.ray_engine import run_ray
from topo.ray_engine.protocol import WIRE
from topo.sim import simulate
from topo.spec import TopologySpec

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 8  # calls outstanding per callee while measuring the ceiling
METRICS_PORT = 8080  # never bound: see bench_once


class Sink:
    """A callee that does nothing with what it gets."""

    async def take(self, payload=None) -> int:
        return 0 if payload is None else len(payload)


def call_ceiling(batch: int, seconds: float = 2.0) -> tuple[float, float]:
    """(empty calls/s, tuples/s with one packed buffer of `batch` tuples per call) from one caller to 4 actors."""
    import ray

    sinks = [ray.remote(Sink).options(num_cpus=0).remote() for _ in range(4)]
    ray.get([s.take.remote() for s in sinks])
    buffer = np.zeros(batch, WIRE)
    out = []
    for payload in (None, buffer):
        pending, calls, clock, i = [], 0, time.perf_counter(), 0
        while time.perf_counter() - clock < seconds:
            pending.append(sinks[i % 4].take.remote(payload))
            i += 1
            if len(pending) >= WINDOW * 4:
                done, pending = ray.wait(pending, num_returns=1)
                calls += len(done)
        ray.get(pending)
        calls += len(pending)
        out.append(calls / (time.perf_counter() - clock))
    for s in sinks:
        ray.kill(s)
    return out[0], out[1] * batch


def bench_once(spec: TopologySpec, stream, label: str, metrics: bool = False) -> dict:
    """Run one configuration on Ray (with Prometheus metrics exported, or none), print its end-to-end figures,
    return them."""
    # this bench's Ray is up already, which exports on its own port: a metrics port only turns the recording on
    result = run_ray(spec, stream, metrics_port=METRICS_PORT if metrics else None)
    summary, clock = result.summary, result.summary["wall_clock_s"]
    tuples, loop = summary["tuples_processed"], clock["loop"]
    facts = summary["ray"]
    print(f"ray {label:>6} batch {spec.batch_size:>6} | {tuples / loop:>11,.0f} tuples/s end to end | "
          f"p50 {summary['latency_ms']['p50']:7.1f} ms | {facts['sub_batches']:,} buffers | exact {summary['exact']} | "
          f"bottleneck {summary['headroom']['bottleneck']} | setup {clock['setup']:.1f} s, outputs "
          f"{clock['metrics']:.1f} s")
    return {"ray_tps": tuples / loop, "ray_p50_ms": summary["latency_ms"]["p50"], "ray_exact": summary["exact"],
            "ray_bottleneck": summary["headroom"]["bottleneck"], "ray_setup_s": clock["setup"],
            "buffers": facts["sub_batches"], "loop_s": loop}


def metrics_per_buffer(batch: int, calls: int = 2000) -> float:
    """Seconds a worker's metrics take per served buffer of `batch` tuples: counting its latencies, and its share
    of a publish (one per flush, every 0.5 s, which here follows a few hundred buffers)."""
    from topo.ray_engine.metrics import MetricsContext, WorkerMetrics

    metrics = WorkerMetrics(MetricsContext(run="bench", grouping="pkg"), 0)
    arrival = np.linspace(0.0, 1.0, batch)
    finish = arrival + np.random.default_rng(1).exponential(0.01, batch)
    clock = time.perf_counter()
    for i in range(calls):
        metrics.served(arrival, finish)
        metrics.load(3.0, 0.5, 0)
        if i % 100 == 99:
            metrics.publish()
    return (time.perf_counter() - clock) / calls


def whole_process(engine: str, messages: int, grouping: str) -> float:
    """Seconds `run_topology.py` takes, start to exit, for a saturating zero-cost run of `messages`."""
    out = Path(tempfile.mkdtemp(prefix="bench-ray-")) / engine
    clock = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", engine, "--grouping",
                    grouping, "--workers", "4", "--cost-ms", "0", "--rate", "max",
                    "--stream", f"zipf:z=1.2,keys=100000,messages={messages},seed=7", "--out", str(out),
                    "--overwrite", "--no-plots", "--quiet", "--json"], check=True, capture_output=True)
    seconds = time.perf_counter() - clock
    shutil.rmtree(out.parent, ignore_errors=True)
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Time the Ray engine, the simulator and bare Ray calls on the same topology."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--messages", type=int, default=2_000_000, help="messages in the Zipf stream (default 2M)")
    p.add_argument("--keys", type=int, default=100_000, help="distinct keys (default 100k)")
    p.add_argument("--z", type=float, default=1.2, help="Zipf exponent (default 1.2)")
    p.add_argument("--workers", type=int, default=4, help="workers (default 4)")
    p.add_argument("--sources", type=int, default=2, help="sources (default 2)")
    p.add_argument("--grouping", default="pkg", help="grouping (default pkg)")
    p.add_argument("--batch-size", type=int, action="append",
                   help="buffer capacity in tuples; repeat to compare (default: 1000, the default, and 16000)")
    p.add_argument("--max-pending", type=int, default=16, help="credits per source-worker channel (default 16)")
    p.add_argument("--whole", action="store_true", help="also time whole run_topology.py processes on both engines")
    p.add_argument("--metrics", action="store_true",
                   help="also run each buffer size with Prometheus metrics exported (--metrics-port), to measure "
                        "what the metrics cost in throughput")
    p.add_argument("--repeat", type=int, default=3,
                   help="with --metrics: runs with and without metrics, taken in turns, whose medians are compared "
                        "(a run of 2M tuples lasts about a second, so one pair is mostly noise; default 3)")
    add_numbers_option(p, "every figure")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.exit(2, "bench_ray.py: --repeat must be at least 1\n")
    rows, numbers = [], {"messages": args.messages, "grouping": args.grouping, "workers": args.workers,
                         "sources": args.sources}
    stream = load_stream(f"zipf:z={args.z},keys={args.keys},messages={args.messages},seed=7")
    import ray

    ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        for batch in args.batch_size or [1000, 16000]:
            calls, ceiling = call_ceiling(batch)
            print(f"ceiling     batch {batch:>6} | {ceiling:>11,.0f} tuples/s in bare calls of one packed buffer "
                  f"| {calls:,.0f} empty calls/s (one caller, 4 actors)")
            spec = TopologySpec(grouping=args.grouping, engine="ray", workers=args.workers, sources=args.sources,
                                cost_ms=0.0, batch_size=batch, max_pending=args.max_pending, linger_ms=20.0,
                                operator="wordcount")
            plain = bench_once(spec, stream, args.grouping)
            row = {"batch": batch, "ceiling_tps": ceiling, "empty_calls_per_s": calls, **plain}
            clock = time.perf_counter()
            sim = simulate(spec.with_(engine="sim"), stream)
            row["sim_tps"] = args.messages / (time.perf_counter() - clock)
            tps = row["ray_tps"]
            print(f"sim {args.grouping:>6} batch {batch:>6} | {row['sim_tps']:>11,.0f} tuples/s of wall time "
                  f"| Ray = {tps / row['sim_tps']:.2f}x the simulator, {tps / ceiling:.2f}x the bare-call "
                  f"ceiling | exact {sim.summary['exact']}")
            if args.metrics:
                without, with_ = [tps], []
                for turn in range(args.repeat):
                    with_.append(bench_once(spec, stream, "+metrics", metrics=True)["ray_tps"])
                    if turn + 1 < args.repeat:
                        without.append(bench_once(spec, stream, args.grouping)["ray_tps"])
                row["ray_tps_runs"], row["ray_tps_metrics_runs"] = without, with_
                row["ray_tps"], row["ray_tps_metrics"] = float(np.median(without)), float(np.median(with_))
                print(f"metrics     batch {batch:>6} | exported metrics cost "
                      f"{1 - row['ray_tps_metrics'] / row['ray_tps']:.1%} of the throughput (medians of "
                      f"{len(without)} runs each, taken in turns; the runs without metrics ranged "
                      f"{min(without) / 1e6:.2f}M-{max(without) / 1e6:.2f}M tuples/s)")
                per_buffer = metrics_per_buffer(batch)
                row["metrics_us_per_buffer"] = per_buffer * 1e6
                row["metrics_share"] = per_buffer * plain["buffers"] / plain["loop_s"]
                print(f"metrics     batch {batch:>6} | a worker's metrics take {per_buffer * 1e6:.1f} us per buffer "
                      f"(timed alone): {row['metrics_share']:.2%} of the run's wall time at its "
                      f"{plain['buffers']:,} buffers")
            rows.append(row)
    finally:
        ray.shutdown()
    if args.whole:
        times = {engine: whole_process(engine, args.messages, args.grouping) for engine in ("sim", "ray")}
        print(f"whole process, {args.messages:,} messages: sim {times['sim']:.1f} s, ray {times['ray']:.1f} s "
              f"({times['ray'] / times['sim']:.2f}x)")
        numbers["whole_s"] = times
    if args.json:
        print(json.dumps({**numbers, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
