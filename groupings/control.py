"""Strategies that repartition (Gedik's partitioning functions, ALBIC) share one controller per run.

All sources of a run must agree on where a key lives, so the partitioning function belongs to a controller,
not to a source: sources route with the controller's current version, the engine calls `step` once per
period, and when `step` installs a new version the engine migrates the state of every key whose owner changed
(found with `lookup` under the old and the new version), pausing the workers involved.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from .feedback import WorkerReport
from .groupmap import Versions


@dataclass
class MigrationLog:
    """What repartitioning cost so far: engines add to it, the run summary reports it."""

    migrations: int = 0  # repartitions that moved some state
    migrated_keys: int = 0  # keys whose state moved to another worker
    pause_s: float = 0.0  # total time workers spent paused for state transfer
    events: list[dict] = field(default_factory=list)  # one row per repartition: at, version, keys, pairs

    def record(self, controller: Controller, keys: np.ndarray, old_version: int, workers: int, now: float,
               per_key_s: float) -> tuple[int, np.ndarray]:
        """Log a new version of `controller`: which of `keys` changed owner since `old_version`, and how long each
        of `workers` pauses (both ends of a moved key pause `per_key_s`). Returns (keys moved, pause per worker)."""
        old = np.asarray(controller.lookup(keys, old_version))
        new = np.asarray(controller.lookup(keys, controller.version))
        moved = old != new
        count = int(moved.sum())
        ends = np.bincount(old[moved], minlength=workers) + np.bincount(new[moved], minlength=workers)
        pause_s = per_key_s * float(ends.sum())
        if count:
            self.migrations += 1
            self.migrated_keys += count
            self.pause_s += pause_s
        self.events.append({"at_s": now, "version": controller.version, "keys": count, "pause_s": pause_s})
        return count, per_key_s * ends


class Controller(ABC):
    """One partitioning function shared by every source of a run, rebuilt from measurements each period."""

    def __init__(self, workers: int, seed: int, period_s: float, versions: Versions | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1 (got {workers})")
        if not period_s > 0:
            raise ValueError(f"the controller period must be positive (got {period_s})")
        self.workers = workers  # active workers now
        self.seed = seed
        self.period_s = period_s  # how often the engine calls step (seconds of engine time)
        # the partitioning function, current and previous; a controller whose lookup needs only the version
        # number keeps None as its value
        self.versions: Versions = Versions(None) if versions is None else versions
        self.sources: list = []  # the source groupings that route with this controller

    def attach(self, grouping: object) -> None:
        """A source's grouping joins (it routes with this controller and may hold statistics for it)."""
        self.sources.append(grouping)

    @property
    def version(self) -> int:
        """The installed partitioning function's number, bumped by every install."""
        return self.versions.version

    def replica(self) -> Controller:
        """A copy of this controller to ship to the sources (`Replicated.adopt`), without the statistics it was
        stepped with."""
        out = copy.copy(self)
        out.sources = []
        out.versions = self.versions.copy()  # later installs on either side stay on that side
        return out

    def prepare(self) -> None:
        """Load what the first step needs (a solver, say) before the run's clock starts; nothing by default."""
        return None

    @abstractmethod
    def step(self, report: WorkerReport) -> bool:
        """End of a period: measure, decide, and maybe install a new version; True if the version changed."""

    @abstractmethod
    def lookup(self, keys: np.ndarray, version: int | None = None) -> np.ndarray:
        """Owner (int32) of each key hash under `version` (default: current); the previous version is kept."""

    @property
    def draining(self) -> frozenset[int]:
        """Workers that left the topology but still own keys the controller moves off them over the next periods
        (ALBIC drains within its migration budget); engines keep serving them until they are empty."""
        return frozenset()

    def resize(self, workers: int) -> None:
        """The number of active workers changes (workers join or leave at the top index); the next step adapts."""
        if workers < 1:
            raise ValueError(f"workers must be at least 1 (got {workers})")
        self.workers = workers

    def stats(self) -> dict:
        """Small JSON-able facts about the controller (version, tracked keys, last solve time...)."""
        return {"version": self.version}
