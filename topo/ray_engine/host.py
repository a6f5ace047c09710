"""Worker processes that host several executors, as Storm's worker processes do.

On a machine with few cores, one Ray actor per worker means one process per worker, each with its own event
loop and Ray threads, and one Ray call per buffer. A `WorkerHost` runs several workers (executors) in one
process: a source sends all its buffers for that process in one call (a frame), and keeps one long-poll call per
process (`acks`) that answers with every ack of its buffers served so far, as soon as there is one. Acks and
credits stay per buffer, exactly as in the model, and a source waits on one object per process instead of one per
buffer (a `ray.wait` costs in proportion to what it watches).

Everything else addresses a worker by its index through a `WorkerRef`, which forwards `ref.method.remote(...)`
to the worker inside its host; a crash of the host restarts all of its workers (each registers a new
incarnation with the aggregator), and their sources replay what was not committed.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import defaultdict
from functools import partial
from typing import Any

from topo.ray_engine.metrics import MetricsContext
from topo.ray_engine.mortal import Mortal
from topo.ray_engine.worker import FROM_REGISTRY, Worker
from topo.spec import TopologySpec


def host_groups(workers: int, processes: int, placement: tuple[str, ...] | None = None) -> list[list[int]]:
    """Workers per process: contiguous blocks of about workers / processes, never mixing placement resources."""
    processes = max(1, min(processes, workers))
    size = -(-workers // processes)
    groups: list[list[int]] = []
    for w in range(workers):
        same_place = placement is None or placement[groups[-1][0]] == placement[w] if groups else False
        if groups and len(groups[-1]) < size and same_place:
            groups[-1].append(w)
        else:
            groups.append([w])
    return groups


class WorkerHost(Mortal):
    """One worker process: several workers of the topology, each with its own queue, server, state and flushes."""

    def __init__(self, indices: list[int], spec: TopologySpec, aggregator: str, work: str, core_share: float,
                 metrics: MetricsContext | None = None, delegation: Any = FROM_REGISTRY) -> None:
        self.workers = {w: Worker(w, spec, aggregator, work, core_share, metrics, delegation) for w in indices}
        self._outbox: dict[int, list] = defaultdict(list)  # source -> acks not yet taken
        self._ready: dict[int, asyncio.Event] = {}
        self._epochs: dict[int, int] = defaultdict(int)  # source -> the newest incarnation that polled

    async def process(self, frame: list[tuple], sent: float) -> None:
        """Queue a frame of buffers, (worker, source, batch id, tuples, values) each, sent at `sent`; each buffer's
        ack goes to its source's outbox once its worker has served it."""
        for w, source, batch_id, tuples, values in frame:
            task = asyncio.ensure_future(self.workers[w].process(source, batch_id, tuples, values, sent))
            task.add_done_callback(partial(self._served, source))

    def _served(self, source: int, task: asyncio.Task) -> None:
        ack = task.result()
        if ack is None:
            return  # dropped: sent by a source incarnation that died, whose successor re-sends what it held
        self._outbox[source].append(ack)
        self._event(source).set()

    def _event(self, source: int) -> asyncio.Event:
        if source not in self._ready:
            self._ready[source] = asyncio.Event()
        return self._ready[source]

    async def acks(self, source: int, epoch: int = 0) -> list:
        """Every ack for `source` not taken yet; waits until there is at least one. A poll of an earlier incarnation
        of the source (its caller died, the call lives on) answers nothing once a newer one asks, so it can never
        take the acks of its successor."""
        event = self._event(source)
        if epoch > self._epochs[source]:
            self._epochs[source] = epoch
            event.set()  # wake a dead incarnation's poll, to let it go
        while not self._outbox[source] or epoch < self._epochs[source]:
            if epoch < self._epochs[source]:
                return []
            event.clear()
            await event.wait()
        out, self._outbox[source] = self._outbox[source], []
        return out

    async def call(self, worker: int, method: str, *args: Any) -> Any:
        """Call `method` of one hosted worker (awaiting it if it is a coroutine)."""
        result = getattr(self.workers[worker], method)(*args)
        if inspect.isawaitable(result):
            result = await result
        return result


class _Method:
    def __init__(self, host: Any, worker: int, name: str) -> None:
        self.host, self.worker, self.name = host, worker, name

    def remote(self, *args: Any):
        return self.host.call.remote(self.worker, self.name, *args)


class WorkerRef:
    """One worker of a host, addressed as if it were its own actor: `ref.counters.remote()`."""

    def __init__(self, host: Any, host_index: int, worker: int) -> None:
        self.host = host
        self.host_index = host_index
        self.worker = worker

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("__") or name in ("host", "host_index", "worker"):
            raise AttributeError(name)  # unpickling and copying look for these before the fields exist
        return _Method(self.host, self.worker, name)
