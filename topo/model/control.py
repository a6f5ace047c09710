"""A shared controller's periods, as both engines step them (gedik, albic).

Each period the engine hands over the workers' running counters (tuples done, busy seconds) and queues; this turns
them into the period's `WorkerReport`, steps the controller, and when it installs a new partitioning function,
moves the state of every key seen so far whose owner changed: both ends pause per key moved (the engines apply
the pauses). The engine decides only how it gets the counters and how the new version reaches its sources.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from groupings.control import Controller, MigrationLog
from groupings.feedback import WorkerReport
from groupings.keytable import KeySet


@dataclass(frozen=True)
class Repartition:
    """A new version installed: keys whose state moved, and seconds each worker pauses for the transfer."""

    keys: int
    pause_s: np.ndarray


class ControlPeriods:
    """The controller of a run, its counters at the last period, the keys seen so far, and its migrations."""

    def __init__(self, controller: Controller, workers: int, migration_ms_per_key: float) -> None:
        self.controller = controller
        self.workers = workers  # every worker the run may have (the controller's active ones are a prefix)
        self.per_key_s = migration_ms_per_key / 1e3
        self.migrations = MigrationLog()
        self.steps = 0
        self._seen = KeySet()  # distinct keys routed so far
        self._done = np.zeros(workers, np.int64)
        self._busy = np.zeros(workers)

    def see(self, keys: np.ndarray) -> None:
        """Keys routed since the last call (duplicates allowed)."""
        self._seen.add(keys)

    @property
    def seen(self) -> np.ndarray:
        """The distinct keys routed so far, ascending: the ones that may have state to move."""
        return self._seen.sorted()

    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the running totals (tuples done, busy seconds) the last period ended with."""
        return self._done.copy(), self._busy.copy()

    def step(self, now: float, done: np.ndarray, busy_s: np.ndarray, queue: np.ndarray,
             active: int) -> Repartition | None:
        """A period ends at `now` with the workers' running totals; the repartition it caused, if any."""
        done = np.asarray(done, np.int64)
        busy_s = np.asarray(busy_s, np.float64)
        # a worker whose counters went back restarted: it counts from zero again
        tuples = np.where(done >= self._done, done - self._done, done)
        busy = np.where(busy_s >= self._busy, busy_s - self._busy, busy_s)
        self._done, self._busy = done, busy_s
        ctl = self.controller
        report = WorkerReport(tuples=tuples, busy_s=busy, queue_len=np.asarray(queue, np.float64),
                              active=np.arange(self.workers) < active, period_s=ctl.period_s, now=now)
        before = ctl.version
        self.steps += 1
        if ctl.step(report) and ctl.version != before:
            return self._migrate(before, now)
        return None

    def resize(self, active: int, now: float) -> Repartition | None:
        """Workers join or leave at the top index; a controller that moves keys off leaving workers does it now."""
        before = self.controller.version
        self.controller.resize(active)
        return self._migrate(before, now) if self.controller.version != before else None

    def _migrate(self, old_version: int, now: float) -> Repartition:
        count, pauses = self.migrations.record(self.controller, self.seen, old_version, self.workers, now,
                                               self.per_key_s)
        return Repartition(count, pauses)
