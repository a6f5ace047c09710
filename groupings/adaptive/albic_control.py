"""ALBIC's controller (Madsen et al. 2016): the placement of every key group on a node, rebalanced each period by
the allocation MILP within a migration budget, with gradual scale-in; the module `albic` has the sources' side,
the parameters and the registration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..checks import as_key_hashes, check_workers
from ..control import Controller
from ..feedback import WorkerReport
from ..groupmap import GroupMap
from ..hashing import seeded_hashes
from ..milp import allocate, load_distance, load_solver, node_loads

if TYPE_CHECKING:
    from ..chain import OperatorChain

KEY_GROUP_SALT = 0x4B455947524F5550  # key -> key group: the same for every source and run
SKETCH_SALT = 0x53544154455349  # key -> bit of its key group's distinct-key sketch
SKETCH_BITS = 4096  # linear counting: exact enough up to a few ten thousand distinct keys per key group
CAPACITY_MEMORY = 0.5  # weight of the previous capacity estimate when a worker is measured again


def key_groups(keys: np.ndarray, groups: int) -> np.ndarray:
    """Key group (int64 in [0, groups)) of each key hash."""
    return seeded_hashes(as_key_hashes(keys), KEY_GROUP_SALT, groups).astype(np.int64)


def distinct_estimate(sketch: np.ndarray) -> np.ndarray:
    """Distinct keys behind each row of a linear-counting bit sketch (saturates at m ln m)."""
    m = sketch.shape[1]
    zeros = np.maximum(m - sketch.sum(axis=1), 1)
    return m * np.log(m / zeros)


class AlbicController(Controller):
    """The placement of every key group on a node, rebalanced each period by the allocation MILP."""

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        workers = check_workers(workers)
        self.groups = int(params["groups"])
        super().__init__(workers, seed, float(params["period"]), GroupMap.striped(self.groups, workers))
        self.params = dict(params)
        self.capacity = np.zeros(self.workers)  # learned tuples per busy second; 0 = not measured yet
        self.events: list[dict] = []  # one row per installed version
        self.solves = 0
        self._declined: tuple[int, float] | None = None  # (version, load distance) of the last fruitless solve
        self.migrated_groups = 0
        self.last: dict = {}
        self.chain: OperatorChain | None = None
        self.rng = np.random.default_rng(seed)  # ALBIC's random tie-breaks
        if int(params.get("chain_groups", 0)) > 0:
            from ..chain import OperatorChain

            self.set_chain(OperatorChain(int(params["chain_groups"])))

    def set_chain(self, chain: OperatorChain | None) -> None:
        """Place a downstream operator's key groups with this edge's, collocating pairs that talk (None: no chain)."""
        if chain is not None:
            chain.bind(self.groups, self.workers)
        self.chain = chain

    # --- placement and lookup

    @property
    def assignment(self) -> np.ndarray:
        """Node of every key group now (the current version of the key-group map)."""
        return self.versions.current

    def placement(self, version: int | None = None) -> np.ndarray:
        """Node of every key group under `version` (default: current); only the current and previous are kept."""
        return self.versions.get(version)

    def lookup(self, keys: np.ndarray, version: int | None = None) -> np.ndarray:
        """Worker (int32) of each key hash under `version` (default: current); the previous version is kept."""
        return self.versions.lookup(key_groups(keys, self.groups), version)

    def prepare(self) -> None:
        """Import the MILP solver ahead of the run (it takes longer than a short period)."""
        load_solver()

    @property
    def draining(self) -> list[int]:
        """Nodes marked for removal that still hold key groups (they must keep running until drained)."""
        held = np.unique(self._placed())
        return [int(w) for w in held if w >= self.workers]

    @property
    def nodes(self) -> int:
        """Nodes in use: the active workers and the ones still draining."""
        return max(self.workers, int(self._placed().max()) + 1)

    def _placed(self) -> np.ndarray:
        """Node of every key group placed: the edge's, then the chain's downstream ones."""
        return self.assignment if self.chain is None else np.concatenate([self.assignment, self.chain.placement])

    def resize(self, workers: int) -> None:
        """Workers join (with load 0) or are marked for removal at the top index; the next steps rebalance."""
        super().resize(check_workers(workers))
        if self.capacity.size < workers:
            self.capacity = np.concatenate([self.capacity, np.zeros(workers - self.capacity.size)])

    # --- the period

    def step(self, report: WorkerReport) -> bool:
        """End of a period: measure gLoad and capacities, solve the MILP, install the plan if it is worth it."""
        if not isinstance(report, WorkerReport):
            raise TypeError(f"step takes a WorkerReport (got {type(report).__name__})")
        counts = np.zeros(self.groups, dtype=np.int64)
        for source in self.sources:
            counts += source.take_counts()
        self._learn_capacity(report)
        nodes = self.nodes
        kill = np.arange(nodes) >= self.workers
        holds = np.bincount(self._placed(), minlength=nodes) > 0
        in_n = ~kill | holds  # Algorithm 1: a node of B with no key group left is terminated
        kill &= in_n
        speed = self._speed(nodes)
        loads = counts / report.period_s
        if self.chain is not None:
            from ..chain import step_with_chain

            return step_with_chain(self, loads, in_n, kill, speed, report)
        util = node_loads(loads, self.assignment, nodes)
        total = util.sum()
        mean = total / speed[~kill].sum()
        before = float(load_distance(util, ~kill, speed) / mean) if total > 0 else 0.0
        min_gain = float(self.params["min_gain"])
        self.last = {"at_s": report.now, "load_distance": before, "tuples": int(counts.sum()), "installed": False}
        if not kill.any() and before <= min_gain:
            return False  # no plan can lower the load distance by min_gain
        if not kill.any() and self._declined is not None and self._declined[0] == self.version:
            if abs(before - self._declined[1]) < min_gain / 2:
                self.last["skipped"] = True  # the solver found nothing worth it at about this imbalance
                return False
        new, info = allocate(
            loads,
            self.assignment,
            in_n,
            kill,
            self._migration_cost(),
            self._budget(),
            node_speed=speed,
            time_limit=float(self.params["time_limit"]),
            node_limit=int(self.params["node_limit"]),
        )
        self.solves += 1
        moved = new != self.assignment
        after = float(info["load_distance"] / info["mean"]) if total > 0 else 0.0
        drained = bool(np.any(moved & (self.assignment >= self.workers)))
        self.last.update(
            solve_s=info["solve_s"], status=info["status"], planned_load_distance=after, planned=int(moved.sum())
        )
        if not moved.any() or (before - after < min_gain and not drained):
            self._declined = (self.version, before)
            return False
        self._install(new.astype(np.int32), report.now, before, after, info)
        return True

    def _install(self, new: np.ndarray, at: float, before: float, after: float, info: dict) -> None:
        """Make `new` the current placement, keeping the one it replaces for lookup."""
        moved = int(np.count_nonzero(new != self.assignment))
        self.versions.install(new)
        self.migrated_groups += moved
        self.last["installed"] = True
        self.events.append(
            {
                "at_s": at,
                "version": self.version,
                "key_groups_moved": moved,
                "migration_cost": info["migration_cost"],
                "load_distance_before": before,
                "load_distance_after": after,
                "solve_s": info["solve_s"],
            }
        )

    def _learn_capacity(self, report: WorkerReport) -> None:
        """Fold the tuples per busy second each worker showed this period into its capacity estimate."""
        measured = np.asarray(report.measured_capacity(), dtype=float)
        if self.capacity.size < measured.size:
            self.capacity = np.concatenate([self.capacity, np.zeros(measured.size - self.capacity.size)])
        seen = np.flatnonzero(measured > 0)
        old, new = self.capacity[seen], measured[seen]
        self.capacity[seen] = np.where(old > 0, CAPACITY_MEMORY * old + (1 - CAPACITY_MEMORY) * new, new)

    def _speed(self, nodes: int) -> np.ndarray:
        """Capacity weight of each node: its learned capacity, the median of the known ones where none yet."""
        cap = np.zeros(nodes)
        known = self.capacity[:nodes]
        cap[: known.size] = known
        fill = np.median(cap[cap > 0]) if np.any(cap > 0) else 1.0
        return np.where(cap > 0, cap, fill)

    def _budget(self) -> float:
        """maxMigrCost when the cost form is on, else maxMigrations."""
        cost = float(self.params["max_migr_cost"])
        return cost if cost > 0 else float(self.params["max_migrations"])

    def _migration_cost(self) -> np.ndarray | None:
        """mc_k: distinct keys seen by key group k over the average key group (cost form), None to count moves."""
        if float(self.params["max_migr_cost"]) <= 0:
            return None
        sketch = np.zeros((self.groups, SKETCH_BITS), dtype=bool)
        for source in self.sources:
            sketch |= source.sketch
        size = distinct_estimate(sketch)
        return size / size.mean() if size.sum() > 0 else np.ones(self.groups)

    def stats(self) -> dict:
        """Version, key groups per node, draining nodes, solves, installs, migrations and the last period's facts."""
        chain = {} if self.chain is None else {
            "chain_groups": self.chain.groups, "collocation": self.last.get("collocation")}  # fmt: skip
        return chain | {
            "version": self.version,
            "groups": self.groups,
            "groups_per_node": np.bincount(self.assignment, minlength=self.nodes).tolist(),
            "draining": self.draining,
            "solves": self.solves,
            "installs": len(self.events),
            "key_groups_moved": self.migrated_groups,
            "capacity": [round(float(c), 3) for c in self.capacity],
            "last": dict(self.last),
        }
