"""The Flink engine: the topology as a real Apache Flink 2.3 job on a local MiniCluster, with the same run outputs.

    result = run_flink(spec, stream)

It is the referee of the other two engines: they share one model (`topo.model`), so only a real stream processor can
show where that model is wrong. Sources emit the spec's input on its schedule through Flink's own network stack
(its buffers, buffer timeout and backpressure); workers are the emulator's FIFO servers; routing is the emulator's
own for groupings without feedback, and Flink's own for its adaptive partitioner and rebalance.

Modules: `install` (the jars, a JDK, the job compiled once), `settings` (what runs and how the spec maps onto
Flink), `driver` (run_flink), and the job itself, `TopologyJob.java`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topo.results.metrics import RunResult
    from topo.spec import TopologySpec


def run_flink(spec: TopologySpec, stream, *, progress: Callable[[int], None] | None = None) -> RunResult:
    """Run the topology as a Flink job (`driver.run_flink`)."""
    from topo.flink_engine.driver import run_flink as run

    return run(spec, stream, progress=progress)
