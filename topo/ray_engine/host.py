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
import gc
import inspect
import sys
import threading
import time
from functools import partial
from typing import Any

import ray

from topo.ray_engine.flushes import wait_ref
from topo.ray_engine.metrics import MetricsContext
from topo.ray_engine.mortal import Mortal, Named
from topo.ray_engine.outbox import Outboxes
from topo.ray_engine.protocol import Frame, Handover
from topo.ray_engine.scheduler import Scheduler
from topo.ray_engine.wire import Wire
from topo.ray_engine.wire import available as wire_available
from topo.ray_engine.worker import DEFAULT_FLUSH_S, FROM_REGISTRY, Worker
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


# young-generation collections every this many allocations: a process moves thousands of small objects per second
# (buffers, acks, jobs), and at the default 700 a full collection of its long-lived objects came often enough to
# stall every thread of the process for tens of milliseconds (p99 latency at 8 x 24: 222 ms, 121-127 ms with
# 50,000); at 50,000 each young collection stalled the process 30-55 ms (8 x 64, one process: ten a run, p99
# 58-121 ms), at 10,000 7 ms on average and at most 22-33 (p99 43-66 ms), at 2,000 no shorter at most and more
# in all
GC_THRESHOLD = (10_000, 50, 100)
# how long a thread may hold the GIL while another waits for it: a process runs a dozen busy threads (sources, the
# scheduler, the flusher), and at CPython's default of 5 ms their forced hand-overs cost so much that 8 x 64 carried
# 83% of its rate; at 10 ms it carried 97% with the same p99 at 8 x 24 (at 20 ms and more, 8 x 24's p99 grew)
SWITCH_INTERVAL_S = 0.01


def quiet_gc() -> None:
    """Keep the garbage collector off the hot path: what exists after set-up (inputs, operators, compiled code)
    is frozen out of every collection, and young collections come less often; and let threads hand the GIL over
    less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    sys.setswitchinterval(SWITCH_INTERVAL_S)


class WorkerHost(Mortal):
    """One worker process: several workers of the topology, each with its own queue, state and flushes, served by
    the process's scheduler (sleep mode) or by a thread each (cpu mode)."""

    def __init__(self, indices: list[int], spec: TopologySpec, aggregator: str, work: str, core_share: float,
                 metrics: MetricsContext | None = None, delegation: Any = FROM_REGISTRY,
                 reads_acks: bool = True) -> None:
        # sleep mode: one scheduler thread serves every hosted worker; cpu mode: a thread per worker burns
        self.scheduler = scheduler = Scheduler() if work == "sleep" else None
        self.workers = {w: Worker(w, spec, aggregator, work, core_share, metrics, delegation, scheduler, reads_acks)
                        for w in indices}
        self._held: list[tuple[int, Any]] = []  # (source, ack) served in the scheduler's current pass
        # the acks on their way back: each source's outbox and its waiting poll (a driven source is poked instead)
        self.outboxes = Outboxes(scheduler.poke if scheduler is not None else lambda source: None)  # (cpu: none driven)
        if scheduler is not None:
            scheduler.after_pass = partial(WorkerHost._post_held, self)  # the class's own: past Ray's tracing shim
            scheduler.start(self.workers)
        quiet_gc()
        # one flusher for every hosted worker (a worker has no timer of its own)
        self.flush_every_s = spec.aggregate_every_s or DEFAULT_FLUSH_S
        threading.Thread(target=self._flush_forever, name="flusher", daemon=True).start()
        self.delay_s = spec.net_delay_ms / 1e3  # emulated one-way network delay, on top of the real one
        self.loop: asyncio.AbstractEventLoop | None = None  # the actor's event loop, known from the first frame on

    def _flush_forever(self) -> None:
        """Every period, flush every hosted worker's delta in one call to the aggregator (one timer and one Ray call
        per process, not per worker). Between two workers the flusher offers the GIL to the scheduler: a period's
        folds are one burst of tens of milliseconds, which at CPython's switch interval left the scheduler that
        much late (8 x 64, one process: p99 85-157 ms without the hand-overs, 67-70 ms with them)."""
        workers = [self.workers[w] for w in sorted(self.workers)]  # locks in index order: a flush_now takes one
        while True:
            time.sleep(self.flush_every_s)
            for worker in workers:
                worker.begin_flush()
            try:
                flushes = []
                for worker in workers:
                    if (flush := worker.delta()) is not None:
                        flushes.append((worker, flush))
                    time.sleep(0)  # the scheduler takes the GIL here if it waits for it
                answers = None
                try:
                    if flushes:
                        answers = wait_ref(workers[0].aggregator.flush_many.remote([f for _, f in flushes]))
                except ray.exceptions.RayError:
                    pass  # lost with the call: the batches stay uncommitted and their sources replay them
                for i, (worker, flush) in enumerate(flushes):
                    worker.flushed(flush, None if answers is None else answers[i])
                    time.sleep(0)  # (likewise)
            finally:
                for worker in workers:
                    worker.end_flush()

    async def process(self, frame: Frame, sent: float) -> None:
        """Queue a frame of one source's buffers, sent at `sent`; each buffer's ack goes to the source's outbox once
        its worker has served it."""
        self.loop = asyncio.get_running_loop()
        self.accept(frame, sent)

    def accept(self, frame: Frame | Handover, sent: float) -> None:
        """`process`, from any thread (a source of this process hands its frames over directly): to the scheduler,
        which queues the buffers itself, or to each worker's queue."""
        # a restarted source's first frame: its dead predecessor's poll, if one waits, must not take its acks
        self.outboxes.newer(frame.source, frame.epoch)
        # the class's own function, not the actor's: Ray wraps every method of an actor in a tracing shim, two
        # more calls per buffer
        done = partial(WorkerHost._served, self, frame.source)
        if self.delay_s:  # on the wire for one delay first
            self.loop.call_soon_threadsafe(self.loop.call_later, self.delay_s, self._queue, frame, sent, done)
        elif self.scheduler is not None:
            if self.scheduler.on_thread():  # from a source the scheduler drives: queued in the same pass
                self._queue(frame, sent, done)
            else:
                self.scheduler.deliver(partial(self._queue, frame, sent, done))
        else:
            self._queue(frame, sent, done)

    def _queue(self, frame: Frame | Handover, sent: float, done: Any) -> None:
        for w, batch_id, tuples, values in frame.buffers():
            self.workers[w].enqueue(frame.source, batch_id, tuples, values, sent, done)

    def _served(self, source: int, ack: Any) -> None:
        """A worker answered a buffer of `source` (from its server thread, or at once for a duplicate)."""
        if ack is None:
            return  # dropped: sent by a source incarnation that died, whose successor re-sends what it held
        if self.delay_s:  # and so is its ack, on the way back
            self.loop.call_soon_threadsafe(self.loop.call_later, self.delay_s, self.outboxes.post, [(source, ack)])
        elif self.scheduler is not None and self.scheduler.on_thread():
            self._held.append((source, ack))  # leaves with the pass's other acks: one lock, one wake-up per source
        else:
            self.outboxes.post([(source, ack)])

    def _post_held(self) -> None:
        """Post the acks of the scheduler's pass, all at once."""
        if self._held:
            held, self._held = self._held, []
            self.outboxes.post(held)

    async def acks(self, source: int, epoch: int = 0) -> list:
        """`Outboxes.poll`, for a source in another process (a long-poll Ray call)."""
        self.loop = asyncio.get_running_loop()
        return await asyncio.wrap_future(self.outboxes.poll(source, epoch))

    async def call(self, worker: int, method: str, *args: Any) -> Any:
        """Call `method` of one hosted worker (awaiting it if it is a coroutine)."""
        self.loop = asyncio.get_running_loop()
        result = getattr(self.workers[worker], method)(*args)
        if inspect.isawaitable(result):
            result = await result
        return result


class Process(WorkerHost):
    """One process of Storm's model (`topology.workers`): some sources and some workers of the topology together.

    Every call to a source runs on a thread of the process's pool, never on the event loop that accepts the workers'
    buffers; in sleep mode a source's run lends its loop to the process's scheduler (`Scheduler.drive`), which steps
    it on the thread that serves the workers, and in cpu mode it runs its loop on that pool thread. Sources reach
    every worker, those of this process too, through `WorkerRef`s that find their process by name, so a restarted
    process needs nothing from the driver: Ray runs this constructor again and every hosted source comes back as a
    new incarnation.
    """

    def __init__(self, workers: list[int], sources: list[int], spec: TopologySpec, aggregator: str, run: str,
                 work: str, core_share: float, worker_refs: list, metrics: MetricsContext | None = None,
                 delegation: Any = FROM_REGISTRY, reads_acks: bool = True) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from topo.ray_engine.source import Source

        super().__init__(workers, spec, aggregator, work, core_share, metrics, delegation, reads_acks)
        # frames and acks between this process and its peers on the node, past Ray (`wire.Wire`)
        node = ray.get_runtime_context().get_node_id()
        self.wire = Wire(node, self.accept, self.outboxes.poll) if wire_available() else None
        self.sources = {i: Source(i, spec, worker_refs, Named(aggregator), run, metrics) for i in sources}
        self.place = worker_refs[workers[0]].host_index if workers else None  # this process's index in the run
        if workers:  # its sources hand frames for this process's workers over without Ray
            for source in self.sources.values():
                source.local = (self, self.place)
                # the class's own function (and a plain object's), past the shim Ray wraps an actor's methods in
                source.hand_over = partial(WorkerHost.accept, self)
                source.take_local = self.outboxes.take
        # a source's run, and up to three calls to it at once (statistics, install, progress), as a lone source
        # actor allowed
        self._pool = ThreadPoolExecutor(max_workers=4 * max(1, len(self.sources)), thread_name_prefix="source")
        quiet_gc()  # the sources' inputs too

    async def wire_address(self) -> tuple[str, str] | None:
        """Where a peer process of this node reaches this one past Ray (None: only through Ray). A peer asks before
        its first frame, so the event loop that delays frames (`--net-delay-ms`) is known by then."""
        self.loop = asyncio.get_running_loop()
        return None if self.wire is None else self.wire.address

    async def connect_wires(self, addresses: dict[int, tuple[str, str] | None]) -> int:
        """Connect to the peer processes at `addresses` (process index -> `wire_address`); how many it reached."""
        self.loop = asyncio.get_running_loop()
        if self.wire is None:
            return 0
        return sum(self.wire.connect(h, address) for h, address in addresses.items()
                   if address is not None and h != self.place)

    async def call_source(self, source: int, method: str, *args: Any) -> Any:
        """Call `method` of one hosted source on the process's thread pool (its run lasts the whole run)."""
        function = getattr(self.sources[source], method)
        self.loop = asyncio.get_running_loop()
        return await self.loop.run_in_executor(self._pool, partial(function, *args))


class _Method:
    def __init__(self, call: Any, index: int, name: str) -> None:
        self.call, self.index, self.name = call, index, name

    def remote(self, *args: Any):
        return self.call.remote(self.index, self.name, *args)


class _Hosted:
    """A member of a process (a worker, or a source in Storm's model) addressed as if it were its own actor:
    `ref.counters.remote()`. The process goes by its actor name (`mortal.Named`), looked up on first use where no
    handle was given (a process built before its peers can hold refs to them), and found again by name wherever
    the ref is unpickled."""

    _slots = ("process", "host_index", "index")
    _call = "call"

    def __init__(self, host: Any, host_index: int, index: int, name: str) -> None:
        self.process = Named(name, host)
        self.host_index = host_index
        self.index = index

    @property
    def host(self) -> Any:
        """The process's actor handle."""
        return self.process.handle

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("__") or name in self._slots or name == "host":
            raise AttributeError(name)  # unpickling and copying look for these before the fields exist
        return _Method(getattr(self.host, self._call), self.index, name)


class WorkerRef(_Hosted):
    """One worker of a process, addressed as if it were its own actor."""

    @property
    def worker(self) -> int:
        return self.index


class SourceRef(_Hosted):
    """One source of a process (Storm's model), addressed as if it were its own actor: `ref.run.remote(t0)`."""

    _call = "call_source"
