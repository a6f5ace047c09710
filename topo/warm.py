"""Compile every numba kernel into numba's on-disk cache once, as pip compiles .pyc files when it installs.

With a cold cache, every process that first routes with a strategy compiles it (dc and fish take about 6 s each
on 2 cores), and several Ray actors started together each compile the same kernels. `make` runs this once after
installing, so a first run or test session loads compiled code instead; running it again only loads the caches.
"""

from __future__ import annotations

import argparse
import sys
import time

import groupings
from topo.data.streams import stream_from_spec
from topo.ray_engine import work_cpu
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
    took.append(("cpu work", _timed(work_cpu.calibrate)))
    return took


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m topo.warm",
        description="Compile every grouping's numba kernels (and the simulator's and the CPU worker's) into numba's "
        "on-disk cache, by a small simulation of each registered grouping. Takes about two minutes on 2 cores the "
        "first time and about 15 s when the cache is already warm. No options.",
    ).parse_args(argv)
    t0 = time.perf_counter()
    took = warm()
    slowest = ", ".join(f"{name} {s:.1f} s" for name, s in sorted(took, key=lambda t: -t[1])[:3])
    print(f"numba caches ready: {len(took)} parts in {time.perf_counter() - t0:.1f} s (slowest: {slowest})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
