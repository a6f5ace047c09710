"""The Ray engine: the topology as real actors, with the simulator's semantics and the same run outputs.

    result = run_ray(spec, stream)                      # a local Ray, or join one with address="auto"

Sources (one per `spec.sources`, each with its own grouping) route micro-batches to workers; sources and workers
live together in a few processes (Storm's model, `host.Process`). Each worker serves its FIFO queue at its emulated
capacity, runs the operator, acks every batch to its sender with its load and delegation signal piggybacked, and
its process flushes partial state to the aggregator periodically. Strategies with a shared partitioning function
add a controller actor. Batches are replayed from the sources until the aggregator has merged them, so a process
killed mid-run loses nothing and nothing is counted twice. `--time-scale K` runs it all K times slower than the
wall clock (`dilation`).

Modules: `driver` (run_ray), `host` (the processes), `source` and `links` (a source and its links to the worker
processes), `worker`, `aggregator`, `controller`, `protocol` (the messages), `dilation` (time dilation),
`outputs` (summary and logs). Importing this package stays light: an actor process imports only the modules of
its own class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topo.results.metrics import RunResult
    from topo.spec import TopologySpec


def run_ray(spec: TopologySpec, stream, *, progress: Callable[[int], None] | None = None, address: str | None = None,
            work: str = "sleep", chaos: tuple = (), placement: tuple[str, ...] | None = None,
            metrics_port: int | None = None, run_id: str | None = None) -> RunResult:
    """Run the topology as Ray actors over the stream; the same outputs as the simulator (engine "ray"). The
    stream may be a call that loads it: it then loads while the actors start.

    address joins an existing cluster ("auto") instead of starting a local Ray; work is how a worker spends a
    tuple's service time ("sleep" or "cpu"); chaos lists ("kill-worker", worker, seconds) events (or
    "kill-worker:ID@SECONDS"); placement names one custom resource per worker, to pin it to the nodes offering it;
    metrics_port exports Prometheus metrics on 127.0.0.1:metrics_port, labelled run=run_id (None: no metrics).
    """
    from topo.ray_engine.driver import run_ray as run

    return run(spec, stream, progress=progress, address=address, work=work, chaos=chaos, placement=placement,
               metrics_port=metrics_port, run_id=run_id)


__all__ = ["run_ray"]
