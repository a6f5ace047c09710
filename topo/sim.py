"""The simulator engine: one stream edge, sources -> workers, as the supermarket model of the papers.

Arrival: message seq reaches the topology at seq / rate (or at the stream's own timestamps rescaled to that
mean rate) and goes to source seq % S (shuffle grouping into the sources); with no rate, sources are never
short of input and a tuple "arrives" when its source emits it. Batching: a source sends its next batch when
`batch_size` tuples have arrived or `linger_ms` after the first of them, routing all of it with its own
grouping at the send time. Backpressure: at most `max_pending` unacked batches per source (Storm's max spout
pending). Queue and service: every tuple reaches its worker `net_delay_ms` after the send and waits in a FIFO
queue for one deterministic server (cost_ms / capacity per tuple). Ack: when the last tuple of a batch is
done, each worker that served it piggybacks its load and a signal, the ack lands at the source `net_delay_ms`
later, and the source hands it to its grouping at its next send (eventually consistent feedback).
Latency of a tuple = its finish minus its arrival at the source, so batching, backpressure and queueing all
count. With a `duration`, no source sends after it (a source flushes what has arrived by then).

FIFO with deterministic service means a tuple's finish time is known when it is queued (Lindley recursion),
so the event loop only sees batch sends and acks; the per-tuple work runs in compiled kernels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa

import groupings
import operators
from groupings.control import Controller, MigrationLog
from groupings.feedback import AckReport, WorkerReport
from topo.events import ACK, SEND, WORLD, Kernel
from topo.metrics import (
    RunResult,
    TupleLog,
    aggregation_cost,
    effective_capacities,
    run_config,
    scaling_extras,
    summarize,
    timelines,
    timeseries,
)
from topo.queueing import AckContent, Observer, Piggyback, WorkerPool
from topo.schedule import MESSAGES, Change
from topo.spec import TopologySpec

PROGRESS_STEP = 5000  # tuples between progress callbacks


class Grouping(Protocol):
    """What the simulator needs from a grouping (one instance per source)."""

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray: ...

    def feedback(self, report: AckReport) -> None: ...

    def resize(self, workers: int) -> None: ...

    def stats(self) -> dict: ...


class StreamLike(Protocol):
    """The fields of a loaded stream (`topo.streams.Stream`) the simulator reads."""

    key_hash: np.ndarray  # uint64 key hash of every message, in seq order
    ts: np.ndarray | None  # arrival times, if the dataset has them
    values: np.ndarray | None  # operator input beyond the key, if any
    meta: dict


@dataclass
class StreamArrays:
    """A stream given directly as arrays (tests, benchmarks, notebooks)."""

    key_hash: np.ndarray
    ts: np.ndarray | None = None
    values: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.key_hash = np.ascontiguousarray(self.key_hash, dtype=np.uint64)

    @property
    def messages(self) -> int:
        """Number of messages."""
        return len(self.key_hash)


def source_seed(seed: int, source: int) -> int:
    """The grouping seed of one source, derived from the run seed (independent streams per source)."""
    return int(np.random.SeedSequence([seed, source]).generate_state(1)[0])


def arrival_times(messages: int, rate: float | None, ts: np.ndarray | None = None) -> np.ndarray | None:
    """Arrival time (s) of each message: seq / rate, or the stream's ts rescaled to that mean rate."""
    if rate is None:
        return None
    if ts is None or messages < 2:
        return np.arange(messages) / rate
    # keep the dataset's burstiness but run it at the requested mean rate; never let time go backwards
    relative = np.maximum.accumulate(np.asarray(ts, dtype=np.float64) - float(ts[0]))
    span = float(relative[-1])
    if not span > 0:
        return np.arange(messages) / rate
    return relative * ((messages - 1) / rate / span)


# --------------------------------------------------------------------------------------------------
# Sources: batching, routing, backpressure, feedback
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Batch:
    """One micro-batch in flight: who sent which slots when, and when its last tuple is done."""

    source: int
    first: int
    size: int
    sent_s: float
    done_s: float
    workers: np.ndarray  # the distinct workers that took tuples of it


class Source:
    """A spout: its share of the input, its own grouping, and its window of unacked batches."""

    def __init__(
        self,
        sim: Simulation,
        index: int,
        grouping: Grouping,
        seqs: np.ndarray,
        keys: np.ndarray,
        arrivals: np.ndarray | None,
    ) -> None:
        self.sim = sim
        self.index = index
        self.grouping = grouping
        self.seqs = seqs
        self.keys = keys
        self.arrivals = arrivals  # None: input is always waiting (saturating)
        self.next = 0  # index of the first tuple not yet sent
        self.pending = 0  # batches sent and not yet acked
        self.waiting = False  # window full: the next ack resumes sending
        self.inbox: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []  # acks not yet seen by the grouping

    @property
    def exhausted(self) -> bool:
        """True once every tuple of this source has been sent."""
        return self.next >= len(self.seqs)

    def ready_at(self) -> float:
        """When the next batch closes: full, lingered out, or the input ends."""
        if self.arrivals is None:
            return self.sim.kernel.now
        spec = self.sim.spec
        last = min(self.next + spec.batch_size, len(self.seqs)) - 1
        return min(float(self.arrivals[last]), float(self.arrivals[self.next]) + spec.linger_ms / 1e3)

    def plan(self) -> None:
        """Schedule the next send, or wait for an ack when max_pending batches are in flight."""
        if self.exhausted:
            return
        if self.pending >= self.sim.spec.max_pending:
            self.waiting = True
            return
        now = self.sim.kernel.now
        at = max(self.ready_at(), now)
        end = self.sim.spec.duration
        if end is not None and at > end:
            if now > end or self.arrivals is None or self.arrivals[self.next] > end:
                return  # emission is over
            at = end  # the source stops at the end of the run and flushes what it holds
        self.sim.kernel.schedule(at, self.send, priority=SEND)

    def send(self) -> None:
        """Route the next batch and put its tuples on the wire to their workers."""
        sim = self.sim
        now = sim.kernel.now
        self.deliver_feedback()
        begin = self.next
        size = min(sim.spec.batch_size, len(self.seqs) - begin)
        if self.arrivals is not None:
            # a batch held back by the window takes whatever else has arrived meanwhile, up to batch_size
            size = min(size, int(np.searchsorted(self.arrivals, now, side="right")) - begin)
        clock = time.perf_counter()
        workers = np.asarray(self.grouping.route(self.keys[begin : begin + size], now), dtype=np.int32)
        sim.route_s += time.perf_counter() - clock
        if workers.shape != (size,):
            raise ValueError(f"the grouping returned {workers.shape} workers for {size} keys")
        self.next += size
        self.pending += 1
        batch = sim.transmit(self, begin, workers, now)
        sim.kernel.schedule(batch.done_s + sim.delay_s, self.on_ack, batch, priority=ACK)
        self.plan()

    def on_ack(self, batch: Batch) -> None:
        """An ack lands: keep what the workers piggybacked on it, and reopen the window."""
        content = self.sim.piggyback(self.sim.pool, batch.workers, batch.done_s, self.index)
        self.inbox.append((batch.workers, content))
        self.pending -= 1
        if self.waiting:
            self.waiting = False
            self.plan()

    def deliver_feedback(self) -> None:
        """Hand every ack that has landed so far to the grouping, oldest first."""
        if not self.inbox:
            return
        fields = {name: np.concatenate([c[name] for _, c in self.inbox]) for name in self.inbox[0][1]}
        workers = np.concatenate([w for w, _ in self.inbox])
        self.inbox.clear()
        current = workers < self.sim.active  # a worker that left meanwhile is no longer the grouping's concern
        if not current.all():
            workers, fields = workers[current], {name: col[current] for name, col in fields.items()}
        self.grouping.feedback(AckReport(workers=workers, now=self.sim.kernel.now, **fields))


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------


class Simulation:
    """One run of a topology spec over a stream: the kernel, the workers, the sources and their logs."""

    def __init__(
        self,
        spec: TopologySpec,
        stream: StreamLike,
        make_grouping: Callable[[int], Grouping] | None = None,
        piggyback: Piggyback | None = None,
        capacity_schedule: Sequence[tuple[float, Sequence[float]]] = (),
        progress: Callable[[int], None] | None = None,
        controller: Controller | None = None,
        delegation: object | None = None,
    ) -> None:
        self.spec = spec
        self.stream = stream
        key_hash = np.ascontiguousarray(stream.key_hash, dtype=np.uint64)
        self.key_hash = key_hash
        messages = len(key_hash)
        self.kernel = Kernel()
        self.pool = WorkerPool(spec.capacity_list, spec.cost_ms, messages)
        self.active = spec.workers  # workers [0, active) take tuples; the pool holds the most ever active
        self.delay_s = spec.net_delay_ms / 1e3
        self.progress = progress
        self.controller, self.delegation = controller, delegation
        if make_grouping is None:
            # the registered strategy, with its shared controller and its worker-side delegation if it has them
            if controller is None:
                self.controller = groupings.make_controller(spec.grouping, spec.workers, seed=spec.seed, **spec.params)
            if delegation is None:
                self.delegation = groupings.make_delegation(spec.grouping, spec.workers, **spec.params)
            make_grouping = _registered_grouping(spec, self.controller)
        queue_capacity = spec.sources * spec.max_pending * spec.batch_size  # the most a worker can ever hold
        self.piggyback = piggyback if piggyback is not None else AckContent(self.pool, queue_capacity, self.delegation)
        arrivals = arrival_times(messages, spec.rate, getattr(stream, "ts", None))
        every = spec.sources
        self.sources = [
            Source(
                self,
                s,
                make_grouping(s),
                seqs=np.arange(s, messages, every, dtype=np.int64),
                keys=key_hash[s::every].copy(),
                arrivals=None if arrivals is None else arrivals[s::every].copy(),
            )
            for s in range(every)
        ]
        # per-tuple facts only the sources know, in the pool's slot order
        self.seq = np.empty(messages, np.int64)
        self.source = np.empty(messages, np.int32)
        self.arrival_s = np.empty(messages)
        self.batches: list[Batch] = []
        self.route_s = 0.0
        self._next_report = PROGRESS_STEP
        # the world's changes: by time they are events, by message count they are checked as tuples are sent
        self.capacity_history: list[tuple[float, tuple[float, ...]]] = [(0.0, tuple(self.pool.capacity))]
        self.active_history: list[tuple[float, int]] = [(0.0, self.active)]
        self._by_count: list[Change] = []
        changes = [Change(float(at), "seconds", tuple(c)) for at, c in capacity_schedule]
        for change in [*changes, *spec.capacity_schedule, *spec.scale_schedule]:
            if change.unit == MESSAGES:
                self._by_count.append(change)
            else:
                self.kernel.schedule(change.at, self._apply, change, priority=WORLD)
        self._by_count.sort(key=lambda c: c.at)
        # repartitioning strategies: a controller period, and the state that moves when the function changes
        self.migrations = MigrationLog()
        self._control_eye = Observer(self.pool)
        self._last_busy = np.zeros(self.pool.workers)
        self._last_done = np.zeros(self.pool.workers, np.int64)
        self._seen = np.empty(0, np.uint64)  # distinct keys sent so far (the ones that may have state to move)
        self._seen_upto = 0
        if self.controller is not None:
            self.kernel.schedule(self.controller.period_s, self._control, priority=WORLD)

    # --- the world changes

    def _apply(self, change: Change) -> None:
        """A scheduled change takes effect now: new capacities, or workers joining or leaving."""
        now = self.kernel.now
        if isinstance(change.value, tuple):
            self.pool.set_capacities(change.value)
            self.capacity_history.append((now, change.value))
            return
        self.active = int(change.value)
        self.active_history.append((now, self.active))
        for source in self.sources:
            source.grouping.resize(self.active)
        if self.delegation is not None:
            self.delegation.resize(self.active)
        if self.controller is not None:
            before = self.controller.version
            self.controller.resize(self.active)
            if self.controller.version != before:  # workers that left must hand over their keys at once
                self._migrate(before, now)

    def _control(self) -> None:
        """A controller period ends: report what the workers did, let it repartition, move the state."""
        now, ctl = self.kernel.now, self.controller
        everyone = np.arange(self.pool.workers, dtype=np.int32)
        qlen, busy, done = self._control_eye.observe(everyone, now)
        report = WorkerReport(
            tuples=done - self._last_done,
            busy_s=busy - self._last_busy,
            queue_len=qlen.astype(np.float64),
            active=everyone < self.active,
            period_s=ctl.period_s,
            now=now,
        )
        self._last_done, self._last_busy = done, busy
        before = ctl.version
        if ctl.step(report) and ctl.version != before:
            self._migrate(before, now)
        if not all(source.exhausted for source in self.sources):
            self.kernel.schedule(now + ctl.period_s, self._control, priority=WORLD)

    def _migrate(self, old_version: int, now: float) -> None:
        """Move the state of every key seen so far whose owner changed; both workers pause per key moved."""
        ctl, pool = self.controller, self.pool
        if self._seen_upto < pool.size:
            fresh = np.unique(self.key_hash[self.seq[self._seen_upto : pool.size]])
            self._seen = np.union1d(self._seen, fresh)
            self._seen_upto = pool.size
        _, pauses = self.migrations.record(ctl, self._seen, old_version, pool.workers, now,
                                           self.spec.migration_ms_per_key / 1e3)
        for w in np.flatnonzero(pauses):
            pool.pause(int(w), now, float(pauses[w]))

    # --- tuples on the wire

    def transmit(self, source: Source, begin: int, workers: np.ndarray, now: float) -> Batch:
        """Put a routed batch on the wire: its tuples join their workers' queues one network delay later."""
        if workers.size and int(workers.max()) >= self.active:
            draining = self.controller.draining if self.controller is not None else frozenset()
            stray = [w for w in np.unique(workers[workers >= self.active]).tolist() if w not in draining]
            if stray:
                raise ValueError(f"the grouping routed a tuple to worker {stray[0]}; {self.active} are active")
        first, done, used = self.pool.enqueue(workers, now + self.delay_s)
        end = first + len(workers)
        self.seq[first:end] = source.seqs[begin : begin + len(workers)]
        self.source[first:end] = source.index
        arrived = source.arrivals
        self.arrival_s[first:end] = now if arrived is None else arrived[begin : begin + len(workers)]
        batch = Batch(source.index, first, len(workers), now, done, used)
        self.batches.append(batch)
        if self.progress is not None and end >= self._next_report:
            self.progress(end)
            self._next_report = end + PROGRESS_STEP
        while self._by_count and self._by_count[0].at <= end:
            self._apply(self._by_count.pop(0))  # effective from the next batch on
        return batch

    def run(self) -> RunResult:
        """Run the event loop to the end and compute the outputs."""
        clock = time.perf_counter()
        for source in self.sources:
            source.plan()
        self.kernel.run()
        loop_s = time.perf_counter() - clock
        emitted = self.pool.size
        if self.progress is not None:
            self.progress(emitted)
        result = self._outputs(emitted)
        result.summary["sim"] = {"events": self.kernel.processed, "batches": len(self.batches)}
        # the one part of a summary that differs between two runs of the same seed
        result.summary["wall_clock_s"] = {
            "loop": loop_s,
            "route": self.route_s,
            "metrics": time.perf_counter() - clock - loop_s,
        }
        return result

    def _outputs(self, emitted: int) -> RunResult:
        spec, pool = self.spec, self.pool
        log = TupleLog(
            seq=self.seq[:emitted],
            source=self.source[:emitted],
            worker=pool.worker[:emitted],
            arrival_s=self.arrival_s[:emitted],
            enqueue_s=pool.enqueue_s[:emitted],
            start_s=pool.start_s[:emitted],
            finish_s=pool.finish_s[:emitted],
        )
        key_hash = self.key_hash[log.seq]
        values = getattr(self.stream, "values", None)
        values = None if values is None else np.asarray(values)[log.seq]
        distinct, keys_total, exact = operator_outcome(
            spec.operator, key_hash, log.worker, pool.workers, values, spec.operator_params
        )
        lines = timelines(log, pool.workers)
        start = float(log.arrival_s.min()) if len(log) else 0.0
        end = float(log.finish_s.max()) if len(log) else 0.0
        extra = {
            "seed": spec.seed,
            "params": dict(spec.params),
            "stream": dict(getattr(self.stream, "meta", None) or {}),
            "config": run_config(spec, self.capacity_history[0][1]),
            "migrations": self.migrations.migrations,
            "migrated_keys": self.migrations.migrated_keys,
            "migration_pause_s": self.migrations.pause_s,
            "capacity_changes": [{"at_s": t, "capacities": list(c)} for t, c in self.capacity_history[1:]],
            **scaling_extras(log, self.active_history, self.capacity_history, pool.workers),
            "grouping_stats": [source.grouping.stats() for source in self.sources],
        }
        if self.controller is not None:
            extra["controller"] = self.controller.stats()
            extra["repartitions"] = self.migrations.events
        if isinstance(self.piggyback, AckContent) and self.delegation is not None:
            extra["signals"] = dict(self.piggyback.signals_sent)
            extra["delegation"] = self.delegation.stats()
        if spec.aggregate_every_s is not None:
            extra["aggregation"] = aggregation_cost(log, key_hash, spec.aggregate_every_s)
        summary = summarize(
            log,
            grouping=spec.grouping,
            engine="sim",
            capacities=effective_capacities(self.capacity_history, start, end).tolist(),
            sources=spec.sources,
            tuples_in=emitted,
            distinct_keys=distinct,
            keys_total=keys_total,
            exact=exact,
            extra=extra,
            worker_timelines=lines,
        )
        series = timeseries(log, pool.workers, spec.sample_interval_s, worker_timelines=lines)
        return RunResult(summary, series, log, extras={"batches": self._batch_table()})

    def _batch_table(self) -> pa.Table:
        batches = self.batches
        return pa.table(
            {
                "source": pa.array([b.source for b in batches], pa.int32()),
                "first_slot": pa.array([b.first for b in batches], pa.int64()),
                "size": pa.array([b.size for b in batches], pa.int32()),
                "sent_s": pa.array([b.sent_s for b in batches], pa.float64()),
                "done_s": pa.array([b.done_s for b in batches], pa.float64()),
                "ack_s": pa.array([b.done_s + self.delay_s for b in batches], pa.float64()),
            }
        )


def simulate(
    spec: TopologySpec,
    stream: StreamLike,
    *,
    make_grouping: Callable[[int], Grouping] | None = None,
    piggyback: Piggyback | None = None,
    capacity_schedule: Sequence[tuple[float, Sequence[float]]] = (),
    progress: Callable[[int], None] | None = None,
    controller: Controller | None = None,
    delegation: object | None = None,
) -> RunResult:
    """Simulate the topology over the stream and return its summary, time series and per-tuple log.

    make_grouping(source_index) builds each source's grouping (default: the registered grouping named by
    the spec, seeded per source, with the strategy's controller and worker delegation if it has them);
    piggyback is the worker-side ack logic (default: `AckContent`);
    capacity_schedule lists (time_s, capacities) changes; progress gets the number of tuples emitted so far;
    controller and delegation replace the strategy's own (tests and custom strategies).
    """
    return Simulation(spec, stream, make_grouping, piggyback, capacity_schedule, progress, controller, delegation).run()


def _registered_grouping(spec: TopologySpec, controller: Controller | None) -> Callable[[int], Grouping]:
    def make(source: int) -> Grouping:
        seed = source_seed(spec.seed, source)
        return groupings.make(spec.grouping, workers=spec.workers, seed=seed, controller=controller, **spec.params)

    return make


def operator_outcome(
    name: str,
    key_hash: np.ndarray,
    worker: np.ndarray,
    workers: int,
    values: np.ndarray | None = None,
    params: dict | None = None,
) -> tuple[list[int], int, bool]:
    """Distinct keys each worker saw, distinct keys in all, and whether the merged operator state is exact.

    Key counts come from the routing itself (the papers' memory cost: key copies held), not from the operator's
    state, which may keep fewer (a top-k summary holds a bounded number of keys).
    """
    op = operators.make(name, **(params or {}))
    states = op.from_grouped(key_hash, worker, workers, values)
    exact = op.equal(op.merge(states), op.exact(key_hash, values))
    per_worker, total = distinct_keys_per_worker(key_hash, worker, workers)
    return per_worker, total, bool(exact)


def distinct_keys_per_worker(key_hash: np.ndarray, worker: np.ndarray, workers: int) -> tuple[list[int], int]:
    """Number of distinct keys routed to each worker, and in the whole stream."""
    if not len(key_hash):
        return [0] * workers, 0
    order = np.lexsort((key_hash, worker))
    w, k = worker[order], key_hash[order]
    first = np.ones(len(k), bool)
    first[1:] = (w[1:] != w[:-1]) | (k[1:] != k[:-1])
    per_worker = np.bincount(w[first], minlength=workers)
    return per_worker.tolist(), int(np.unique(key_hash).size)
