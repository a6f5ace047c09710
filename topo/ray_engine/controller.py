"""Strategies with a shared partitioning function (gedik, albic) on Ray: a controller actor and source replicas.

Every source routes with a replica of the run's controller, adopted by its own grouping (`contract.Replicated`).
Each period the controller actor pulls from every source its grouping's `snapshot()` and the keys routed since,
stands the snapshots in for the sources' groupings, asks the workers for their counters, and steps the run's
controller through the engines' one `ControlPeriods` (the period's `WorkerReport`, the keys seen, the migrations).
When that installs a new version it pushes a `replica()` to every source, which adopts it before its next batch,
and pauses the workers whose keys moved for `migration_ms_per_key` per key (the simulator's migration model).

Every installed version is checkpointed with the controller's periods (one part, replaced each time), so a
controller that dies restarts from its last installed version: the one every source routes with.
"""

from __future__ import annotations

import pickle
import threading
import time

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

import groupings
from topo.model.control import ControlPeriods, Repartition
from topo.ray_engine.checkpoint import CheckpointStore
from topo.ray_engine.metrics import ControlMetrics, MetricsContext
from topo.ray_engine.mortal import Mortal
from topo.spec import TopologySpec

CALL_TIMEOUT_S = 10.0


class ControlLoop(Mortal):
    """The run's controller as an actor: steps every period and pushes each new version to the sources."""

    def __init__(self, spec: TopologySpec, sources: list, workers: list, metrics: MetricsContext | None = None,
                 checkpoint_dir: str | None = None) -> None:
        self.spec = spec
        self.metrics = ControlMetrics(metrics) if metrics is not None else None
        self.sources = sources
        self.workers = workers
        self.store = CheckpointStore(checkpoint_dir, "controller") if checkpoint_dir else None
        saved = self.store.load() if self.store is not None else []
        self.restored: dict | None = None
        if saved:  # a restart: the last installed version, with the periods that led to it
            self.controller, self.periods, self.pushes = saved[-1]
            self.restored = {"at": time.time(), "version": self.controller.version, "pushes": self.pushes}
        else:
            self.controller = groupings.make_controller(spec.grouping, spec.workers, seed=spec.seed, **spec.params)
            self.periods = ControlPeriods(self.controller, len(workers), spec.migration_ms_per_key)
            self.pushes = 0
        self.controller.prepare()  # before the run's clock starts: a period may be shorter than loading a solver
        self._stop = threading.Event()
        self._lock = threading.Lock()  # a step and a resize from the driver never overlap
        self.active = spec.workers
        self.t0 = time.time()  # the run's start, once `run` is called

    def run(self, t0: float) -> dict:
        """Step every period from `t0` until `stop`; the controller's facts."""
        period = self.controller.period_s
        due = t0 + period
        self.t0 = t0
        if self.restored is not None:  # killed mid-push, some sources may still route with the version before
            with self._lock:
                self._push(fresh=False)
        while not self._stop.wait(max(0.0, due - time.time())):
            with self._lock:
                self._step(time.time() - t0)
            due = max(due + period, time.time())
        return self.report()

    def stop(self) -> None:
        """End the loop after the current step."""
        self._stop.set()

    def resize(self, workers: int) -> None:
        """Workers join or leave at the top index. Every source gets the resized controller before it routes
        over the new workers (so it knows which leaving ones still drain); one that moved keys off leaving
        workers at once pauses the workers the state moves between."""
        with self._lock:
            moved = self.periods.resize(workers, time.time() - self.t0)
            self.active = workers
            self._push()
            self._pause(moved)

    def _push(self, fresh: bool = True) -> None:
        """Every source routes with a copy of the controller's current version from its next batch on. A `fresh`
        version is checkpointed before any source has it, so a controller killed while pushing restarts with the
        newest version a source may route with, and pushes it again (`run`)."""
        if fresh:
            self.pushes += 1
            if self.store is not None:
                self.store.write((self.controller, self.periods, self.pushes), replace=True)
        blob = self._replica()
        for ref in [s.install.remote(blob) for s in self.sources]:
            try:
                ray.get(ref)
            except RayActorError:
                pass  # a source restarting gets the current version from the driver when it resumes

    def replica(self) -> bytes:
        """The current version, as a source installs it (after any push under way: never one it is replacing)."""
        with self._lock:
            return self._replica()

    def _replica(self) -> bytes:
        return pickle.dumps(self.controller.replica())

    def _step(self, now: float) -> None:
        pulled = []
        for ref in [s.statistics.remote() for s in self.sources]:
            try:
                pulled.append(pickle.loads(ray.get(ref, timeout=CALL_TIMEOUT_S)))
            except (RayActorError, GetTimeoutError):
                return  # a source is restarting: this period is skipped, the next one sees it again
        for _, keys in pulled:
            self.periods.see(keys)
        self.controller.sources = [snapshot for snapshot, _ in pulled]  # each stands in for its source's grouping
        moved = self.periods.step(now, *self._counters(), self.active)
        if moved is not None:
            self._push()
            self._pause(moved)

    def _counters(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each worker's running tuples done and busy seconds, and its queue now; a worker restarting reports
        nothing this period (its totals stay as they were)."""
        n = len(self.workers)
        (done, busy), queue = self.periods.totals(), np.zeros(n)
        for w, ref in enumerate([worker.counters.remote() for worker in self.workers]):
            try:
                done[w], busy[w], queue[w] = ray.get(ref, timeout=CALL_TIMEOUT_S)
            except (RayActorError, GetTimeoutError):
                pass
        return done, busy, queue

    def _pause(self, moved: Repartition | None) -> None:
        """Both ends of every moved key pause for the transfer."""
        if moved is None:
            return
        for w in np.flatnonzero(moved.pause_s).tolist():
            self.workers[w].pause.remote(float(moved.pause_s[w]))
        if moved.keys and self.metrics is not None:
            self.metrics.migrated(moved.keys)

    def report(self) -> dict:
        """The controller's stats, its migrations, and how often it stepped and pushed a version."""
        return {"controller": self.controller.stats(), "migrations": self.periods.migrations,
                "steps": self.periods.steps, "pushes": self.pushes, "restored": self.restored,
                "peak_rss_mb": self.peak_rss_mb()}
