"""Compile every numba kernel into numba's on-disk cache once, as pip compiles .pyc files when it installs.

With a cold cache, every process that first routes with a strategy compiles it (dc and fish take about 6 s each
on 2 cores), and several Ray actors started together each compile the same kernels. `make` runs this once after
installing, so a first run or test session loads compiled code instead; running it again only loads the caches.
numba compiles once per tuple of argument types, and Ray hands its actors read-only arrays where the simulator's
are writable, so each grouping is also rehearsed as a Ray source routes (`topo.model.rehearsal`), and the outputs
fold a log out of order, as a Ray run's is.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import groupings
from topo.data.streams import Stream, stream_from_spec
from topo.model import SourceNode
from topo.model.inputs import arrival_times, source_seed
from topo.model.rehearsal import read_only, rehearse
from topo.ray_engine import work_cpu
from topo.ray_engine.metrics import LatencyBuckets
from topo.ray_engine.protocol import WIRE
from topo.results.metrics import TupleLog
from topo.results.passes import sampled, worker_loads
from topo.sim import simulate
from topo.spec import TopologySpec

# long enough in simulated time (about 3 s at this rate) for the controllers of gedik and albic to step
STREAM = "zipf:z=1.2,keys=2000,messages=8000,seed=1"
RATE = 2500.0


def warm() -> list[tuple[str, float]]:
    """Run each registered strategy through a small simulation (routing, feedback, queues, its controller);
    the seconds each took, in registry order."""
    took = [("stream", _timed(lambda: stream_from_spec(STREAM)))]
    stream = stream_from_spec(STREAM)
    for name in groupings.names():
        spec = TopologySpec(grouping=name, workers=4, sources=2, stream=STREAM, rate=RATE, cost_ms=0.1)
        took.append((name, _timed(lambda spec=spec: simulate(spec, stream))))
        took.append((f"{name} on Ray", _timed(lambda spec=spec: rehearse_ray_source(spec, stream))))
    took.append(("Ray's outputs", _timed(fold_out_of_order)))
    took.append(("cpu work", _timed(work_cpu.calibrate)))
    took.append(("Ray's metrics", _timed(count_latencies)))
    return took


def rehearse_ray_source(spec: TopologySpec, stream: Stream) -> None:
    """Source 0 of `spec` routing its share as a Ray source does: on the read-only arrays of Ray's object store."""
    sources = spec.sources
    controller = groupings.make_controller(spec.grouping, spec.workers, seed=spec.seed, **spec.params)
    grouping = groupings.make(spec.grouping, workers=spec.workers, seed=source_seed(spec.seed, 0),
                              controller=controller, **spec.params)
    keys = np.ascontiguousarray(stream.key_hash, dtype=np.uint64)[::sources].copy()  # as the driver puts it
    arrivals = arrival_times(len(stream.key_hash), spec.rate, None)[::sources].copy()
    rehearse(SourceNode.of_spec(0, grouping, read_only(keys), read_only(arrivals), spec, pool=spec.workers,
                                active=spec.workers))


def fold_out_of_order(workers: int = 2) -> None:
    """The summary's passes over a log whose worker times go back (a Ray run's log arrives per flush, not in
    order), which sorts it first."""
    finish = np.array([0.3, 0.1, 0.2, 0.4])
    log = TupleLog(np.arange(4, dtype=np.int64), np.zeros(4, np.int32), np.array([0, 0, 1, 1], np.int32),
                   finish - 0.1, finish - 0.1, finish - 0.05, finish)
    sampled(log, worker_loads(log, workers), np.linspace(0.0, 0.5, 4))


def count_latencies() -> None:
    """A worker's metrics count a buffer's latencies from its wire records: written by a source of its own
    process, or read-only as a frame read off the wire."""
    records, finish = np.zeros(2, WIRE), np.ones(2)
    for arrival in (records["arrival"], read_only(records)["arrival"]):
        LatencyBuckets().add(arrival, finish, 1.0)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m topo.warm",
        description="Compile every grouping's numba kernels (and the simulator's and the CPU worker's) into numba's "
        "on-disk cache, by a small simulation of each registered grouping and a rehearsal of each as a Ray source "
        "routes (read-only arrays). Takes about three minutes on 2 cores the first time and about 15 s when the cache "
        "is already warm. No options.",
    ).parse_args(argv)
    t0 = time.perf_counter()
    took = warm()
    slowest = ", ".join(f"{name} {s:.1f} s" for name, s in sorted(took, key=lambda t: -t[1])[:3])
    print(f"numba caches ready: {len(took)} parts in {time.perf_counter() - t0:.1f} s (slowest: {slowest})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
