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

The controller lives in `albic_control`; this module has the sources' side, the parameters and the registration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import registry
from ..checks import as_key_hashes, check_now, check_report, check_workers
from ..feedback import AckReport
from ..hashing import seeded_hashes
from ..params import Param, at_least_one, non_negative, positive
from .albic_control import SKETCH_BITS, SKETCH_SALT, AlbicController, distinct_estimate, key_groups

__all__ = ["SKETCH_BITS", "SKETCH_SALT", "AlbicController", "AlbicGrouping", "distinct_estimate", "key_groups"]


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
    takes_feedback = False  # its controller measures the workers itself: engines build it no ack reports

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
