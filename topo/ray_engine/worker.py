"""A worker (an executor, hosted with others in a `host.WorkerHost` process): a FIFO input queue, one server thread
running the operator at the emulated capacity, acks that piggyback the worker's load and its delegation signal
(the shared `AckMeter`), and periodic flushes of its partial state.

The host's event loop only accepts batches (so the queue keeps filling while a batch is served); the server
thread takes them in order, serves them with the `ServiceEmulator`, updates the operator state and logs every
tuple, and answers the batch with an `Ack` for its source alone. Every period the process's flusher ships each
worker's state delta, the batches it covers and their tuple log to the aggregator, all workers of the process in
one call; an ack lists the batches of its source merged since the previous ack, so the source can forget them.
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
from topo.ray_engine.metrics import MetricsContext, WorkerMetrics
from topo.ray_engine.mortal import PROCESS_START, Mortal, until_back
from topo.ray_engine.protocol import Ack, Flush, concat_records, epoch_of, served_log
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


def wait_ref(ref: ray.ObjectRef) -> Any:
    """The value of `ref`, blocking this thread only (never the actor's event loop, which stays free)."""
    return ref.future().result()


class Worker(Mortal):
    """One worker of the topology (hosted by a Ray actor; restarted by Ray after a crash, with a new incarnation)."""

    def __init__(self, index: int, spec: TopologySpec, aggregator: str, work: str, core_share: float,
                 metrics: MetricsContext | None = None, delegation: Any = FROM_REGISTRY,
                 scheduler: Scheduler | None = None) -> None:
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
        self.meter = AckMeter(index, self.emulator.service_s, capacity, self.delegation, now=time.time(),
                              window_s=DEFAULT_WINDOW_S * spec.time_scale)  # the spec's windows are stretched
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
        with self._lock:
            accepted = self._accepted_ids[source]
            if epoch_of(batch_id) < self._fences[source]:
                self._drop(len(tuples))
                answer = (None,)
            elif batch_id in accepted:
                # sent again to this incarnation (a re-send that crossed a restart): answered, never served twice
                self.dropped["duplicates"] += 1
                answer = (self._ack(source, batch_id, now),)
            else:
                if len(tuples):
                    self._newest_seq[source] = max(self._newest_seq[source], int(tuples["seq"][-1]))
                accepted.add(batch_id)
                self.meter.arrive(now, len(tuples))
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
        """Start what comes next: a pause, else the first queued batch. The perf_counter deadline to wait for
        before `complete` (0: nothing started, or it is done already)."""
        with self._ready:
            pause, self._pause_s = self._pause_s, 0.0
            capacity, self._capacity = self._capacity, None
            job = self._jobs.popleft() if self._jobs and not pause else None
            self._serving = None if job is None else (job.source, job.batch_id)
        if capacity is not None:
            self.emulator.set_capacity(capacity)
        if pause:
            self.paused_s += pause
            return self.emulator.hold(pause)  # the server is stopped while state moves
        if job is None:
            return 0.0
        if self.scheduler is not None:  # the ideal server: (start, service) now, the finish times at the flush
            start, service, due = self.emulator.begin_ideal(len(job.tuples), job.enqueued)
            self._current = (job, start, (start, service))  # its first tuple began at the ideal start
            return due
        begin = time.time()
        # the buffer waited since it was queued: logging and acking the last one must not slow the operator down
        finish, due = self.emulator.begin(len(job.tuples), ready=job.enqueued)
        self._current = (job, begin, finish)
        return due

    def complete(self) -> bool:
        """Finish what `start_next` started (its deadline has passed): keep it for the next flush, and ack it. True
        while there is more to serve (for the scheduler; the lock's holder decides)."""
        current, self._current = self._current, None
        if current is not None:
            return self._serve(*current)
        with self._lock:
            more = self._busy = bool(self._jobs or self._pause_s)
            return more

    def _serve(self, job: Job, begin: float, finish: np.ndarray | tuple[float, float]) -> bool:
        """Keep the batch for the flush and ack it; True while there is more to serve (see `complete`)."""
        self.emulator.end()
        end = time.time()
        tuples = job.tuples
        with self._lock:
            # the operator's update and the log wait for the flush, which does them for every batch at once
            self._served.add(job.source, job.batch_id, tuples, job.values, job.enqueued, begin, finish)
            self._serving = None
            if self._fencing:
                self._ready.notify_all()  # a fence waits for this batch to be in the delta
            self.meter.service_s = self.emulator.service_s
            self.meter.serve(end, len(tuples), self.emulator.busy_seconds())
            ack = self._ack(job.source, job.batch_id, end)
            more = self._busy = bool(self._jobs or self._pause_s)  # (in the same hold of the lock as the ack)
        job.done(ack)
        if self.metrics is not None:
            self.metrics.served(tuples["arrival"], finish_times([finish], [len(tuples)]))
            self.metrics.load(ack.queue_len, ack.utilization, ack.signal)
        return more

    def _ack(self, source: int, batch_id: int, now: float) -> Ack:
        """What rides on the ack to `source` (called with the lock held)."""
        queue_len, load, utilization, service_ms, signal = self.meter.ack(now, source, self.active)
        if signal:
            self.signals_to[source] += 1
        committed = tuple(self._committed.pop(source, ()))  # ints pickle faster than a small array
        return Ack(self.index, self.incarnation, source, batch_id, queue_len, load, utilization, service_ms, signal,
                   committed)

    # --- flushes to the aggregator

    def _flush(self) -> bool:
        """Ship the state delta with the batches it covers and their tuple log; True if the aggregator took it."""
        with self._flushing:
            flush = self.delta()
            if flush is None:
                return True
            answer = None
            try:
                answer = wait_ref(self.aggregator.flush.remote(flush))
            finally:
                self.flushed(flush, answer)
            return bool(answer[0])

    def begin_flush(self) -> None:
        """Hold this worker's flushes (one at a time, each naming a registered incarnation) for `delta`."""
        self._registered.wait()
        self._flushing.acquire()

    def end_flush(self) -> None:
        self._flushing.release()

    def delta(self) -> Flush | None:
        """The state delta since the last flush, with the batches it covers and their log (None: nothing new). The
        caller holds `_flushing` and hands the aggregator's answer to `flushed`."""
        with self._lock:
            if not self._served:
                return None
            served, self._served = self._served, Served()
        state, log = self._fold(served)
        keys = self.op.distinct_keys(state)
        if keys > self.state_peak["keys"]:
            self.state_peak = {"keys": keys, "bytes": self.op.state_size_bytes(state)}
        sources = np.array(served.sources, np.int32)
        batch_ids = np.array(served.batch_ids, np.int64)
        return Flush(self.index, self.incarnation, sources, batch_ids, state, log)

    def _fold(self, served: Served) -> tuple[Any, dict[str, np.ndarray]]:
        """The operator's state over these batches, updated in service order, and their tuple log."""
        records = concat_records(served.tuples)  # one copy of every record, then its columns
        values = None if all(v is None for v in served.values) else np.concatenate(served.values)
        state = self.op.update(self.op.empty(), records["key"], values)
        log = served_log(records["seq"], records["arrival"], served.sizes(), served.sources, served.enqueued,
                         served.begins, served.finish_times())
        return state, log

    def flushed(self, flush: Flush, answer: tuple[bool, np.ndarray] | None) -> None:
        """The aggregator's answer to `flush`, (accepted, pairs now durable), or None if the call failed."""
        self._forget(flush.sources, flush.batch_ids)
        if answer is None:
            return  # the delta is lost with the call: its batches stay uncommitted and their sources replay them
        accepted, durable = answer
        with self._lock:
            self.flushes["sent"] += 1
            # committed = durable in a checkpoint (maybe this flush's, maybe earlier ones'): sources may forget
            for source, batch_id in durable.tolist():
                self._committed[source].append(batch_id)
            if not accepted:
                self.flushes["rejected"] += 1  # the sources find those batches uncommitted and replay them

    def _forget(self, sources: np.ndarray, batch_ids: np.ndarray) -> None:
        """These batches left with a flush: from now on the aggregator, not this worker, knows whether they are
        merged. A re-send is served again (the aggregator restarted and lost them, or refused the flush), and
        `hello` no longer says this worker holds them, so their source re-sends them if they are not committed."""
        with self._lock:
            for source in np.unique(sources).tolist():
                self._accepted_ids[source].difference_update(batch_ids[sources == source].tolist())

    async def flush_now(self, source: int) -> np.ndarray:
        """Flush at once; the batch ids of `source` committed since its last ack (none for source -1)."""
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._flush)
        except ray.exceptions.RayActorError:
            pass  # the aggregator died with the flush: the batches stay uncommitted and are replayed
        with self._lock:
            return np.asarray(self._committed.pop(source, ()), np.int64)

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
            }
