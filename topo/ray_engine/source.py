"""A source actor: the shared `SourceNode` driven by the wall clock, its buffers put on the wire, and replay.

The node decides what goes out and when (per-destination buffers, linger, credits per channel, feedback before
routing), exactly as in the simulator; this actor only moves its buffers: one Ray call per worker process and
step carries that process's buffers in one frame of two arrays (`protocol.Frame`), and one long-poll
call per process brings their acks back, which the node turns into credits and feedback. A source hosted in a
process with workers (Storm's model, sleep mode) lends its loop to the process's scheduler, which steps it
(`tick`) on the thread that serves the workers, and takes it back for recovery and the drain.

Replay: every buffer stays in the replay buffer until the aggregator has committed it (merged and checkpointed;
acks and flushes tell). When a process's long poll fails with an actor error, or an ack shows that a worker
restarted, the source waits for the worker to be up again, drops what the aggregator committed meanwhile, and
re-sends the rest with the same batch ids. After the aggregator restarts, the driver rewinds every source: what it
had seen acked before then and is not committed in the restored checkpoint is re-sent. At the end it asks its
workers to flush until every batch it sent is committed.

A source that dies restarts like a Kafka consumer (its input is replayable): the new incarnation registers (its
batch ids carry the incarnation), fences every worker (queued batches of the dead incarnation are dropped, the one
in service finishes), has them flush, and asks the aggregator which input positions are committed. It routes the
rest, in order, with their original arrival times. Its grouping is rebuilt from the seed, not restored: what a
grouping learns is a load estimate that the next acks rebuild, exactness never depends on it, and routing the
committed input again to warm it would teach ack-driven groupings a backlog that does not exist. A strategy with a
controller gets the controller's current version (the driver hands it over), as every source does.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import groupings
from topo.model import Buffer, SourceNode
from topo.model.inputs import source_seed
from topo.model.rehearsal import rehearse
from topo.ray_engine.links import Links
from topo.ray_engine.metrics import MetricsContext, SourceMetrics
from topo.ray_engine.mortal import Mortal, Named
from topo.ray_engine.protocol import WIRE, tag
from topo.ray_engine.recovery import ACKED, PENDING, PROBE_S, Recovery
from topo.ray_engine.scheduler import HAND_BACK
from topo.ray_engine.topic import read_share
from topo.spec import TopologySpec


@dataclass(slots=True)
class Entry:
    """A sub-batch in the replay buffer."""

    batch_id: int
    worker: int
    tuples: np.ndarray  # `protocol.WIRE` records, as they go on the wire (a view into its step's records)
    values: Any
    state: str = PENDING
    incarnation: int = -1  # the worker incarnation that acked it
    sent_s: float = 0.0
    acked_s: float = 0.0
    sends: int = 0
    credit: bool = True  # still holds its channel's credit at the node


@dataclass
class Counters:
    """What a source did, for the run summary."""

    emitted: int = 0
    batches: int = 0  # route calls
    sub_batches: int = 0  # buffers sent (one call each), replays excluded
    acks: int = 0
    foreign_acks: int = 0  # acks naming another source (must stay 0)
    failures: int = 0  # calls that failed with an actor error
    recoveries: int = 0
    replays: int = 0  # sub-batches sent again
    replayed_tuples: int = 0
    replayed_by: dict = field(default_factory=lambda: {"worker": 0, "aggregator": 0, "source": 0})  # by cause
    rewinds: int = 0  # after the aggregator restarted
    lost_flushes: int = 0  # acked batches found uncommitted after a flush (the aggregator refused it)
    signals: dict = field(default_factory=lambda: {"increase": 0, "decrease": 0})
    # frames sent, by how: handed over within the process, over the wire to a peer process, through Ray
    frames: dict = field(default_factory=lambda: {"process": 0, "wire": 0, "ray": 0})


class Source(Links, Recovery, Mortal):
    """One spout of the topology (a Ray actor; restarted by Ray after a crash, with a new incarnation)."""

    def __init__(self, index: int, spec: TopologySpec, workers: list, aggregator: Named, run: str,
                 metrics: MetricsContext | None = None) -> None:
        # the input, (keys, arrivals, values), from the topic under the run's name: a restart reads it again, as a
        # Kafka consumer re-reads its partition
        keys, arrivals, values = read_share(run, index)
        self.index = index
        self.metrics = SourceMetrics(metrics, index, len(workers)) if metrics is not None else None
        self.spec = spec
        self.workers = workers
        self.aggregator = aggregator
        self.keys = keys
        self.arrivals = arrivals  # seconds after the start; None: input is always waiting
        self.values = values
        self.seqs = index + spec.sources * np.arange(len(keys), dtype=np.int64)
        self.positions = np.arange(len(keys))  # input positions of this source's share still to route, in order
        self.epoch = 0  # this incarnation (a restart gives a new one; batch ids carry it)
        self.resumed: dict | None = None  # what a restarted incarnation found and re-sent
        self._rewinds: list[float] = []  # rewind requests from the driver, taken by the loop
        self._active = spec.workers
        self.controller, self.grouping = self._grouping()
        self._warm_up()
        self.controller, self.grouping = self._grouping()  # the run's own, untouched by the warm-up
        self.node = self._node(keys, arrivals)
        self._committed_at_resume = np.zeros(0, bool)
        self._lock = threading.Lock()  # the node and its grouping, shared with the controller's and the driver's calls
        self._fresh: list[np.ndarray] = []  # keys routed since the controller last asked (state that may move)
        n = len(workers)
        self._pending: dict[int, dict[tuple[int, int], Entry]] = {}  # worker process -> buffers it owes an ack
        self._polls: dict[int, Any] = {}  # worker process -> this source's outstanding `acks` call
        self._hosts = {ref.host_index: ref for ref in workers}  # worker process -> a ref that reaches it
        self.local: tuple[Any, int] | None = None  # (process, its index) when this source lives in one (Storm's model)
        self.hand_over: Any = None  # there: the process's `accept`, and its outboxes' `take` (set by the process)
        self.take_local: Any = None
        self.driver: Any = None  # the scheduler of that process while it runs this source's loop (sleep mode)
        self.handed_back = threading.Event()  # the driver is done with this source for now
        self.failure: Exception | None = None  # what the source raised on the driver's thread
        self._in_flight = [0] * n  # buffers in flight per worker
        self._buffer: dict[int, Entry] = {}
        self._incarnation = [-1] * n  # newest incarnation heard from, per worker
        self._suspects: set[int] = set()  # workers that may have lost batches of this source
        self.count = Counters()
        # per committed batch: id, worker, tuples, sent and acked (seconds after t0), sends; flat floats, as a list of
        # tuples would hand the garbage collector some 17,000 long-lived objects a second at 8 x 64
        self._batch_rows = array("d")
        self.t0 = 0.0
        self._kick = False  # an ack or a release asks the loop to step now
        self._wake: float | None = 0.0  # when the node said it steps next (seconds after t0); None: on an ack
        self._ticks_s = 0.0  # time the driving scheduler spent on this source since it took its loop
        self.waited_s = 0.0  # time the loop spent waiting for input, deadlines or answers (the rest it was busy)
        self.loop_s = self.loop_busy_s = 0.0
        self.news_at = time.time()  # the last ack, commit or tuple routed (a source long without any is stuck)
        self._probe_at = 0.0  # a silent source asks its workers whether they restarted, not before this

    def _grouping(self) -> tuple[Any, Any]:
        """(controller, grouping) as the run starts; strategies with a controller route with a replica of it,
        replaced on every version the controller pushes."""
        spec = self.spec
        controller = groupings.make_controller(spec.grouping, spec.workers, seed=spec.seed, **spec.params)
        return controller, groupings.make(spec.grouping, workers=spec.workers, seed=source_seed(spec.seed, self.index),
                                          controller=controller, **spec.params)

    def _warm_up(self, tuples: int = 512) -> None:
        """Rehearse the first tuples on a throwaway node, with acks, before the clock starts: numba loads (or
        compiles) each function the run calls, on arrays of the run's own kind, which must not count as its time."""
        rehearse(self._node(self.keys[:tuples], None if self.arrivals is None else self.arrivals[:tuples]))

    def _node(self, keys: np.ndarray, arrivals: np.ndarray | None) -> SourceNode:
        return SourceNode.of_spec(self.index, self.grouping, keys, arrivals, self.spec, pool=len(self.workers),
                                  active=self._active, draining=self._draining)

    @property
    def active(self) -> int:
        """Workers [0, active) are part of the topology now."""
        return self.node.active

    def _draining(self) -> frozenset:
        return self.controller.draining if self.controller is not None else frozenset()

    # --- the main loop

    def run(self, t0: float, replica: bytes | None = None) -> dict:
        """Emit this source's share of the stream from `t0` on; return once all of it is committed. A restarted
        source resumes after what is committed, routing with the controller's `replica` if it has one."""
        self.t0 = t0
        self.news_at = time.time()
        self.epoch = self._ask("register_source", self.index)
        if replica is not None:
            self.install(replica)
        if self.epoch > 0:
            self._resume()
        time.sleep(max(0.0, t0 - time.time()))
        started = time.perf_counter()
        self._wake = 0.0
        scheduler = self.local[0].scheduler if self.local is not None else None
        while not self.node.done:
            self._poll()
            if self._silent():
                self._probe()
            self._recover_suspects()
            self._take_rewinds()
            if scheduler is not None and not self._suspects:
                clock = time.perf_counter()
                self._ticks_s = 0.0
                scheduler.drive(self)  # until the input is done or something needs recovering
                self.waited_s += time.perf_counter() - clock - self._ticks_s
                continue
            self._step(time.time() - t0)
            if self.node.done:
                break
            # sleep until the node's next deadline, or the next answer if one could let something out: an ack that
            # only carries feedback is taken at the next step, with the time it landed
            wake = self._wake
            hungry = wake is None or self._suspects or self.node.waits_for_acks()
            self._wait(self._all_inflight() if hungry else [],
                       PROBE_S if wake is None else min(PROBE_S, max(0.0, t0 + wake - time.time())))
        self.loop_s = time.perf_counter() - started
        self.loop_busy_s = self.loop_s - self.waited_s  # what the drain waits for is not the loop's
        self._drain()
        if self.metrics is not None:
            self._record(0, final=True)
        return self._report()

    def _step(self, now: float) -> None:
        """As in the simulator, the node steps when it said it would (`_wake`, seconds after t0), or when an ack lets
        a buffer out; an ack that only carries feedback waits for the next step's routing."""
        if not (self._kick or (self._wake is not None and now >= self._wake)):
            return
        self._kick = False
        node = self.node
        with self._lock:
            before = node.routed
            out = node.step(now)
            if self.controller is not None and node.routed > before:
                self._fresh.append(self.keys[before : node.routed])
            self._wake = node.next_wakeup(now)
        if out:
            self.news_at = self.t0 + now
            self._send(self._entries(out))
        self.count.emitted = node.routed
        if self.metrics is not None and out:
            self._record(sum(len(b.index) for b in out))

    def tick(self) -> float:
        """One pass of the loop on the driving scheduler's thread: take the acks, step if due. The next deadline
        (perf_counter seconds; `PROBE_S` from now at the latest, to see whether it is silent), or `HAND_BACK` when the
        source needs its own thread."""
        clock = time.perf_counter()
        wall = time.time()
        self._take_acks(self.local[1], self.take_local(self.index), wall)
        self._poll()
        if not (self._suspects or self._rewinds or self.node.done):
            self._step(wall - self.t0)
        done = time.perf_counter()
        self._ticks_s += done - clock
        if self._suspects or self._rewinds or self.node.done or self._silent():
            return HAND_BACK
        if self._kick:
            return done  # an ack let a buffer out meanwhile
        probe = clock + PROBE_S  # woken to look again after a silence, at the latest (it probes on its own thread)
        return probe if self._wake is None else min(probe, self.t0 + self._wake - wall + clock)

    def _record(self, emitted: int, final: bool = False) -> None:
        """Export a step's metrics: tuples sent, buffers in flight, now and then the virtual workers (cg)."""
        self.metrics.batch(emitted, self._in_flight, final)
        if hasattr(self.grouping, "virtual_workers") and self.metrics.virtual_due():
            with self._lock:
                stats = self.grouping.stats()
            self.metrics.virtual_workers(stats)

    def _entries(self, out: list[Buffer]) -> list[Entry]:
        """A step's buffers as replay entries: their columns gathered once for the whole step, a view each."""
        pick = np.concatenate([b.index for b in out]) if len(out) > 1 else out[0].index
        records = np.empty(len(pick), WIRE)
        records["seq"], records["key"], records["arrival"] = self.seqs[pick], self.keys[pick], self.node.arrival[pick]
        records["arrival"] += self.t0
        values = None if self.values is None else self.values[pick]
        self.count.sub_batches += len(out)
        entries, start = [], 0
        for buffer in out:
            end = start + len(buffer.index)
            entries.append(Entry(tag(self.epoch, buffer.batch_id), buffer.worker, records[start:end],
                                 None if values is None else values[start:end]))
            start = end
        return entries

    # --- acks

    def _acked(self, entry: Entry, ack, landed: float) -> None:
        """`ack` answered `entry`; it landed at `landed` (time.time() seconds), which may be a while before now."""
        w = entry.worker
        self._in_flight[w] -= 1
        if ack.source != self.index:
            self.count.foreign_acks += 1
        entry.state, entry.incarnation, entry.acked_s = ACKED, ack.incarnation, landed
        self.news_at = landed
        self.count.acks += 1
        if ack.signal:
            self.count.signals["increase" if ack.signal > 0 else "decrease"] += 1
        self._release(entry, ack[4:9], landed)  # (queue_len, load, utilization, service_ms, signal)
        if ack.committed:
            self._commit(ack.committed)
        if ack.incarnation > self._incarnation[w]:
            if self._incarnation[w] >= 0:
                self._suspects.add(w)  # it restarted: what the lost incarnation held must be replayed
            self._incarnation[w] = ack.incarnation

    def _release(self, entry: Entry, fields: tuple | None = None, landed: float = 0.0) -> None:
        """Give the entry's credit back to the node, once: with the ack's fields, or bare (committed or held)."""
        if not entry.credit:
            return
        entry.credit = False
        with self._lock:
            if fields is None:
                self.node.release(entry.worker)
                self._kick = True
            elif self.node.on_ack(entry.worker, fields, landed - self.t0):
                self._kick = True  # the credit lets a waiting buffer out, or the source is done

    def _commit(self, batch_ids) -> None:
        """The aggregator merged these batches: forget them."""
        before = len(self._buffer)
        for b in batch_ids.tolist() if isinstance(batch_ids, np.ndarray) else batch_ids:
            entry = self._buffer.pop(b, None)
            if entry is not None:
                if entry.credit:  # (acked, it gave its credit back already)
                    self._release(entry)
                self._batch_rows.extend((b, entry.worker, len(entry.tuples), entry.sent_s - self.t0,
                                         entry.acked_s - self.t0, entry.sends))
        if len(self._buffer) < before:
            self.news_at = time.time()

    # --- the end

    def _report(self) -> dict:
        with self._lock:
            self.node.finish(time.time() - self.t0)  # the last acks too, so the grouping saw every one
            stats = self.grouping.stats()
        rows = np.array(self._batch_rows, dtype=np.float64).reshape(-1, 6)
        node = self.node
        self.count.batches = node.route_calls
        loop = {**node.stats(self.loop_s), "loop_s": self.loop_s,
                "busy_fraction": self.loop_busy_s / self.loop_s if self.loop_s > 0 else 0.0}
        # a restarted source emitted what was committed before it, and what it routed since
        positions = None
        if self.resumed is not None:
            positions = np.union1d(np.flatnonzero(self._committed_at_resume), self.positions[: node.routed])
        return {"index": self.index, "emitted": self.count.emitted if positions is None else int(positions.size),
                "positions": positions, "counters": vars(self.count), "grouping_stats": stats, "batches": rows,
                "node": loop, "epoch": self.epoch, "resumed": self.resumed, "peak_rss_mb": self.peak_rss_mb(),
                "pid": os.getpid()}

    # --- calls from the driver and the controller (other threads of this actor)

    def progress(self) -> int:
        """Tuples emitted so far."""
        return self.count.emitted

    def statistics(self) -> bytes:
        """What the controller pulls each period: the grouping's statistics and the keys routed since (pickled
        under the lock, so the snapshot is consistent)."""
        with self._lock:
            keys = np.unique(np.concatenate(self._fresh)) if self._fresh else np.empty(0, np.uint64)
            self._fresh = []
            return pickle.dumps((self.grouping.snapshot(), keys))

    def grouping_stats(self) -> dict:
        """The grouping's stats now (after the controller stopped, the version it last installed is in them)."""
        with self._lock:
            return self.grouping.stats()

    def rewind(self, cut: float) -> None:
        """The aggregator restarted: the loop re-sends what was acked before `cut` and is not committed."""
        self._rewinds.append(cut)
        driver = self.driver
        if driver is not None:
            driver.poke(self.index)  # its scheduler hands the loop back to this source's thread

    def resize(self, workers: int) -> None:
        """Route over workers [0, `workers`) from the next batch on (workers join or leave at the top index)."""
        with self._lock:
            self._active = workers
            self.node.resize(workers)

    def install(self, replica: bytes) -> int:
        """Route with a new version of the controller from the next batch on; the version installed."""
        with self._lock:
            self.controller = self.grouping.adopt(pickle.loads(replica))
            return self.controller.version

