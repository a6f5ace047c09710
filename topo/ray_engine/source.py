"""A source actor: the shared `SourceNode` driven by the wall clock, its buffers put on the wire, and replay.

The node decides what goes out and when (per-destination buffers, linger, credits per channel, feedback before
routing), exactly as in the simulator; this actor only moves its buffers: one Ray call per worker process and
step carries that process's buffers (a frame), each a packed record array (`protocol.pack`), and one long-poll
call per process brings their acks back, which the node turns into credits and feedback.

Replay: every buffer stays in the replay buffer until the aggregator has merged it (acks and flushes tell).
When a process's long poll fails with an actor error, or an ack shows that a worker restarted, the source waits for the
worker to be up again, drops what the aggregator committed meanwhile, and re-sends the rest with the same batch
ids. At the end it asks its workers to flush until every batch it sent is committed.
"""

from __future__ import annotations

import pickle
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

import groupings
from topo.model import Buffer, SourceNode
from topo.model.inputs import source_seed
from topo.ray_engine.metrics import MetricsContext, SourceMetrics
from topo.ray_engine.protocol import pack
from topo.spec import TopologySpec

PENDING, ACKED, FAILED = "pending", "acked", "failed"
RECOVERY_TIMEOUT_S = 120.0  # how long a source waits for a crashed worker to come back


@dataclass(slots=True)
class Entry:
    """A sub-batch in the replay buffer."""

    batch_id: int
    worker: int
    seq: np.ndarray
    keys: np.ndarray
    arrival: np.ndarray
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
    lost_flushes: int = 0  # acked batches found uncommitted after a flush (the aggregator refused it)
    signals: dict = field(default_factory=lambda: {"increase": 0, "decrease": 0})


class Source:
    """One spout of the topology (a Ray actor)."""

    def __init__(self, index: int, spec: TopologySpec, workers: list, aggregator: Any, keys: np.ndarray,
                 arrivals: np.ndarray | None, values: np.ndarray | None, metrics: MetricsContext | None = None) -> None:
        self.index = index
        self.metrics = SourceMetrics(metrics, index, len(workers)) if metrics is not None else None
        self.spec = spec
        self.workers = workers
        self.aggregator = aggregator
        self.keys = keys
        self.arrivals = arrivals  # seconds after the start; None: input is always waiting
        self.values = values
        self.seqs = index + spec.sources * np.arange(len(keys), dtype=np.int64)
        # strategies with a controller route with a replica of it, replaced on every version the controller pushes
        self.controller = groupings.make_controller(spec.grouping, spec.workers, seed=spec.seed, **spec.params)
        self.grouping = groupings.make(spec.grouping, workers=spec.workers, seed=source_seed(spec.seed, index),
                                       controller=self.controller, **spec.params)
        self.node = SourceNode(index, self.grouping, keys, arrivals, pool=len(workers), active=spec.workers,
                               batch_size=spec.batch_size, linger_s=spec.linger_ms / 1e3, credits=spec.max_pending,
                               end_s=spec.duration, draining=self._draining)
        self._lock = threading.Lock()  # the node and its grouping, shared with the controller's and the driver's calls
        self._fresh: list[np.ndarray] = []  # keys routed since the controller last asked (state that may move)
        n = len(workers)
        self._pending: dict[int, dict[tuple[int, int], Entry]] = {}  # worker process -> buffers it owes an ack
        self._polls: dict[int, Any] = {}  # worker process -> this source's outstanding `acks` call
        self._hosts = {ref.host_index: ref.host for ref in workers}
        self._in_flight = [0] * n  # buffers in flight per worker
        self._buffer: dict[int, Entry] = {}
        self._incarnation = [-1] * n  # newest incarnation heard from, per worker
        self._suspects: set[int] = set()  # workers that may have lost batches of this source
        self.count = Counters()
        self._batch_rows: list[tuple] = []
        self.t0 = 0.0
        self.waited_s = 0.0  # time the loop spent waiting for input, deadlines or answers (the rest it was busy)
        self.loop_s = self.loop_busy_s = 0.0

    @property
    def active(self) -> int:
        """Workers [0, active) are part of the topology now."""
        return self.node.active

    def _draining(self) -> frozenset:
        return self.controller.draining if self.controller is not None else frozenset()

    # --- the main loop

    def run(self, t0: float) -> dict:
        """Emit this source's share of the stream from `t0` on; return once all of it is committed."""
        self.t0 = t0
        node = self.node
        time.sleep(max(0.0, t0 - time.time()))
        started = time.perf_counter()
        while not node.done:
            self._poll()
            self._recover_suspects()
            now = time.time() - t0
            with self._lock:
                before = node.routed
                out = node.step(now)
                if self.controller is not None and node.routed > before:
                    self._fresh.append(self.keys[before : node.routed])
                wake = node.next_wakeup(now)
            if out:
                self._send([self._entry(buffer) for buffer in out])
            self.count.emitted = node.routed
            if self.metrics is not None and out:
                self._record(sum(len(b.index) for b in out))
            if node.done:
                break
            # sleep until the node's next deadline or the next answer, whichever comes first
            self._wait(self._all_inflight(), None if wake is None else max(0.0, t0 + wake - time.time()))
        self.loop_s = time.perf_counter() - started
        self.loop_busy_s = self.loop_s - self.waited_s  # what the drain waits for is not the loop's
        self._drain()
        if self.metrics is not None:
            self._record(0)
        return self._report()

    def _record(self, emitted: int) -> None:
        """Export a step's metrics: tuples sent, buffers in flight, now and then the virtual workers (cg)."""
        self.metrics.batch(emitted, self._in_flight)
        if hasattr(self.grouping, "virtual_workers") and self.metrics.virtual_due():
            with self._lock:
                stats = self.grouping.stats()
            self.metrics.virtual_workers(stats)

    def _entry(self, buffer: Buffer) -> Entry:
        pick = buffer.index
        values = None if self.values is None else self.values[pick]
        arrival = self.t0 + self.node.arrival[pick]
        self.count.sub_batches += 1
        return Entry(buffer.batch_id, buffer.worker, self.seqs[pick], self.keys[pick], arrival, values)

    # --- sending and acks

    def _send(self, entries: list[Entry]) -> None:
        """Put buffers on the wire, one call (a frame) per worker process; each stays in the replay buffer until
        committed, and its ack comes back through that process's long poll."""
        frames: dict[int, list[Entry]] = {}
        for entry in entries:
            frames.setdefault(self.workers[entry.worker].host_index, []).append(entry)
        now = time.time()
        for h, group in frames.items():
            frame = [(e.worker, self.index, e.batch_id, pack(e.seq, e.keys, e.arrival), e.values) for e in group]
            host = self._hosts[h]
            host.process.remote(frame, now)  # a failure shows on the long poll, which fails with the process
            waiting = self._pending.setdefault(h, {})
            for entry in group:
                entry.state, entry.sent_s = PENDING, now
                entry.sends += 1
                self._buffer[entry.batch_id] = entry
                self._in_flight[entry.worker] += 1
                waiting[(entry.worker, entry.batch_id)] = entry
            if h not in self._polls:
                self._polls[h] = host.acks.remote(self.index)

    def _all_inflight(self) -> list:
        """The long polls of the processes that owe this source an ack."""
        return [ref for h, ref in self._polls.items() if self._pending.get(h)]

    def _wait(self, polls: list, timeout: float | None = None) -> None:
        """Block until one of `polls` has acks (or the timeout), then take every answer that is ready."""
        clock = time.perf_counter()
        if not polls:
            time.sleep(timeout if timeout is not None else 0.001)
            self.waited_s += time.perf_counter() - clock
            return
        ready, rest = ray.wait(polls, num_returns=1, timeout=timeout)
        self.waited_s += time.perf_counter() - clock
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            self._take(ref)

    def _poll(self) -> None:
        """Take every answer that has arrived, without blocking."""
        polls = self._all_inflight()
        if polls:
            ready, _ = ray.wait(polls, num_returns=len(polls), timeout=0)
            for ref in ready:
                self._take(ref)

    def _take(self, ref) -> None:
        """A long poll answered: feed its acks to the node, and poll that process again."""
        h = next(h for h, r in self._polls.items() if r == ref)
        del self._polls[h]
        waiting = self._pending.get(h, {})
        try:
            acks = ray.get(ref)
        except RayActorError:
            # the process died: every buffer it owed an ack may be lost
            for entry in waiting.values():
                entry.state = FAILED
                self._in_flight[entry.worker] -= 1
                self.count.failures += 1
                self._suspects.add(entry.worker)
            waiting.clear()
            return
        for ack in acks:
            entry = waiting.pop((ack.worker, ack.batch_id), None)
            if entry is not None:
                self._acked(entry, ack)
        self._polls[h] = self._hosts[h].acks.remote(self.index)

    def _acked(self, entry: Entry, ack) -> None:
        w = entry.worker
        self._in_flight[w] -= 1
        if ack.source != self.index:
            self.count.foreign_acks += 1
        entry.state, entry.incarnation, entry.acked_s = ACKED, ack.incarnation, time.time()
        self.count.acks += 1
        if ack.signal:
            self.count.signals["increase" if ack.signal > 0 else "decrease"] += 1
        self._release(entry, (ack.queue_len, ack.load, ack.utilization, ack.service_ms, ack.signal))
        self._commit(ack.committed)
        if ack.incarnation > self._incarnation[w]:
            if self._incarnation[w] >= 0:
                self._suspects.add(w)  # it restarted: what the lost incarnation held must be replayed
            self._incarnation[w] = ack.incarnation

    def _release(self, entry: Entry, fields: tuple | None = None) -> None:
        """Give the entry's credit back to the node, once: with the ack's fields, or bare (committed or held)."""
        if not entry.credit:
            return
        entry.credit = False
        with self._lock:
            if fields is not None:
                self.node.on_ack(entry.worker, fields, time.time() - self.t0)
            else:
                self.node.release(entry.worker)

    def _commit(self, batch_ids) -> None:
        """The aggregator merged these batches: forget them."""
        for b in np.asarray(batch_ids).tolist():
            entry = self._buffer.pop(b, None)
            if entry is not None:
                self._release(entry)
                self._batch_rows.append((b, entry.worker, len(entry.keys), entry.sent_s - self.t0,
                                         entry.acked_s - self.t0, entry.sends))

    # --- recovery

    def _recover_suspects(self) -> None:
        while self._suspects:
            self._recover(self._suspects.pop())

    def _recover(self, w: int) -> None:
        """Worker w may have lost batches: once it is up, re-send those neither committed nor held by it now."""
        self.count.recoveries += 1
        mine = [b for b, e in self._buffer.items() if e.worker == w]
        incarnation, held = self._hello(w, mine)
        self._incarnation[w] = max(self._incarnation[w], incarnation)
        # asked after the new incarnation registered: no flush of an older one can commit anything from now on
        self._commit(ray.get(self.aggregator.committed.remote(self.index, mine)))
        held = set(held)
        replays = []
        for b in sorted(mine):
            entry = self._buffer.get(b)  # answers taken while re-sending may commit later ones
            if entry is None or entry.state == PENDING:
                continue  # committed, or its answer will tell
            if b in held:
                if entry.state == FAILED:
                    entry.state, entry.incarnation = ACKED, incarnation  # the answer was lost, not the batch
                    self._release(entry)
                continue
            if entry.state == FAILED or entry.incarnation < incarnation:
                self.count.replays += 1
                self.count.replayed_tuples += len(entry.keys)
                replays.append(entry)
        if replays:
            self._send(replays)

    def _hello(self, w: int, batch_ids: list[int]) -> tuple[int, list[int]]:
        deadline = time.time() + RECOVERY_TIMEOUT_S
        while True:
            try:
                return ray.get(self.workers[w].hello.remote(self.index, batch_ids), timeout=10.0)
            except (RayActorError, GetTimeoutError):
                if time.time() > deadline:
                    raise RuntimeError(f"worker {w} did not come back within {RECOVERY_TIMEOUT_S:g} s") from None
                time.sleep(0.05)

    # --- the end

    def _drain(self) -> None:
        """Wait for every answer, then flush the workers until the aggregator has merged every batch sent."""
        while self._buffer:
            while refs := self._all_inflight():
                self._wait(refs)
                self._recover_suspects()
            owed = sorted({e.worker for e in self._buffer.values()})
            for w in owed:
                try:
                    self._commit(ray.get(self.workers[w].flush_now.remote(self.index)))
                except RayActorError:
                    self._suspects.add(w)
            self._recover_suspects()
            if self._all_inflight():
                continue
            left = list(self._buffer)
            self._commit(ray.get(self.aggregator.committed.remote(self.index, left)))
            for entry in list(self._buffer.values()):
                if entry.state == ACKED:  # acked, then flushed, yet not merged: the flush was refused
                    self.count.lost_flushes += 1
                    entry.state = FAILED
                    self._suspects.add(entry.worker)
            self._recover_suspects()

    def _report(self) -> dict:
        with self._lock:
            self.node.finish(time.time() - self.t0)  # the last acks too, so the grouping saw every one
            stats = self.grouping.stats()
        rows = np.asarray(self._batch_rows, dtype=np.float64).reshape(-1, 6)
        node = self.node
        self.count.batches = node.route_calls
        loop = {**node.stats(self.loop_s), "loop_s": self.loop_s,
                "busy_fraction": self.loop_busy_s / self.loop_s if self.loop_s > 0 else 0.0}
        return {"index": self.index, "emitted": self.count.emitted, "counters": vars(self.count),
                "grouping_stats": stats, "batches": rows, "node": loop}

    # --- calls from the driver and the controller (other threads of this actor)

    def ready(self) -> bool:
        """True once the actor is up."""
        return True

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

    def resize(self, workers: int) -> None:
        """Route over workers [0, `workers`) from the next batch on (workers join or leave at the top index)."""
        with self._lock:
            self.node.resize(workers)

    def install(self, replica: bytes) -> int:
        """Route with a new version of the controller from the next batch on; the version installed."""
        with self._lock:
            self.controller = self.grouping.adopt(pickle.loads(replica))
            return self.controller.version

