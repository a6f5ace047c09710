"""A worker (an executor, hosted with others in a `host.WorkerHost` process): a FIFO input queue, one server thread
running the operator at the emulated capacity, acks that piggyback the worker's load and its delegation signal
(the shared `AckMeter`), and periodic flushes of its partial state.

Batches join the queue as they arrive (so it keeps filling while a batch is served); the server takes them in
order, the process's scheduler in sleep mode (`advance`) or a thread of the worker's own in cpu mode (`start_next`,
`complete`), serves them with the `ServiceEmulator`, keeps them for the next flush (`flushes.Flushes`), and
answers each with an `Ack` for its source alone; an ack lists the batches of its source merged since the previous
ack, so the source can forget them.
"""

from __future__ import annotations

import asyncio
import copy
import os
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

import groupings
import operators
from topo.model import AckMeter, queue_capacity
from topo.model.worker import DEFAULT_WINDOW_S
from topo.ray_engine.flushes import Flushes, wait_ref
from topo.ray_engine.metrics import MetricsContext, WorkerMetrics
from topo.ray_engine.mortal import PROCESS_START, Mortal, until_back
from topo.ray_engine.protocol import Ack, epoch_of
from topo.ray_engine.scheduler import Scheduler
from topo.ray_engine.served import Served, finish_times
from topo.ray_engine.work import ServiceEmulator, sleep_until, spread_ms
from topo.spec import TopologySpec

DEFAULT_FLUSH_S = 0.5  # period of partial-state flushes when the spec sets none
FROM_REGISTRY = object()  # a Worker built without its delegation looks it up itself


@dataclass(slots=True)
class Job:
    """A batch accepted into the queue, waiting for the server."""

    source: int
    batch_id: int
    tuples: np.ndarray  # protocol.WIRE records: seq, key, arrival
    values: Any
    enqueued: float
    done: Callable[[Ack | None], None]  # takes the batch's ack once served (None: dropped)


class Worker(Flushes, Mortal):
    """One worker of the topology (hosted by a Ray actor; restarted by Ray after a crash, with a new incarnation)."""

    def __init__(self, index: int, spec: TopologySpec, aggregator: str, work: str, core_share: float,
                 metrics: MetricsContext | None = None, delegation: Any = FROM_REGISTRY,
                 scheduler: Scheduler | None = None, reads_acks: bool = True) -> None:
        self.index = index
        self.metrics = WorkerMetrics(metrics, index) if metrics is not None else None  # None: no metrics at all
        self.aggregator = ray.get_actor(aggregator)  # by name: a restart finds it without holding a handle
        self.op = operators.make(spec.operator, **spec.operator_params)
        self.emulator = ServiceEmulator(work, spec.cost_ms, spec.capacity_list[index], core_share)
        # the driver hands over the strategy's delegation (or None), so that a process of a strategy without one
        # never loads the compiled groupings
        self.delegation = (groupings.make_delegation(spec.grouping, spec.max_workers, **spec.params)
                           if delegation is FROM_REGISTRY else copy.deepcopy(delegation))
        capacity = queue_capacity(spec.sources, spec.max_pending, spec.batch_size)
        # the spec's windows are stretched; an ack's fields are measured only if a grouping's feedback, the
        # delegation or the metrics read them (`reads_acks`, from the driver), as in the simulator
        self.meter = AckMeter(index, self.emulator.service_s, capacity, self.delegation, now=time.time(),
                              window_s=DEFAULT_WINDOW_S * spec.time_scale,
                              read=reads_acks or self.delegation is not None or self.metrics is not None)
        self.active = spec.workers  # a worker at or above this index left the topology: it asks for nothing
        self.delay_s = spec.net_delay_ms / 1e3  # the host's emulated one-way network delay (not the engine's time)
        self._lock = threading.Lock()  # queue, counters, meter, state delta and commit lists
        self._ready = threading.Condition(self._lock)
        self._flushing = threading.Lock()  # one flush at a time
        self._fencing = 0  # fences waiting for the batch in service to be served
        self._jobs: deque[Job] = deque()
        self._pause_s = 0.0  # migration pause waiting for the server
        self._capacity: float | None = None  # a capacity change waiting for the server
        self.paused_s = 0.0
        self._served = Served()  # not flushed yet
        self._committed: dict[int, list[int]] = defaultdict(list)  # source -> batch ids merged, not yet acked
        self._accepted_ids: dict[int, set[int]] = defaultdict(set)  # source -> batch ids taken, not yet flushed
        self.transit_s: list[float] = []  # per buffer: time from the source's send to this queue, beyond the delay
        self.signals_to = [0] * spec.sources  # signals piggybacked on acks to each source
        self.flushes = {"sent": 0, "rejected": 0}
        # the largest partial state this worker held between two flushes: its keys and bytes (the operator's own
        # measure), the memory the papers compare across groupings
        self.state_peak = {"keys": 0, "bytes": 0}
        context = ray.get_runtime_context()
        self.node = {"node_id": context.get_node_id(), "ip": ray.util.get_node_ip_address()}
        self.incarnation = -1
        self._fences = [0] * spec.sources  # per source: batches of its incarnations below this are dropped
        self._newest_seq = [-1] * spec.sources  # per source: the highest seq received from it
        self._serving: tuple[int, int] | None = None  # (source, batch id) the server is on, outside the queue
        # batches of dead source incarnations, never served; and batches sent twice to this incarnation
        self.dropped = {"batches": 0, "tuples": 0, "duplicates": 0}
        self._registered = threading.Event()
        self._current: tuple | None = None  # (job, begin, finish) in service
        self._busy = False  # queued in the scheduler, or in service there
        # sleep mode: the process's one scheduler serves this worker (it registers it first); cpu mode burns on a
        # thread of its own
        self.scheduler = scheduler
        if scheduler is None:
            threading.Thread(target=self._serve_forever, name="server", daemon=True).start()

    # --- the data path

    def enqueue(self, source: int, batch_id: int, tuples: np.ndarray, values: Any, sent: float | None,
                done: Callable[[Ack | None], None]) -> None:
        """Queue a buffer (`protocol.WIRE` records) sent at `sent`, after the emulated network delay; `done(ack)` is
        called once it is served (by the server thread), or at once with None if it is dropped (its source
        incarnation is dead) or with an ack if this incarnation already has it. Per buffer: no task, no future."""
        now = time.time()
        if sent is not None:
            self.transit_s.append(now - sent - self.delay_s)  # the engine's own time on the wire, not the model's
        answer: tuple = ()
        n = len(tuples)
        with self._lock:
            accepted = self._accepted_ids[source]
            if epoch_of(batch_id) < self._fences[source]:
                self._drop(n)
                answer = (None,)
            elif batch_id in accepted:
                # sent again to this incarnation (a re-send that crossed a restart): answered, never served twice
                self.dropped["duplicates"] += 1
                answer = (self._ack(source, batch_id, now),)
            else:
                if n:
                    seq = int(tuples["seq"][-1])
                    if seq > self._newest_seq[source]:
                        self._newest_seq[source] = seq
                accepted.add(batch_id)
                self.meter.arrive(now, n)
                self._jobs.append(Job(source, batch_id, tuples, values, now, done))
                self._wake()
        if answer:
            done(*answer)

    def register(self) -> None:
        """Fence off every earlier incarnation: from now on the aggregator refuses their late flushes. Learn the
        sources' fences too: a batch of a source incarnation that died is not served by this one either."""
        incarnation, fences = until_back(
            lambda: wait_ref(self.aggregator.register.remote(self.index, os.getpid(), self.node, PROCESS_START)),
            None, 120.0)
        with self._lock:
            self.incarnation = incarnation
            self._fences = [max(a, b) for a, b in zip(self._fences, fences, strict=True)]
        self._registered.set()

    def _drop(self, tuples: int) -> None:
        self.dropped["batches"] += 1
        self.dropped["tuples"] += tuples

    async def fence(self, source: int, epoch: int) -> int:
        """A source restarted as incarnation `epoch`: drop its earlier incarnations' batches still queued, and any
        that arrive later; answer once none is being served, with the highest seq received from it so far."""
        await asyncio.get_running_loop().run_in_executor(None, self._fence, source, epoch)
        with self._lock:
            return self._newest_seq[source]

    def _fence(self, source: int, epoch: int) -> None:
        self._registered.wait()
        with self._ready:
            self._fences[source] = max(self._fences[source], epoch)
            kept: deque[Job] = deque()
            for job in self._jobs:
                if job.source == source and epoch_of(job.batch_id) < epoch:
                    self._drop(len(job.tuples))
                    job.done(None)
                else:
                    kept.append(job)
            self._jobs = kept
            # a batch of the dead incarnation in service now goes into the delta; the flush that follows takes it
            while self._serving is not None and self._serving[0] == source and epoch_of(self._serving[1]) < epoch:
                self._fencing += 1
                self._ready.wait()
                self._fencing -= 1

    def _serve_forever(self) -> None:
        """Cpu mode: this worker's own server thread (each worker burns on its own thread)."""
        self.register()  # before serving anything, so every ack and flush names a registered incarnation
        while True:
            with self._ready:
                while not self._jobs and not self._pause_s:
                    self._ready.wait()
            sleep_until(self.start_next())
            self.complete()

    def _wake(self) -> None:
        """There is work (called with the lock held): wake the server thread, or the process's scheduler if this
        worker is idle in it."""
        if self.scheduler is None:
            self._ready.notify()
        elif not self._busy:
            self._busy = True
            self.scheduler.wake(self.index)

    def start_next(self) -> float:
        """Cpu mode: start what comes next, a pause, else the first queued batch. The perf_counter deadline to wait
        for before `complete` (0: nothing started, or it is done already)."""
        with self._ready:
            taken = self._take()
        return self._begin(*taken) or 0.0

    def advance(self) -> float | None:
        """Sleep mode, on the scheduler's thread: finish the batch in service (its deadline has passed) and start
        what comes next, in one hold of the lock. The perf_counter deadline of what started, or None when nothing
        did: the worker is idle until `_wake`."""
        current, self._current = self._current, None
        ack = None
        if current is not None:
            self.emulator.end()
            end = time.time()
        with self._lock:  # (the condition's own lock: its wrapper's enter and exit are two Python calls a buffer)
            if current is not None:
                ack = self._finish(*current, end)
            taken = self._take()
            if taken[2] is None and not taken[0]:
                self._busy = False
        if ack is not None:
            self._answer(current, ack)
        return self._begin(*taken)

    def _take(self) -> tuple[float, float | None, Job | None]:
        """(pause, new capacity, job) to start next: a pause comes before the first queued batch (lock held)."""
        pause, self._pause_s = self._pause_s, 0.0
        capacity, self._capacity = self._capacity, None
        job = self._jobs.popleft() if self._jobs and not pause else None
        self._serving = None if job is None else (job.source, job.batch_id)
        return pause, capacity, job

    def _begin(self, pause: float, capacity: float | None, job: Job | None) -> float | None:
        """Start what `_take` took: the perf_counter deadline to reach before finishing it (None: nothing)."""
        if capacity is not None:
            self.emulator.set_capacity(capacity)
        if pause:
            self.paused_s += pause
            return self.emulator.hold(pause)  # the server is stopped while state moves
        if job is None:
            return None
        if self.scheduler is not None:  # the ideal server: (start, service) now, the finish times at the flush
            start, service, due = self.emulator.begin_ideal(len(job.tuples), job.enqueued)
            self._current = (job, start, (start, service))  # its first tuple began at the ideal start
            return due
        begin = time.time()
        # the buffer waited since it was queued: logging and acking the last one must not slow the operator down
        finish, due = self.emulator.begin(len(job.tuples), ready=job.enqueued)
        self._current = (job, begin, finish)
        return due

    def complete(self) -> None:
        """Cpu mode: finish what `start_next` started (its deadline has passed): keep it for the flush, ack it."""
        current, self._current = self._current, None
        if current is None:
            return
        self.emulator.end()
        end = time.time()
        with self._lock:
            ack = self._finish(*current, end)
        self._answer(current, ack)

    def _finish(self, job: Job, begin: float, finish: np.ndarray | tuple[float, float], end: float) -> Ack:
        """Keep a served batch for the flush, and its ack (lock held): the operator's update and the log wait for
        the flush, which does them for every batch at once."""
        self._served.add(job.source, job.batch_id, job.tuples, job.values, job.enqueued, begin, finish)
        self._serving = None
        if self._fencing:
            self._ready.notify_all()  # a fence waits for this batch to be in the delta
        self.meter.service_s = self.emulator.service_s
        self.meter.serve(end, len(job.tuples), self.emulator.busy_seconds())
        return self._ack(job.source, job.batch_id, end)

    def _answer(self, current: tuple, ack: Ack) -> None:
        """Send a served batch's ack (outside the lock: its callback may take others), and export its metrics."""
        job, _, finish = current
        job.done(ack)
        if self.metrics is not None:
            tuples = job.tuples
            self.metrics.served(tuples["arrival"], finish_times([finish], [len(tuples)]))
            self.metrics.load(ack.queue_len, ack.utilization, ack.signal)

    def _ack(self, source: int, batch_id: int, now: float) -> Ack:
        """What rides on the ack to `source` (called with the lock held)."""
        queue_len, load, utilization, service_ms, signal = self.meter.ack(now, source, self.active)
        if signal:
            self.signals_to[source] += 1
        committed = tuple(self._committed.pop(source, ()))  # ints pickle faster than a small array
        return Ack(self.index, self.incarnation, source, batch_id, queue_len, load, utilization, service_ms, signal,
                   committed)

    # --- control

    async def hello(self, source: int, batch_ids: list[int]) -> tuple[int, list[int]]:
        """(this incarnation, which of `source`'s batch ids it has already accepted): answered once registered."""
        await asyncio.get_running_loop().run_in_executor(None, self._registered.wait)
        with self._lock:
            taken = self._accepted_ids.get(source, set())
            return self.incarnation, [b for b in batch_ids if b in taken]

    def counters(self) -> tuple[int, float, int]:
        """(tuples served, busy seconds, tuples queued) of this incarnation, for a controller."""
        with self._lock:
            meter = self.meter
            return meter.served, meter.busy_s, meter.queue_len

    def pause(self, seconds: float) -> None:
        """Stop the server for `seconds` before its next batch (state migration)."""
        with self._ready:
            self._pause_s += seconds
            self._wake()

    def set_capacity(self, capacity: float) -> None:
        """Serve batches from the next one on at a new capacity."""
        with self._ready:
            self._capacity = capacity

    def resize(self, workers: int) -> None:
        """The topology now has `workers` active workers; one at or above that index has nothing to ask for."""
        with self._lock:
            self.active = workers

    async def report(self) -> dict:
        """Final facts about this incarnation: measured capacity, where it ran, signals, flushes."""
        await asyncio.get_running_loop().run_in_executor(None, self._registered.wait)
        if self.metrics is not None:
            self.metrics.publish()  # what was served since the last flush
        with self._lock:
            return {
                "incarnation": self.incarnation,
                "pid": os.getpid(),
                "node": self.node,
                "measured_capacity": self.emulator.measured_capacity(),
                "emulator": self.emulator.stats(),
                "transit_ms": spread_ms(self.transit_s),
                "signals": dict(self.meter.signals),
                "signals_to": list(self.signals_to),
                "delegation": self.delegation.stats() if self.delegation is not None else None,
                "paused_s": self.paused_s,
                "flushes": dict(self.flushes),
                "dropped": dict(self.dropped),
                "peak_rss_mb": self.peak_rss_mb(),
                "state_peak": dict(self.state_peak),
                # the share of the run the process's scheduler thread was on the CPU (sleep mode)
                "stepping_busy": None if self.scheduler is None else self.scheduler.busy_share(),
            }
