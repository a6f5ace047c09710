"""The operator chain of ALBIC's controller: a downstream operator whose key groups receive from the edge's.

ALBIC (Madsen et al. 2016, Section 4.3.2) places communicating key groups of consecutive operators on the same
node. The `albic` grouping routes one edge (the upstream operator's key groups U); an `OperatorChain` adds the
operator after it: its D key groups, where they sit, and the traffic out[k, j] from upstream key group k to
downstream key group j during the period, either

* given (`traffic`, a U x D matrix the caller sets, and may replace before any period), or
* measured (`traffic=None`): the downstream operator is keyed by the same key as the edge, with its own hash
  into D key groups (as the paper's Job 2, ExtractDelay -> SumDelay, both per airplane), and the sources count
  each (k, j) pair as they route.

A downstream key group's load is given (`loads`) or, when not, the tuples it received per second (the column
sums of out), the unit of the upstream gLoad. Each period the controller runs `groupings.collocation.albic`
over both operators' key groups (vertices 0..U-1 upstream, U..U+D-1 downstream) instead of the plain MILP.

The collocation factor is the share of the chain's traffic (the sum of out) whose two key groups sit on the
same node: 1/nodes for a placement blind to the traffic with even fan-out, 1 when every pair shares a node.

Loads go to the heuristic as shares of the mean node load (mean = 1), so its thresholds are unit-free: maxLD
0.2 and maxPL 0.5 are the paper's 10 and 25 percentage points on nodes about half loaded, stepPL 0.1 its 5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .checks import as_key_hashes
from .hashing import seeded_hashes

if TYPE_CHECKING:
    from .feedback import WorkerReport

CHAIN_SALT = 0x444F574E53545245  # key -> downstream key group: a hash of its own, independent of the edge's
MAX_LD = 0.2  # maxLD, as a share of the mean node load
MAX_PL = 0.5  # initial maxPL, as a share of the mean node load
STEP_PL = 0.1  # stepPL, as a share of the mean node load
SCORE_FACTOR = 1.5  # sF


@dataclass
class OperatorChain:
    """The operator after the edge: D key groups, their placement, and the traffic they receive per period."""

    groups: int  # D
    traffic: np.ndarray | None = None  # out[k, j] per period, given; None: measured from the routed keys
    loads: np.ndarray | None = None  # gLoad_j of the downstream key groups per period, given; None: tuples in/s
    placement: np.ndarray | None = None  # node of each downstream key group; None: striped over the workers
    max_ld: float = MAX_LD
    max_pl: float = MAX_PL
    step_pl: float = STEP_PL
    score_factor: float = SCORE_FACTOR
    upstream: int = field(default=0, init=False)  # U, set when a controller binds the chain

    def bind(self, upstream: int, workers: int) -> None:
        """Check the chain against the edge's U key groups and place the downstream key groups if not placed."""
        if self.groups < 1:
            raise ValueError(f"the downstream operator needs at least one key group (got {self.groups})")
        self.upstream = int(upstream)
        if self.traffic is not None:
            self.traffic = np.asarray(self.traffic, dtype=float)
            if self.traffic.shape != (self.upstream, self.groups):
                raise ValueError(f"traffic must be {self.upstream} x {self.groups} (got {self.traffic.shape})")
        if self.loads is not None and np.shape(self.loads) != (self.groups,):
            raise ValueError(f"loads must give one value per downstream key group ({self.groups})")
        if self.placement is None:
            self.placement = np.arange(self.groups, dtype=np.int64) % workers
        self.placement = np.asarray(self.placement, dtype=np.int64)
        if self.placement.shape != (self.groups,) or self.placement.min() < 0:
            raise ValueError("placement must give a node (>= 0) per downstream key group")

    @property
    def measured(self) -> bool:
        """True when the sources count the traffic (no matrix given)."""
        return self.traffic is None

    def downstream_groups(self, keys: np.ndarray) -> np.ndarray:
        """Downstream key group (int64 in [0, D)) of each key hash: the operator's own hash of the same key."""
        return seeded_hashes(as_key_hashes(keys), CHAIN_SALT, self.groups).astype(np.int64)

    def count(self, upstream_groups: np.ndarray, keys: np.ndarray, pairs: np.ndarray | None) -> np.ndarray:
        """Add the (k, j) pairs of routed keys to a source's flat U*D counter (made when None) and return it."""
        if pairs is None or pairs.size != self.upstream * self.groups:
            pairs = np.zeros(self.upstream * self.groups, dtype=np.int64)
        flat = upstream_groups * self.groups + self.downstream_groups(keys)
        pairs += np.bincount(flat, minlength=pairs.size)
        return pairs

    def traffic_of(self, sources: list) -> np.ndarray:
        """out[k, j] of this period: the given matrix, or the pairs the sources counted (counting restarts)."""
        if not self.measured:
            return self.traffic
        out = np.zeros(self.upstream * self.groups)
        for source in sources:
            take = getattr(source, "take_pairs", None)
            pairs = take() if take is not None else None
            if pairs is not None and pairs.size == out.size:
                out += pairs
        return out.reshape(self.upstream, self.groups)

    def loads_of(self, out: np.ndarray, period_s: float) -> np.ndarray:
        """gLoad of the downstream key groups: the given loads, or the tuples each received per second."""
        return np.asarray(self.loads, dtype=float) if self.loads is not None else out.sum(axis=0) / period_s

    def plan(
        self,
        loads: np.ndarray,
        assignment: np.ndarray,
        out: np.ndarray,
        down_loads: np.ndarray,
        nodes_active: np.ndarray,
        kill_mask: np.ndarray,
        speed: np.ndarray,
        *,
        migration_cost: np.ndarray | None,
        budget: float,
        rng: np.random.Generator,
        time_limit: float,
        node_limit: int,
    ) -> tuple[np.ndarray, np.ndarray, dict]:
        """One ALBIC invocation over both operators: the new nodes of the edge's and of the downstream key groups,
        and the facts (load distances as shares of the mean node load, collocation factor before and after)."""
        from .collocation import albic  # scipy's graph code loads only for a controller with a chain

        up = np.asarray(loads, dtype=float)
        every = np.concatenate([up, np.asarray(down_loads, dtype=float)])
        in_a = nodes_active & ~kill_mask
        weight = speed / speed[in_a].mean()  # relative capacities: an average node of A weighs 1
        total = every.sum()
        scale = total / weight[in_a].sum() if total > 0 else 1.0  # the mean node load: loads / scale has mean 1
        mc = None
        if migration_cost is not None:  # the edge's state sizes; a downstream key group counts as an average one
            mc = np.concatenate([np.asarray(migration_cost, dtype=float), np.ones(self.groups)])
        placed = np.concatenate([np.asarray(assignment, dtype=np.int64), self.placement])
        new, info = albic(
            out,
            placed,
            every / scale,
            mc,
            budget,
            nodes_active,
            kill_mask,
            max_ld=self.max_ld,
            max_pl=self.max_pl,
            step_pl=self.step_pl,
            score_factor=self.score_factor,
            node_speed=weight,
            time_limit=time_limit,
            node_limit=node_limit,
            rng=rng,
        )
        info["scale"] = scale
        return new[: up.size], new[up.size :], info


def step_with_chain(
    ctl: Any,  # the albic controller (not imported here: albic imports this module)
    loads: np.ndarray,
    in_n: np.ndarray,
    kill: np.ndarray,
    speed: np.ndarray,
    report: WorkerReport,
) -> bool:
    """A controller's period with an operator chain: ALBIC over both operators' key groups, the plan kept when it
    lowers the load distance by min_gain, raises the collocation factor or drains a node being removed; True when
    the edge's own placement changed (a new version)."""
    chain = ctl.chain
    out = chain.traffic_of(ctl.sources)
    new, down, info = chain.plan(
        loads, ctl.assignment, out, chain.loads_of(out, report.period_s), in_n, kill, speed,
        migration_cost=ctl._migration_cost(), budget=ctl._budget(), rng=ctl.rng,
        time_limit=float(ctl.params["time_limit"]), node_limit=int(ctl.params["node_limit"]),
    )  # fmt: skip
    ctl.solves += 1
    moved, moved_down = new != ctl.assignment, down != chain.placement
    before, after = info["load_distance_before"], info["load_distance"]
    off_b = np.any(moved & (ctl.assignment >= ctl.workers)) or np.any(moved_down & (chain.placement >= ctl.workers))
    drained = bool(off_b)
    ctl.last = {
        "at_s": report.now,
        "load_distance": before,
        "tuples": int(round(loads.sum() * report.period_s)),
        "installed": False,
        "solve_s": info["solve_s"],
        "status": info["status"],
        "planned_load_distance": after,
        "planned": int(moved.sum() + moved_down.sum()),
        "collocation_before": info["collocation_before"],
        "collocation": info["collocation"],
        "pair": info["pair"],
        "max_pl": info["max_pl"],
    }
    gain = before - after >= float(ctl.params["min_gain"]) or info["collocation"] > info["collocation_before"]
    if not (moved.any() or moved_down.any()) or not (gain or drained):
        ctl.last["collocation"] = info["collocation_before"]  # the plan is declined: the placement stays
        return False
    chain.placement = down
    ctl.migrated_groups += int(moved_down.sum())
    ctl.last["installed"] = True
    if not moved.any():
        return False  # only downstream key groups moved: the edge routes as before
    ctl._install(new.astype(np.int32), report.now, before, after, info)
    ctl.events[-1].update(key_groups_moved=int(moved.sum() + moved_down.sum()), collocation=info["collocation"])
    return True
