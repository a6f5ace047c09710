"""The aggregator actor: merges the workers' periodic partial-state flushes into the final result, exactly once.

Commit log: a flush is merged whole or not at all, and lists the (source, batch id) pairs it covers; those are
committed from then on, and a source asks `committed` which of its batches need no replay. Fencing: every
incarnation of a worker registers when it starts, and only the newest registered incarnation of a worker may
flush, so a late flush from a crashed one can never merge batches its sources have already replayed. A flush
that covers an already committed batch is refused too (its batches are replayed, never merged twice).
"""

from __future__ import annotations

import time

import numpy as np

import operators
from topo.ray_engine.protocol import Flush, concat_logs

MERGE_EVERY = 16  # flushes kept unmerged before they are folded into the running result


class Aggregator:
    """Holds the merged operator state, the committed batches and the per-tuple log that came with them."""

    def __init__(self, operator: str, workers: int, sources: int, operator_params: dict | None = None) -> None:
        self.op = operators.make(operator, **(operator_params or {}))
        self._live = [-1] * workers  # the incarnation of each worker allowed to flush
        self._lives = [0] * workers  # incarnations registered so far
        self._committed: list[set[int]] = [set() for _ in range(sources)]
        self._merged = self.op.empty()
        self._unmerged: list = []
        self._logs: list[dict[str, np.ndarray]] = []
        self._log_workers: list[np.ndarray] = []
        self.registrations: list[dict] = []
        self.stats = {"flushes": 0, "stale": 0, "duplicate": 0, "keys_flushed": 0, "tuples": 0}

    def register(self, worker: int, pid: int, node: dict) -> int:
        """A worker incarnation starts: its number, and from now on the only one of that worker that may flush."""
        incarnation = self._lives[worker]
        self._lives[worker] += 1
        self._live[worker] = incarnation
        self.registrations.append({"worker": worker, "incarnation": incarnation, "pid": pid, "node": node,
                                   "at": time.time()})
        return incarnation

    def flush(self, flush: Flush) -> bool:
        """Merge a worker's delta and commit its batches; False (nothing merged) if stale or a duplicate."""
        if flush.incarnation != self._live[flush.worker]:
            self.stats["stale"] += 1
            return False
        pairs = list(zip(flush.sources.tolist(), flush.batch_ids.tolist(), strict=True))
        if any(b in self._committed[s] for s, b in pairs):
            self.stats["duplicate"] += 1
            return False
        for s, b in pairs:
            self._committed[s].add(b)
        self._unmerged.append(flush.state)
        if len(self._unmerged) >= MERGE_EVERY:
            self._fold()
        self._logs.append(flush.log)
        self._log_workers.append(np.full(flush.tuples, flush.worker, np.int32))
        self.stats["flushes"] += 1
        self.stats["keys_flushed"] += int(self.op.distinct_keys(flush.state))
        self.stats["tuples"] += flush.tuples
        return True

    def committed(self, source: int, batch_ids: list[int]) -> list[int]:
        """The given batch ids of `source` that are merged."""
        done = self._committed[source]
        return [b for b in batch_ids if b in done]

    def _fold(self) -> None:
        self._merged = self.op.merge([self._merged, *self._unmerged])
        self._unmerged = []

    def result(self) -> tuple[object, dict[str, np.ndarray], dict]:
        """(merged state, per-tuple log with a `worker` column, counters and registrations)."""
        self._fold()
        log = concat_logs(self._logs)
        log["worker"] = np.concatenate(self._log_workers) if self._log_workers else np.empty(0, np.int32)
        return self._merged, log, {**self.stats, "registrations": list(self.registrations)}
