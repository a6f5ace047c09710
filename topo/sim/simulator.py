"""The simulator engine: one stream edge, sources -> workers, as the supermarket model of the papers.

It drives the shared model of a topology (`topo.model`) from a discrete-event kernel, so it means what the Ray
engine means: each source is a `SourceNode` (per-destination output buffers sent when full or lingered out,
credits per channel, feedback to its grouping before it routes), each worker an `AckMeter` (what its acks carry).

Arrival: message seq reaches the topology at seq / rate (or at the stream's own timestamps rescaled to that
mean rate) and goes to source seq % S (shuffle grouping into the sources); with no rate, sources are never
short of input and a tuple "arrives" when its source routes it. Queue and service: a buffer reaches its worker
`net_delay_ms` after it is sent and its tuples wait in a FIFO queue for one deterministic server
(cost_ms / capacity per tuple). Ack: when a buffer's last tuple is done, the worker acks it to its source, which
gets it `net_delay_ms` later along with a credit for that channel. Latency of a tuple = its finish minus its
arrival at the source, so buffering, backpressure and queueing all count. With a `duration`, no source reads
input after it (a source flushes what it holds).

FIFO with deterministic service means a tuple's finish time is known when it is queued (Lindley recursion),
so the event loop only sees source steps, buffer arrivals, buffer completions and acks; the per-tuple work runs
in compiled kernels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import fields

import numpy as np
import pyarrow as pa

import groupings
from groupings.contract import Controller, Partitioner
from topo.data.streams import StreamLike
from topo.model import AckMeter, Buffer, SourceNode, queue_capacity
from topo.model.control import ControlPeriods, Repartition
from topo.model.inputs import arrival_times, source_keys, source_seed, source_share
from topo.model.worker import UNREAD
from topo.results.aggregation import aggregation_cost
from topo.results.extras import batch_table, run_extras
from topo.results.metrics import RunResult, TupleLog
from topo.results.outcome import operator_outcome, run_result
from topo.results.passes import worker_loads
from topo.schedule import MESSAGES, Change
from topo.sim import compiled as fast
from topo.sim.events import ACK, ARRIVE, DONE, SEND, WORLD, Kernel
from topo.sim.feed import LogFeed
from topo.sim.pages import small_pages
from topo.sim.queueing import LOG_COLUMNS, LOG_ROW_BYTES, Observer, WorkerPool
from topo.spec import TopologySpec

PROGRESS_STEP = 5000  # tuples between progress callbacks
SPILL_BYTES = 1 << 30


class SimSource:
    """Drives one `SourceNode` from the event kernel: a step when input, a deadline or an ack calls for it."""

    def __init__(self, sim: Simulation, node: SourceNode) -> None:
        self.sim = sim
        self.node = node
        self._wake_at = np.inf  # the pending wake-up, if any (only the earliest one counts)
        self._token = 0

    @property
    def index(self) -> int:
        """The source's index."""
        return self.node.index

    @property
    def grouping(self) -> Partitioner:
        """The source's grouping."""
        return self.node.grouping

    def plan(self, at: float | None = None) -> None:
        """Wake at `at` (default: when the node next has something to do), unless an earlier wake is pending."""
        now = self.sim.kernel.now
        if at is None:
            at = self.node.next_wakeup(now)
            if at is None:
                return
        if self._wake_at <= at and self._wake_at >= now:
            return
        self._token += 1
        self._wake_at = at
        self.sim.kernel.schedule(at, self._wake, self._token, priority=SEND)

    def _wake(self, token: int) -> None:
        if token != self._token:
            return  # replaced by an earlier wake-up
        self._wake_at = np.inf
        sim = self.sim
        clock = time.perf_counter()
        out = self.node.step(sim.kernel.now)
        sim.route_s += time.perf_counter() - clock
        for buffer in out:
            sim.transmit(self, buffer)
        self.plan()

    def land(self, worker: int, fields: tuple) -> None:
        """An ack reaches this source; step at once if it lets a waiting buffer out."""
        if self.node.on_ack(worker, fields, self.sim.kernel.now):
            self.plan(self.sim.kernel.now)


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------


class Simulation:
    """One run of a topology spec over a stream: the kernel, the workers, the sources and their logs."""

    def __init__(
        self,
        spec: TopologySpec,
        stream: StreamLike,
        make_grouping: Callable[[int], Partitioner] | None = None,
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
        # a log larger than SPILL_BYTES lives in files, read back a chunk at a time (`topo.results.spill`)
        self.pool = WorkerPool(spec.capacity_list, spec.cost_ms, messages, spill=messages * LOG_ROW_BYTES > SPILL_BYTES)
        self.feed = LogFeed({name: getattr(self.pool, name) for name, _ in LOG_COLUMNS})  # read as it is written
        self.active = spec.workers  # workers [0, active) take tuples; the pool holds the most ever active
        # each trip: the network, then Ray's own transit, which a run dilated K times sees K times shorter
        self.delay_s = (spec.net_delay_ms + spec.transit_ms / spec.time_scale) / 1e3
        self.progress = progress
        self.controller, self.delegation = controller, delegation
        if make_grouping is None:
            # the registered strategy, with its shared controller and its worker-side delegation if it has them
            if controller is None:
                self.controller = groupings.make_controller(spec.grouping, spec.workers, seed=spec.seed, **spec.params)
            if delegation is None:
                self.delegation = groupings.make_delegation(spec.grouping, spec.workers, **spec.params)
            make_grouping = _registered_grouping(spec, self.controller)
        capacity = queue_capacity(spec.sources, spec.max_pending, spec.batch_size)
        self.meters = [AckMeter(w, float(self.pool.service_s[w]), capacity, self.delegation)
                       for w in range(self.pool.workers)]
        self._busy_s = np.zeros(self.pool.workers)  # each worker's running total of busy seconds
        arrivals = arrival_times(messages, spec.rate, getattr(stream, "ts", None))
        every = spec.sources
        draining = (lambda: self.controller.draining) if self.controller is not None else None
        self.sources = [
            SimSource(
                self,
                SourceNode.of_spec(s, make_grouping(s), source_keys(key_hash, s, every),
                                   source_share(arrivals, s, every), spec, pool=self.pool.workers,
                                   active=spec.workers, draining=draining),
            )
            for s in range(every)
        ]
        # per buffer: source, worker, batch id, first slot, size, sent, done (rows of an array after the compiled loop)
        self.batches: list[tuple] | np.ndarray = []
        self.route_s: float | None = 0.0  # the sources' steps within the loop (None: the compiled loop ran)
        self._next_report = PROGRESS_STEP
        # what an ack carries is measured only if something reads it: a grouping's feedback or the delegation
        self._metered = self.delegation is not None or any(s.node.takes_feedback for s in self.sources)
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
        self.control: ControlPeriods | None = None
        self._control_eye = Observer(self.pool)
        self._seen_upto = 0  # tuples whose keys the controller has seen
        if self.controller is not None:
            self.control = ControlPeriods(self.controller, self.pool.workers, spec.migration_ms_per_key)
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
            source.node.resize(self.active)
        if self.delegation is not None:
            self.delegation.resize(self.active)
        if self.control is not None:
            self._see_sent()
            self._pause(self.control.resize(self.active, now), now)  # leaving workers hand over their keys

    def _control(self) -> None:
        """A controller period ends; the next one is due unless every source is done reading."""
        now = self.kernel.now
        self.control_period(now)
        if not all(source.node.exhausted for source in self.sources):
            self.kernel.schedule(now + self.controller.period_s, self._control, priority=WORLD)

    def control_period(self, now: float) -> None:
        """A controller period ends at `now`: report what the workers did, let it repartition, move the state."""
        qlen, busy, done = self._control_eye.observe(np.arange(self.pool.workers, dtype=np.int32), now)
        self._see_sent()
        self._pause(self.control.step(now, done, busy, qlen, self.active), now)

    def _see_sent(self) -> None:
        """The controller learns the keys sent since it last looked (the ones that may have state to move)."""
        if self._seen_upto < self.pool.size:
            self.control.see(self.key_hash[self.pool.seq[self._seen_upto : self.pool.size]])
            self._seen_upto = self.pool.size

    def _pause(self, moved: Repartition | None, now: float) -> None:
        """Both ends of every moved key pause for the transfer."""
        if moved is not None:
            for w in np.flatnonzero(moved.pause_s):
                self.pool.pause(int(w), now, float(moved.pause_s[w]))

    # --- tuples on the wire

    def transmit(self, source: SimSource, buffer: Buffer) -> None:
        """Put a buffer on the wire: it joins its worker's queue one network delay later."""
        if self.delay_s:
            self.kernel.schedule(self.kernel.now + self.delay_s, self._arrive, source, buffer, priority=ARRIVE)
        else:
            self._arrive(source, buffer)

    def _arrive(self, source: SimSource, buffer: Buffer) -> None:
        """A buffer reaches its worker: queue its tuples (their finish times are known at once)."""
        now, w, size = self.kernel.now, buffer.worker, len(buffer.index)
        node = source.node
        first, done = self.pool.enqueue_buffer(w, buffer.index, now, node.index, len(self.sources), node.arrival)
        end = first + size
        if self._metered:
            self.meters[w].arrive(now, size)
        self.batches.append((source.index, w, buffer.batch_id, first, size, buffer.sent_s, done))
        self.kernel.schedule(done, self._served, source, w, first, size, priority=DONE)
        if end >= self._next_report:
            if self.progress is not None:
                self.progress(end)
            self.written()
            self._next_report = end + PROGRESS_STEP
        while self._by_count and self._by_count[0].at <= end:
            self._apply(self._by_count.pop(0))  # effective from the next buffer on

    def _served(self, source: SimSource, w: int, first: int, size: int) -> None:
        """A buffer's last tuple is done: the worker acks it, piggybacking its load and signal."""
        now = self.kernel.now
        fields = UNREAD
        if self._metered:
            self._busy_s[w] += now - self.pool.start_s[first]  # a buffer's tuples are served back to back
            meter = self.meters[w]
            meter.service_s = float(self.pool.service_s[w])
            meter.serve(now, size, float(self._busy_s[w]))
            fields = meter.ack(now, source.index, self.active)
        if self.delay_s:
            self.kernel.schedule(now + self.delay_s, source.land, w, fields, priority=ACK)
        else:
            source.land(w, fields)

    def written(self) -> None:
        """The loop has queued `pool.size` tuples: their rows are final, for the readers of the log and its files."""
        self.pool.release_written()
        self.feed.publish(self.pool.size)

    def run(self, compiled: bool = True) -> RunResult:
        """Run the event loop to the end and compute the outputs. Runs whose events are all the model's own run
        them in compiled code (`topo.sim.loop`), unless `compiled` is False: the same events, in the same order."""
        clock = time.perf_counter()
        spec = self.spec
        kernel = fast.kernel_of(self) if compiled else None
        # the operator's outcome, the workers' loads and the aggregation's cost come from the rows as they are
        # written, on other threads (the loop and the passes release the GIL)
        aggregating = spec.aggregate_every_s is not None
        with ThreadPoolExecutor(3 if aggregating else 2) as readers:
            keys = readers.submit(operator_outcome, spec.operator, self._tuples, self.pool.workers,
                                  spec.operator_params)
            loads = readers.submit(worker_loads, self.feed, self.pool.workers)
            flushes = None
            if aggregating:
                flushes = readers.submit(aggregation_cost, self._finished(), spec.aggregate_every_s)
            try:
                self._loop(kernel)
            finally:
                self.feed.close(self.pool.size)
            loop_s = time.perf_counter() - clock
            emitted = self.pool.size
            if self.progress is not None:
                self.progress(emitted)
            batches = len(self.batches)
            result = self._result(keys, loads, flushes, emitted)
        result.summary["sim"] = {"events": self.kernel.processed, "batches": batches}
        # the one part of a summary that differs between two runs of the same seed
        result.summary["wall_clock_s"] = {
            "loop": loop_s,
            "route": self.route_s,
            "metrics": time.perf_counter() - clock - loop_s,
        }
        return result

    def _loop(self, kernel: int | None) -> None:
        if kernel is not None:
            fast.run(self, kernel, PROGRESS_STEP)
            self.route_s = None  # the sources' steps run inside the compiled loop, not timed apart
        else:
            for source in self.sources:
                source.plan(0.0)
            self.kernel.run()
        for source in self.sources:
            source.node.finish(self.kernel.now)
            # what only the loop reads, 8 bytes a tuple: the links of its buffers
            source.node._buffers._after = source.node._buffers._after[:0].copy()

    def _tuples(self) -> Iterator[tuple]:
        """The processed tuples' keys, workers and values, a chunk of the log at a time as the loop writes it."""
        values = getattr(self.stream, "values", None)
        values = None if values is None else np.asarray(values)
        for _, (seq, worker) in self.feed.chunks("seq", "worker"):
            yield self.key_hash[seq], worker, None if values is None else values[seq]

    def _finished(self) -> Iterator[tuple]:
        """The processed tuples' keys, workers and finish times, a chunk of the log at a time as the loop writes it."""
        for _, (seq, worker, finish_s) in self.feed.chunks("seq", "worker", "finish_s"):
            yield self.key_hash[seq], worker, finish_s

    def _result(self, keys: Future, loads: Future, flushes: Future | None, emitted: int) -> RunResult:
        spec, pool = self.spec, self.pool
        log = TupleLog(**{f.name: getattr(pool, f.name)[:emitted] for f in fields(TupleLog)})
        control, delegation = self.control, self.delegation
        extra = run_extras(
            spec, self.stream, log, pool.workers, self.capacity_history, self.active_history,
            [source.grouping.stats() for source in self.sources],
            migrations=None if control is None else control.migrations,
            controller=None if control is None else self.controller.stats(),
            signals={k: sum(m.signals[k] for m in self.meters) for k in ("increase", "decrease")},
            delegation=None if delegation is None else delegation.stats(),
            aggregation=None if flushes is None else flushes.result(),
        )
        batches, self.batches = self._batch_table(), []  # the rows go once their table is made
        return run_result(
            spec, "sim", log, pool.workers, self.capacity_history, tuples_in=emitted, keys=keys, loads=loads,
            extra=extra, batches=batches,
            source_stats=lambda duration_s: [source.node.stats(duration_s) for source in self.sources],
        )

    def _batch_table(self) -> pa.Table:
        rows = np.asarray(self.batches, dtype=np.float64).reshape(-1, 7)
        return batch_table(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 4], rows[:, 5], rows[:, 6] + self.delay_s,
                           first_slot=pa.array(rows[:, 3].astype(np.int64)), done_s=pa.array(rows[:, 6]))


def simulate(
    spec: TopologySpec,
    stream: StreamLike,
    *,
    make_grouping: Callable[[int], Partitioner] | None = None,
    capacity_schedule: Sequence[tuple[float, Sequence[float]]] = (),
    progress: Callable[[int], None] | None = None,
    controller: Controller | None = None,
    delegation: object | None = None,
) -> RunResult:
    """Simulate the topology over the stream and return its summary, time series and per-tuple log.

    make_grouping(source_index) builds each source's grouping (default: the registered grouping named by
    the spec, seeded per source, with the strategy's controller and worker delegation if it has them);
    capacity_schedule lists (time_s, capacities) changes; progress gets the number of tuples emitted so far;
    controller and delegation replace the strategy's own (tests and custom strategies).
    """
    with small_pages():  # (the first touch of huge pages cost more than the run's own work on VMs: `pages`)
        return Simulation(spec, stream, make_grouping, capacity_schedule, progress, controller, delegation).run()


def _registered_grouping(spec: TopologySpec, controller: Controller | None) -> Callable[[int], Partitioner]:
    def make(source: int) -> Partitioner:
        seed = source_seed(spec.seed, source)
        return groupings.make(spec.grouping, workers=spec.workers, seed=seed, controller=controller, **spec.params)

    return make
