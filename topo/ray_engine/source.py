"""A source actor: its share of the stream, its own grouping, micro-batches, flow control and replay.

Message seq goes to source seq % S. A batch closes when `batch_size` tuples have arrived or `linger_ms` after the
first of them (with no rate, input is always waiting); the source hands the acks that reached it to its grouping
as one `AckReport`, routes the batch with one `route` call and sends one sub-batch per destination worker. At
most `max_pending` sub-batches are in flight per (source, worker) pair; a full window blocks on `ray.wait`.

Replay: every sub-batch stays in the replay buffer until the aggregator has merged it (acks and flushes tell).
When a call fails with an actor error, or an ack shows that the worker restarted, the source waits for the
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
from groupings.feedback import AckReport
from topo.ray_engine.controller import SourceStatistics, install_replica
from topo.ray_engine.metrics import MetricsContext, SourceMetrics
from topo.sim import source_seed
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


@dataclass
class Counters:
    """What a source did, for the run summary."""

    emitted: int = 0
    batches: int = 0  # micro-batches routed
    sub_batches: int = 0  # calls to workers, replays excluded
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
        self.active = spec.workers  # workers [0, active) are part of the topology now
        self._lock = threading.Lock()  # the grouping, shared with the controller's and the driver's calls
        self._fresh: list[np.ndarray] = []  # keys routed since the controller last asked (state that may move)
        n = len(workers)
        self._inflight: list[dict[Any, Entry]] = [{} for _ in range(n)]
        self._buffer: dict[int, Entry] = {}
        self._incarnation = [-1] * n  # newest incarnation heard from, per worker
        self._suspects: set[int] = set()  # workers that may have lost batches of this source
        self._inbox: list = []
        self.max_in_flight = [0] * n
        self.count = Counters()
        self._next_id = 0
        self._batch_rows: list[tuple] = []
        self.t0 = 0.0

    # --- the main loop

    def run(self, t0: float) -> dict:
        """Emit this source's share of the stream from `t0` on; return once all of it is committed."""
        self.t0 = t0
        spec, arrivals, n = self.spec, self.arrivals, len(self.keys)
        size_cap, linger, end = spec.batch_size, spec.linger_ms / 1e3, spec.duration
        time.sleep(max(0.0, t0 - time.time()))
        begin = 0
        while begin < n:
            now = time.time() - t0
            if arrivals is None:
                if end is not None and now > end:
                    break
                size = min(size_cap, n - begin)
            else:
                close = min(float(arrivals[min(begin + size_cap, n) - 1]), float(arrivals[begin]) + linger)
                if end is not None and close > end:
                    if arrivals[begin] > end:
                        break
                    close = end  # the source stops at the end of the run and flushes what it holds
                self._idle_until(t0 + close)
                upto = time.time() - t0 if end is None else min(time.time() - t0, end)
                size = min(size_cap, n - begin, max(1, int(np.searchsorted(arrivals, upto, "right")) - begin))
            self._poll()
            self._recover_suspects()
            self._route_and_send(begin, size)
            begin += size
            self.count.emitted = begin
            if self.metrics is not None:
                self._record(size)
        self._drain()
        if self.metrics is not None:
            self._record(0)
        return self._report()

    def _record(self, emitted: int) -> None:
        """Export a batch's metrics: tuples emitted, windows in flight, now and then the virtual workers (cg)."""
        self.metrics.batch(emitted, self._inflight)
        if hasattr(self.grouping, "virtual_workers") and self.metrics.virtual_due():
            with self._lock:
                stats = self.grouping.stats()
            self.metrics.virtual_workers(stats)

    def _route_and_send(self, begin: int, size: int) -> None:
        stop = begin + size
        emitted = time.time()
        keys = self.keys[begin:stop]
        with self._lock:
            self._deliver_feedback(emitted - self.t0)
            chosen = np.asarray(self.grouping.route(keys, emitted - self.t0), dtype=np.int32)
            if self.controller is not None:
                self._fresh.append(keys)
            active = self.active
            draining = self.controller.draining if self.controller is not None else frozenset()
        n = len(self.workers)
        if chosen.shape != (size,) or (size and (chosen.min() < 0 or chosen.max() >= n)):
            raise ValueError(f"the grouping routed a batch of {size} outside [0, {n}) or to the wrong shape")
        if size and chosen.max() >= active:
            stray = [w for w in np.unique(chosen[chosen >= active]).tolist() if w not in draining]
            if stray:
                raise ValueError(f"the grouping routed a tuple to worker {stray[0]}; {active} are active")
        arrival = np.full(size, emitted) if self.arrivals is None else self.t0 + self.arrivals[begin:stop]
        order = np.argsort(chosen, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(chosen, minlength=n))))
        self.count.batches += 1
        for w in np.flatnonzero(np.diff(bounds)).tolist():
            pick = begin + order[bounds[w] : bounds[w + 1]]
            values = None if self.values is None else self.values[pick]
            entry = Entry(self._next_id, w, self.seqs[pick], self.keys[pick], arrival[pick - begin], values)
            self._next_id += 1
            self.count.sub_batches += 1
            self._send(entry)

    # --- sending and acks

    def _send(self, entry: Entry) -> None:
        """Put a sub-batch on the wire once its worker's window has room; it stays buffered until committed."""
        w = entry.worker
        while len(self._inflight[w]) >= self.spec.max_pending:
            self._wait(list(self._inflight[w]))
        ref = self.workers[w].process.remote(self.index, entry.batch_id, entry.seq, entry.keys, entry.arrival,
                                             entry.values)
        entry.state, entry.sent_s = PENDING, time.time()
        entry.sends += 1
        self._inflight[w][ref] = entry
        self._buffer[entry.batch_id] = entry
        self.max_in_flight[w] = max(self.max_in_flight[w], len(self._inflight[w]))

    def _all_inflight(self) -> list:
        return [ref for refs in self._inflight for ref in refs]

    def _wait(self, refs: list, timeout: float | None = None) -> None:
        """Block until one of `refs` is answered (or the timeout), then take every answer that is ready."""
        if not refs:
            if timeout:
                time.sleep(timeout)
            return
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            self._poll()

    def _poll(self) -> None:
        """Take every answer that has arrived, without blocking."""
        refs = self._all_inflight()
        if refs:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                self._take(ref)

    def _idle_until(self, deadline: float) -> None:
        """Wait for input to arrive, taking acks meanwhile."""
        while (left := deadline - time.time()) > 0:
            self._wait(self._all_inflight(), timeout=left)

    def _take(self, ref) -> None:
        entry = next(e for refs in self._inflight if (e := refs.pop(ref, None)) is not None)
        w = entry.worker
        try:
            ack = ray.get(ref)
        except RayActorError:
            entry.state = FAILED
            self.count.failures += 1
            self._suspects.add(w)
            return
        if ack.source != self.index:
            self.count.foreign_acks += 1
        entry.state, entry.incarnation, entry.acked_s = ACKED, ack.incarnation, time.time()
        self.count.acks += 1
        if ack.signal:
            self.count.signals["increase" if ack.signal > 0 else "decrease"] += 1
        self._inbox.append(ack)
        self._commit(ack.committed)
        if ack.incarnation > self._incarnation[w]:
            if self._incarnation[w] >= 0:
                self._suspects.add(w)  # it restarted: what the lost incarnation held must be replayed
            self._incarnation[w] = ack.incarnation

    def _deliver_feedback(self, now: float) -> None:
        """Hand the grouping every ack that reached this source since its last batch, oldest first."""
        if not self._inbox:
            return
        # a worker that left meanwhile is no longer the grouping's concern
        acks, self._inbox = [a for a in self._inbox if a.worker < self.active], []
        if not acks:
            return
        col = list(zip(*acks, strict=True))
        self.grouping.feedback(AckReport(
            workers=np.asarray(col[0], np.int32), queue_len=np.asarray(col[4], np.float64),
            load=np.asarray(col[5], np.float64), utilization=np.asarray(col[6], np.float64),
            service_ms=np.asarray(col[7], np.float64), signals=np.asarray(col[8], np.int8), now=now))

    def _commit(self, batch_ids) -> None:
        """The aggregator merged these batches: forget them."""
        for b in np.asarray(batch_ids).tolist():
            entry = self._buffer.pop(b, None)
            if entry is not None:
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
        for b in sorted(mine):
            entry = self._buffer.get(b)  # answers taken while re-sending may commit later ones
            if entry is None or entry.state == PENDING:
                continue  # committed, or its answer will tell
            if b in held:
                if entry.state == FAILED:
                    entry.state, entry.incarnation = ACKED, incarnation  # the answer was lost, not the batch
                continue
            if entry.state == FAILED or entry.incarnation < incarnation:
                self.count.replays += 1
                self.count.replayed_tuples += len(entry.keys)
                self._send(entry)

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
            self._deliver_feedback(time.time() - self.t0)  # the last acks too, so the grouping saw every one
            stats = self.grouping.stats()
        rows = np.asarray(self._batch_rows, dtype=np.float64).reshape(-1, 6)
        return {"index": self.index, "emitted": self.count.emitted, "counters": vars(self.count),
                "max_in_flight": list(self.max_in_flight), "grouping_stats": stats, "batches": rows}

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
            return pickle.dumps(SourceStatistics.of(self.grouping, keys))

    def grouping_stats(self) -> dict:
        """The grouping's stats now (after the controller stopped, the version it last installed is in them)."""
        with self._lock:
            return self.grouping.stats()

    def resize(self, workers: int) -> None:
        """Route over workers [0, `workers`) from the next batch on (workers join or leave at the top index)."""
        with self._lock:
            self.grouping.resize(workers)
            self.active = workers

    def install(self, replica: bytes) -> int:
        """Route with a new version of the controller from the next batch on; the version installed."""
        with self._lock:
            self.controller = install_replica(self.grouping, pickle.loads(replica))
            return self.controller.version

