"""The aggregator actor: merges the workers' periodic partial-state flushes into the final result, exactly once,
and makes it durable in checkpoints so that it survives its own death.

Commit log: a flush is merged whole or not at all, and lists the (source, batch id) pairs it covers. A merged
batch is *committed* once a checkpoint holds it (Flink's checkpoint: the state and the offsets it covers, made
durable together); only then does the worker that flushed it hear so, and only then may its source forget it.
Checkpoints are incremental parts (`checkpoint.CheckpointStore`): the state merged since the previous part, the
per-tuple log that came with it, the pairs it commits, and the small tables (worker and source incarnations,
fences). A restarted aggregator folds the parts back; what it had merged after the last part is lost, and its
sources replay it (the driver rewinds them).

Fencing: every incarnation of a worker registers when it starts, and only the newest registered incarnation of a
worker may flush, so a late flush from a crashed one can never merge batches its sources have already replayed.
A restarted source registers a new incarnation too; once it resumes, a flush holding a batch of an earlier
incarnation of that source is refused. A flush that covers an already merged batch is refused (its batches are
replayed, never merged twice).
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

import operators
from topo.ray_engine.checkpoint import CheckpointStore
from topo.ray_engine.mortal import Mortal
from topo.ray_engine.protocol import Flush, concat_logs, epoch_of
from topo.ray_engine.topic import read_lengths

MERGE_EVERY = 16  # flushes kept unmerged before they are folded into the running result


class Aggregator(Mortal):
    """Holds the merged operator state, the committed batches and the per-tuple log that came with them."""

    def __init__(self, operator: str, workers: int, sources: int, shares: list[int] | str,
                 checkpoint_dir: str | None, checkpoint_every_s: float | None,
                 operator_params: dict | None = None) -> None:
        if isinstance(shares, str):  # the run's name: its topic tells the messages per source once the stream loaded
            shares = read_lengths(shares)
        self.op = operators.make(operator, **(operator_params or {}))
        self.sources = sources
        self.every_s = checkpoint_every_s or 0.0
        self.store = CheckpointStore(checkpoint_dir, "aggregator") if checkpoint_dir else None
        self._live = [-1] * workers  # the incarnation of each worker allowed to flush
        self._lives = [0] * workers  # incarnations registered so far
        self._epochs = [0] * sources  # incarnations of each source registered so far
        self._fence = [0] * sources  # batches of a source from an incarnation below this are refused
        self._committed: list[set[int]] = [set() for _ in range(sources)]  # durable
        self._merging: list[set[int]] = [set() for _ in range(sources)]  # merged since the last checkpoint
        self._positions = [np.zeros(n, bool) for n in shares]  # per source: input positions committed
        self._merged = self.op.empty()
        self._unmerged: list = []
        self._logs: list[dict[str, np.ndarray]] = []
        self._pending: list[tuple[int, np.ndarray, object, dict]] = []  # (worker, pairs, state, log) not durable
        self._news: dict[int, list[np.ndarray]] = defaultdict(list)  # worker -> its pairs made durable, untold
        self.registrations: list[dict] = []
        self._new_registrations: list[dict] = []
        self.stats = {"flushes": 0, "stale": 0, "stale_source": 0, "duplicate": 0, "keys_flushed": 0, "tuples": 0,
                      "checkpoints": 0, "checkpoint_bytes": 0, "checkpoint_s": 0.0}
        self.starts = 1
        self.restored: dict | None = None
        if self.store is not None:
            self._restore()
        self._last = time.time()

    # --- flushes and commits

    def flush(self, flush: Flush) -> tuple[bool, np.ndarray]:
        """Merge a worker's delta (False if stale or a duplicate: nothing merged), and the (source, batch id)
        pairs of that worker made durable since its previous flush."""
        accepted = self._merge(flush)
        if not self.every_s or time.time() - self._last >= self.every_s:
            self.checkpoint()
        return accepted, self._tell(flush.worker)

    def flush_many(self, flushes: list[Flush]) -> list[tuple[bool, np.ndarray]]:
        """`flush` for the deltas of several workers of one process, in one call."""
        accepted = [self._merge(flush) for flush in flushes]
        if not self.every_s or time.time() - self._last >= self.every_s:
            self.checkpoint()
        return [(a, self._tell(flush.worker)) for a, flush in zip(accepted, flushes, strict=True)]

    def _merge(self, flush: Flush) -> bool:
        if flush.incarnation != self._live[flush.worker]:
            self.stats["stale"] += 1
            return False
        sources, ids = flush.sources.astype(np.int64), flush.batch_ids.astype(np.int64)
        if np.any(epoch_of(ids) < np.asarray(self._fence)[sources]):
            self.stats["stale_source"] += 1  # a batch of a source incarnation that died: its successor re-sent it
            return False
        pairs = list(zip(sources.tolist(), ids.tolist(), strict=True))
        if len(set(pairs)) < len(pairs) or any(b in self._committed[s] or b in self._merging[s] for s, b in pairs):
            self.stats["duplicate"] += 1
            return False
        for s, b in pairs:
            self._merging[s].add(b)
        log = dict(flush.log)
        log["worker"] = np.full(flush.tuples, flush.worker, np.int32)
        self._take(flush.state, log)
        self._pending.append((flush.worker, np.stack([sources, ids], axis=1), flush.state, log))
        self.stats["flushes"] += 1
        self.stats["keys_flushed"] += int(self.op.distinct_keys(flush.state))
        self.stats["tuples"] += flush.tuples
        return True

    def _take(self, state, log: dict) -> None:
        """Fold a merged delta and its log into the running result."""
        self._unmerged.append(state)
        if len(self._unmerged) >= MERGE_EVERY:
            self._fold()
        self._logs.append(log)

    def _tell(self, worker: int) -> np.ndarray:
        news = self._news.pop(worker, [])
        return np.concatenate(news) if news else np.empty((0, 2), np.int64)

    def checkpoint(self) -> None:
        """Make everything merged so far durable (one incremental part), then count it as committed."""
        self._last = time.time()
        if not self._pending and not self._new_registrations:
            return
        clock = time.perf_counter()
        pairs = np.concatenate([p[1] for p in self._pending]) if self._pending else np.empty((0, 2), np.int64)
        if self.store is not None:
            part = {"state": self.op.merge([p[2] for p in self._pending]) if self._pending else None,
                    "log": concat_logs([p[3] for p in self._pending], extra=("worker",)) if self._pending else None,
                    "pairs": pairs, "registrations": self._new_registrations, **self._tables()}
            self.stats["checkpoint_bytes"] += self.store.write(part)
            self.stats["checkpoints"] += 1
        for worker, worker_pairs, _, log in self._pending:
            self._news[worker].append(worker_pairs)
            self._mark(log["seq"])
        for s, b in pairs.tolist():
            self._merging[s].discard(b)
            self._committed[s].add(b)
        self._pending, self._new_registrations = [], []
        self.stats["checkpoint_s"] += time.perf_counter() - clock

    def _mark(self, seq: np.ndarray) -> None:
        """Input positions of these tuples are committed (source s emits seq s, s + S, s + 2S, ...)."""
        for s in range(self.sources):
            mine = seq[seq % self.sources == s] // self.sources
            self._positions[s][mine] = True

    def _tables(self) -> dict:
        return {"lives": list(self._lives), "live": list(self._live), "epochs": list(self._epochs),
                "fence": list(self._fence), "starts": self.starts}

    def _restore(self) -> None:
        """A restarted aggregator: fold every durable part back (what came after the last one is replayed)."""
        clock = time.perf_counter()
        parts = self.store.load()
        if not parts:
            return
        for part in parts:
            if part["state"] is not None:
                self._take(part["state"], part["log"])
                self._mark(part["log"]["seq"])
                self.stats["tuples"] += len(part["log"]["seq"])
            for s, b in part["pairs"].tolist():
                self._committed[s].add(b)
            self.registrations += part["registrations"]
        last = parts[-1]
        self._lives, self._live, self._epochs, self._fence = last["lives"], last["live"], last["epochs"], last["fence"]
        self.starts = last["starts"] + 1
        self.restored = {"at": time.time(), "parts": len(parts), "seconds": time.perf_counter() - clock,
                         "tuples": int(self.stats["tuples"]), "batches": int(sum(map(len, self._committed)))}
        self._new_registrations.append({"aggregator_start": self.starts, "at": time.time()})  # the start is durable
        self.checkpoint()

    def checkpoint_now(self) -> int:
        """Checkpoint at once (the driver's rewind after a restart); the parts written so far."""
        self.checkpoint()
        return self.stats["checkpoints"]

    def committed(self, source: int, batch_ids: list[int]) -> list[int]:
        """The given batch ids of `source` that are committed (anything merged is made durable first)."""
        if self._merging[source]:
            self.checkpoint()
        done = self._committed[source]
        return [b for b in batch_ids if b in done]

    # --- incarnations

    def register(self, worker: int, pid: int, node: dict, started: float | None = None) -> tuple[int, list[int]]:
        """A worker incarnation starts: its number (from now on the only one of that worker that may flush), and
        each source's fence (batches of source incarnations below it are dropped, never served)."""
        incarnation = self._lives[worker]
        self._lives[worker] += 1
        self._live[worker] = incarnation
        row = {"worker": worker, "incarnation": incarnation, "pid": pid, "node": node, "at": time.time(),
               "started": started}
        self.registrations.append(row)
        self._new_registrations.append(row)
        self.checkpoint()  # a restarted aggregator must fence the same incarnations
        # every source incarnation but the newest is dead: a new worker never serves their batches
        return incarnation, [max(0, e - 1) for e in self._epochs]

    def register_source(self, source: int) -> int:
        """A source incarnation starts: its number (its batch ids carry it)."""
        epoch = self._epochs[source]
        self._epochs[source] += 1
        self._new_registrations.append({"source": source, "epoch": epoch, "at": time.time()})
        self.checkpoint()
        return epoch

    def resume_source(self, source: int, epoch: int) -> np.ndarray:
        """A restarted source has fenced every worker and had them flush: refuse its earlier incarnations' batches
        from now on, and give it the input positions committed (a bool per position of its share)."""
        self._fence[source] = max(self._fence[source], epoch)
        self._new_registrations.append({"source": source, "fence": epoch, "at": time.time()})
        self.checkpoint()
        return self._positions[source].copy()

    def alive(self) -> dict:
        """How many times this aggregator has started, and what the latest start restored."""
        return {"starts": self.starts, "restored": self.restored}

    # --- the end

    def _fold(self) -> None:
        self._merged = self.op.merge([self._merged, *self._unmerged])
        self._unmerged = []

    def result(self) -> tuple[object, dict[str, np.ndarray], dict]:
        """(merged state, per-tuple log with a `worker` column, counters and registrations); everything merged is
        checkpointed first, so what the run reports is what a restart would have restored."""
        self.checkpoint()
        self._fold()
        log = concat_logs(self._logs, extra=("worker",))
        return self._merged, log, {**self.stats, "registrations": [r for r in self.registrations if "worker" in r],
                                   "starts": self.starts, "restored": self.restored,
                                   "peak_rss_mb": self.peak_rss_mb()}
