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
from topo.events import ACK, SEND, WORLD, Kernel
from topo.metrics import RunResult, TupleLog, summarize, timelines, timeseries
from topo.queueing import Piggyback, QueueLengthReport, WorkerPool
from topo.spec import TopologySpec

PROGRESS_STEP = 5000  # tuples between progress callbacks


class Grouping(Protocol):
    """What the simulator needs from a grouping (one instance per source)."""

    def route(self, keys: np.ndarray) -> np.ndarray: ...

    def feedback(self, workers: np.ndarray, loads: np.ndarray, signals: np.ndarray) -> None: ...

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
        self.inbox: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # acks not yet seen by the grouping

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
        workers = np.asarray(self.grouping.route(self.keys[begin : begin + size]), dtype=np.int32)
        sim.route_s += time.perf_counter() - clock
        if workers.shape != (size,):
            raise ValueError(f"the grouping returned {workers.shape} workers for {size} keys")
        self.next += size
        self.pending += 1
        batch = sim.transmit(self, begin, workers, now)
        sim.kernel.schedule(batch.done_s + sim.delay_s, self.on_ack, batch, priority=ACK)
        self.plan()

    def on_ack(self, batch: Batch) -> None:
        """An ack lands: keep the workers' piggybacked loads and signals, and reopen the window."""
        loads, signals = self.sim.piggyback(self.sim.pool, batch.workers, batch.done_s)
        self.inbox.append((batch.workers, loads, signals))
        self.pending -= 1
        if self.waiting:
            self.waiting = False
            self.plan()

    def deliver_feedback(self) -> None:
        """Hand every ack that has landed so far to the grouping, oldest first."""
        if not self.inbox:
            return
        workers, loads, signals = (np.concatenate(parts) for parts in zip(*self.inbox, strict=True))
        self.inbox.clear()
        self.grouping.feedback(workers, loads, signals)


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
    ) -> None:
        self.spec = spec
        self.stream = stream
        key_hash = np.ascontiguousarray(stream.key_hash, dtype=np.uint64)
        messages = len(key_hash)
        self.kernel = Kernel()
        self.pool = WorkerPool(spec.capacity_list, spec.cost_ms, messages)
        self.delay_s = spec.net_delay_ms / 1e3
        self.piggyback = piggyback if piggyback is not None else QueueLengthReport()
        self.progress = progress
        make = make_grouping if make_grouping is not None else _registered_grouping(spec)
        arrivals = arrival_times(messages, spec.rate, getattr(stream, "ts", None))
        every = spec.sources
        self.sources = [
            Source(
                self,
                s,
                make(s),
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
        for at, capacities in capacity_schedule:
            self.kernel.schedule(float(at), self.pool.set_capacities, tuple(capacities), priority=WORLD)

    def transmit(self, source: Source, begin: int, workers: np.ndarray, now: float) -> Batch:
        """Put a routed batch on the wire: its tuples join their workers' queues one network delay later."""
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
        key_hash = np.asarray(self.stream.key_hash)[log.seq]
        values = getattr(self.stream, "values", None)
        values = None if values is None else np.asarray(values)[log.seq]
        distinct, keys_total, exact = operator_outcome(
            spec.operator, key_hash, log.worker, pool.workers, values
        )
        lines = timelines(log, pool.workers)
        extra = {
            "seed": spec.seed,
            "params": dict(spec.params),
            "stream": dict(getattr(self.stream, "meta", None) or {}),
            "config": {
                "cost_ms": spec.cost_ms,
                "rate": spec.rate,
                "duration": spec.duration,
                "batch_size": spec.batch_size,
                "linger_ms": spec.linger_ms,
                "max_pending": spec.max_pending,
                "net_delay_ms": spec.net_delay_ms,
                "operator": spec.operator,
            },
            "grouping_stats": [source.grouping.stats() for source in self.sources],
        }
        summary = summarize(
            log,
            grouping=spec.grouping,
            engine="sim",
            capacities=spec.capacity_list,
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
) -> RunResult:
    """Simulate the topology over the stream and return its summary, time series and per-tuple log.

    make_grouping(source_index) builds each source's grouping (default: the registered grouping named by
    the spec, seeded per source); piggyback is the worker-side ack logic (default: queue length, no signal);
    capacity_schedule lists (time_s, capacities) changes; progress gets the number of tuples emitted so far.
    """
    return Simulation(spec, stream, make_grouping, piggyback, capacity_schedule, progress).run()


def _registered_grouping(spec: TopologySpec) -> Callable[[int], Grouping]:
    def make(source: int) -> Grouping:
        seed = source_seed(spec.seed, source)
        return groupings.make(spec.grouping, workers=spec.workers, seed=seed, **spec.params)

    return make


def operator_outcome(
    name: str, key_hash: np.ndarray, worker: np.ndarray, workers: int, values: np.ndarray | None = None
) -> tuple[list[int], int, bool]:
    """Distinct keys of each worker's state and of the merged state, and whether the merge is exact."""
    op = operators.make(name)
    states = op.from_grouped(key_hash, worker, workers, values)
    merged = op.merge(states)
    exact = op.equal(merged, op.exact(key_hash, values))
    return [int(op.distinct_keys(state)) for state in states], int(op.distinct_keys(merged)), bool(exact)
