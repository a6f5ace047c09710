"""ALBIC's load balancing (Madsen et al. 2016): key groups placed on workers by a MILP under a migration budget.

Keys hash into G key groups (more than workers, a fixed hash shared by every source); one controller per run
holds the placement of every key group on a node. Each source counts the tuples of each key group as it routes
them; at the end of a period the controller sums the counts into gLoad_k, turns them into node utilizations
with the capacity each worker showed (tuples per busy second: heterogeneous workers), and solves the
allocation MILP of `groupings.milp` within a migration budget (a number of key groups, or a cost in state).
A new placement is installed only when it lowers the load distance by `min_gain` of the mean load, or drains
a node being removed, so a balanced run does not churn; the previous placement is kept for `lookup`.

Scaling follows the paper's Algorithm 1: when `resize` shrinks to n workers, the nodes n and above are marked
for removal (B) and keep their key groups until the MILP drains them, within the budget, over the next
periods (Lemma 1: nothing moves into B); a node of B that holds no key group is terminated (`draining` lists
the ones left, so the engine keeps them running until then). New workers join with load 0.

With an operator chain (`set_chain`, or `chain_groups` for a downstream operator keyed by the same key) the
controller places the downstream operator's key groups too, and each period runs ALBIC's collocation heuristic
(`groupings.collocation`) around the MILP instead of the MILP alone; `groupings.chain` holds that model and
defines the collocation factor it reports.

Choices where the paper is silent: G = 8 key groups per initial worker (the paper uses about 5 per node);
gLoad in tuples per second of the period; the key group state size behind the cost form is the number of
distinct keys it has seen (a linear-counting sketch per key group), in units of the average key group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import registry
from ..checks import as_key_hashes, check_now, check_report, check_workers
from ..control import Controller
from ..feedback import AckReport, WorkerReport
from ..groupmap import GroupMap
from ..hashing import seeded_hashes
from ..milp import allocate, load_distance, load_solver, node_loads
from ..params import Param, at_least_one, non_negative, positive

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


class AlbicSnapshot:
    """A source's statistics as the controller reads them: tuples per key group since the last snapshot, and its
    distinct-key sketch per key group."""

    def __init__(self, counts: np.ndarray, sketch: np.ndarray, pairs: np.ndarray | None = None) -> None:
        self.counts = counts
        self.sketch = sketch
        self.pairs = pairs  # (k, j) pairs counted for a measured operator chain, else None

    def take_counts(self) -> np.ndarray:
        """The counts of the snapshot, once (as the grouping's `take_counts`)."""
        counts, self.counts = self.counts, np.zeros_like(self.counts)
        return counts

    def take_pairs(self) -> np.ndarray:
        """The chain's (k, j) counts of the snapshot, once."""
        pairs, self.pairs = self.pairs, None
        return np.zeros(0) if pairs is None else pairs


class AlbicGrouping:
    """One source's side: key group by a fixed hash, worker by the controller's placement; counts per key group."""

    name = "albic"

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any], controller: AlbicController) -> None:
        if not isinstance(controller, AlbicController):
            raise TypeError(f"albic routes with an AlbicController (got {type(controller).__name__})")
        self.seed = seed
        self.params = dict(params)
        self.controller = controller
        self.counts = np.zeros(controller.groups, dtype=np.int64)  # tuples per key group since the last step
        self.track_state = float(controller.params["max_migr_cost"]) > 0  # the controller's budget form decides
        self.sketch = np.zeros((controller.groups, SKETCH_BITS if self.track_state else 0), dtype=bool)
        self.messages = 0
        self.pairs: np.ndarray | None = None  # (k, j) counts for a measured operator chain
        controller.attach(self)

    @property
    def workers(self) -> int:
        """Nodes the current placement routes to (active workers and those still draining)."""
        return self.controller.nodes

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Worker (int32) of each key hash under the controller's current placement, counting its key group."""
        keys = as_key_hashes(keys)
        check_now(now)
        g = key_groups(keys, self.controller.groups)
        self.counts += np.bincount(g, minlength=self.counts.size)
        if self.track_state and keys.size:
            self.sketch[g, seeded_hashes(keys, SKETCH_SALT, SKETCH_BITS)] = True
        chain = self.controller.chain
        if chain is not None and chain.measured:
            self.pairs = chain.count(g, keys, self.pairs)
        self.messages += keys.size
        return self.controller.assignment[g]

    def take_counts(self) -> np.ndarray:
        """Tuples per key group since the last call, and start counting again."""
        counts, self.counts = self.counts, np.zeros_like(self.counts)
        return counts

    def take_pairs(self) -> np.ndarray:
        """The chain's (k, j) counts since the last call (flat, U*D; empty when none were counted)."""
        pairs, self.pairs = self.pairs, None
        return np.zeros(0) if pairs is None else pairs

    def snapshot(self) -> AlbicSnapshot:
        """The counts since the last snapshot (counting restarts) and a copy of the sketch, for a controller in
        another process."""
        return AlbicSnapshot(self.take_counts(), self.sketch.copy(), self.take_pairs())

    def adopt(self, controller: AlbicController) -> AlbicController:
        """Route with `controller` (a replica of the run's) from now on."""
        controller.sources = [self]
        self.controller = controller
        return controller

    def feedback(self, report: AckReport) -> None:
        """Acks carry nothing ALBIC uses: the controller measures the workers itself."""
        check_report(report, self.workers)

    def resize(self, workers: int) -> None:
        """Nothing to do at the source: the controller drains or fills nodes over the next periods."""
        check_workers(workers)

    def stats(self) -> dict:
        """Messages routed and the placement version routed with."""
        return {"messages": self.messages, "version": self.controller.version, "groups": self.controller.groups}

    def __repr__(self) -> str:
        return f"AlbicGrouping(workers={self.workers}, seed={self.seed}, version={self.controller.version})"


# --- registration -----------------------------------------------------------------------------------------------


def _enough_groups(value: int, workers: int, values: Mapping[str, Any]) -> str | None:
    return None if value >= workers else "must be at least the number of workers"


PARAMS = (
    Param("groups", int, lambda n, v: 8 * n, _enough_groups, "key groups G (fixed for the run)", shown="8n"),
    Param(
        "max_migrations",
        int,
        lambda n, v: max(2, math.ceil(v["groups"] / 20)),
        at_least_one,
        "migration budget: key groups moved per period",
        shown="max(2, ceil(groups/20))",
    ),
    Param(
        "max_migr_cost",
        float,
        0.0,
        non_negative,
        "migration budget as state moved per period, in average key groups (0: count key groups instead)",
    ),
    Param("min_gain", float, 0.05, non_negative, "install only if the load distance drops by this share of the mean"),
    Param("time_limit", float, 1.0, positive, "seconds the MILP solver may take per period", duration=True),
    Param(
        "node_limit",
        int,
        0,
        non_negative,
        "branch-and-bound nodes the MILP may explore per period (0: no limit); unlike time_limit, reproducible",
    ),
    Param("period", float, 1.0, positive, "seconds between two controller steps", duration=True),
    Param(
        "chain_groups",
        int,
        0,
        non_negative,
        "key groups of a downstream operator keyed by the same key, collocated with the edge's by ALBIC's heuristic "
        "(0: no chain, the plain MILP)",
    ),
)


def _make_controller(workers: int, seed: int, params: Mapping[str, Any]) -> AlbicController:
    """The run's controller: one key group placement for every source."""
    return AlbicController(workers, seed, params)


def _make(workers: int, seed: int, params: Mapping[str, Any], controller: Any = None) -> AlbicGrouping:
    """A source's splitter; without a shared controller it gets a private one."""
    if controller is None:
        controller = AlbicController(workers, seed, params)
    return AlbicGrouping(workers, seed, params, controller)


registry.register(
    "albic",
    _make,
    params=PARAMS,
    doc="ALBIC: key groups placed by a MILP minimizing the load distance under a migration budget, "
    "capacity-aware, with gradual scale-in (MILP of Madsen et al.; collocation heuristic in groupings.collocation)",
    controller=_make_controller,
)
