"""Key group allocation as a Mixed-Integer Linear Program (ALBIC, Madsen et al. 2016, Section 4.3.1).

With current placement q, new placement x, key group loads gLoad_k, node capacity weights s_i, nodes N = A + B
(B marked for removal) and mean = sum of all load / sum_{i in A} s_i:

    min  w1 d - w2 (d_u + d_l)
    s.t. (1) every key group on exactly one node
         (2) sum_{i,k} (1 - q_ik) x_ik mc_k <= maxMigrCost            (the migration budget)
         (3) for i in N: sum_k x_ik gLoad_k / s_i <= mean + d - d_u
         (4) for i in A: sum_k x_ik gLoad_k / s_i >= mean - d + d_l
         0 <= d_u, d_l <= d

so d is the load distance, minimized first, and both bounds are tightened second. Departures from the
paper, each for a reason met in practice:

    * constraint (5), mean - d >= 0, is dropped: loads are never negative, and it makes the program
      infeasible as soon as one hot key group alone exceeds twice the mean;
    * Lemma 1 (no key group moves into B) is imposed by fixing those variables, not left to the objective;
    * the load and the key groups left on B are charged a little (the paper's objective names them; its
      Lemma 2 relies on d alone, which stops caring about the last whole key groups on B);
    * a negligible cost per migration prefers fewer moves among equally balanced plans;
    * HiGHS, unlike the paper's CPLEX, spends a second at the root of a few thousand binaries, so large
      instances let only a spread of key groups per node move (`_movable`), which it then solves well.

Key groups that must be collocated (ALBIC) are solved as one unit whose cost on a node is the state of its
members not already there.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

W1 = 1.0  # weight of the load distance d
W2 = 0.001  # weight of the bound tighteners: the objective is (W1 - 2 W2) d + W2 (max - min), nearly lexicographic
TIE_BREAK = 1e-5  # per average migration, in units of the mean load: only separates equally balanced plans
W_B = 0.01  # weight of the load left on B (the paper's second objective), below d's and above the bounds'
W_B_GROUP = 1e-4  # per key group left on B, so idle key groups drain too
MAX_VARIABLES = 500  # placement variables above which only a spread of key groups per node may move
GAP = 0.005  # the solver stops once within this share of the mean load of the best possible objective



def load_solver() -> None:
    """Import the MILP solver now, so that a real-time controller's first period does not pay for it."""
    import scipy.optimize  # noqa: F401

def node_loads(
    loads_per_group: np.ndarray, assignment: np.ndarray, nodes: int, node_speed: np.ndarray | None = None
) -> np.ndarray:
    """Load of each of `nodes` nodes: the sum of its key groups' loads, divided by its capacity weight if given."""
    assignment = np.asarray(assignment)
    placed = (assignment >= 0) & (assignment < nodes)
    total = np.bincount(assignment[placed], weights=np.asarray(loads_per_group, float)[placed], minlength=nodes)
    return total if node_speed is None else total / np.asarray(node_speed, float)


def load_distance(node_loads: np.ndarray, active: np.ndarray, capacity: np.ndarray | None = None) -> float:
    """max_{i in A} |load_i - mean| with mean = sum over all nodes / |A| (capacity-weighted if capacities are given)."""
    loads = np.asarray(node_loads, dtype=float)
    active = np.asarray(active, dtype=bool)
    if loads.shape != active.shape or loads.ndim != 1:
        raise ValueError("node_loads and active must be one-dimensional arrays of the same length")
    if not active.any():
        raise ValueError("load distance needs at least one node that is not marked for removal")
    if capacity is None:
        mean = loads.sum() / active.sum()
        return float(np.abs(loads[active] - mean).max())
    cap = np.asarray(capacity, dtype=float)
    mean = loads.sum() / cap[active].sum()
    return float(np.abs(loads[active] / cap[active] - mean).max())


def _units(groups: int, together: Sequence[Sequence[int]]) -> np.ndarray:
    """Unit label of each key group: key groups in overlapping `together` sets share one (union-find)."""
    parent = np.arange(groups)

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for members in together:
        members = [int(m) for m in members]
        for m in members:
            if not 0 <= m < groups:
                raise ValueError(f"collocation constraint names key group {m}, outside [0, {groups})")
        for m in members[1:]:
            a, b = root(members[0]), root(m)
            if a != b:
                parent[b] = a
    roots = np.array([root(k) for k in range(groups)])
    return np.unique(roots, return_inverse=True)[1]


def _solver_options(time_limit: float, node_limit: int, gap: float) -> dict:
    """HiGHS options; a node limit (> 0) bounds the search by work done, so the same input gives the same plan on
    any machine, which a time limit alone does not."""
    options = {"time_limit": float(time_limit), "presolve": True, "mip_abs_gap": float(gap)}
    if node_limit > 0:
        options["node_limit"] = int(node_limit)
    return options


def allocate(
    loads_per_group: np.ndarray,
    current_assignment: np.ndarray,
    nodes_active: np.ndarray,
    kill_mask: np.ndarray,
    migration_cost: np.ndarray | None,
    budget: float,
    *,
    node_speed: np.ndarray | None = None,
    together: Sequence[Sequence[int]] = (),
    pinned: Mapping[int, int] | None = None,
    time_limit: float = 1.0,
    node_limit: int = 0,
    max_variables: int = MAX_VARIABLES,
    gap: float = GAP,
    w1: float = W1,
    w2: float = W2,
) -> tuple[np.ndarray, dict]:
    """Solve the allocation MILP within the migration budget; returns the new node of every key group and facts.

    loads_per_group: gLoad_k >= 0. current_assignment: node of each key group (-1 or a node outside N: not
    placed, so placing it costs nothing). nodes_active: bool per node, the nodes N that may hold key groups.
    kill_mask: bool per node, B (a subset of N). migration_cost: mc_k per key group (None: 1 each, the
    maxMigrations form). budget: maxMigrCost. node_speed: capacity weight per node (None: homogeneous).
    together: sets of key groups that must end on one node (collocation). pinned: key group -> node its unit
    must end on. node_limit: branch-and-bound nodes HiGHS may explore (0: none set; with one, the same input
    gives the same plan on any machine, as long as time_limit is not reached first). max_variables: above this
    many placement variables, only a spread of key groups per node may move (see `_movable`). gap: absolute
    optimality tolerance, as a share of the mean load (proving more takes HiGHS long, and loads are not
    measured that finely). The plan returned is never worse, by the
    MILP's objective, than staying put: when the solver finds nothing better in time, or the constraints
    cannot be met, the current placement comes back and info["status"] says why.
    """
    loads = np.asarray(loads_per_group, dtype=float)
    current = np.asarray(current_assignment, dtype=np.int64)
    in_n = np.asarray(nodes_active, dtype=bool)
    kill = np.asarray(kill_mask, dtype=bool)
    groups, n = loads.size, in_n.size
    if loads.ndim != 1 or current.shape != loads.shape:
        raise ValueError("loads_per_group and current_assignment must be one-dimensional and of the same length")
    if kill.shape != in_n.shape or in_n.ndim != 1:
        raise ValueError("kill_mask and nodes_active must have one entry per node")
    if np.any(loads < 0) or not np.all(np.isfinite(loads)):
        raise ValueError("key group loads must be finite and non-negative")
    if np.any(kill & ~in_n):
        raise ValueError("a node marked for removal must be one of the active nodes")
    a_mask = in_n & ~kill
    if not a_mask.any():
        raise ValueError("at least one node must stay (not marked for removal)")
    if not budget >= 0:
        raise ValueError(f"the migration budget must be >= 0 (got {budget})")
    mc = np.ones(groups) if migration_cost is None else np.asarray(migration_cost, dtype=float)
    if mc.shape != loads.shape or np.any(mc < 0) or not np.all(np.isfinite(mc)):
        raise ValueError("migration_cost must give a finite non-negative cost per key group")
    speed = np.ones(n) if node_speed is None else np.asarray(node_speed, dtype=float)
    if speed.shape != (n,) or np.any(~(speed[in_n] > 0)):
        raise ValueError("node_speed must give a positive capacity weight per active node")

    started = time.perf_counter()
    node_ids = np.flatnonzero(in_n)
    m = node_ids.size
    work = loads if loads.sum() > 0 else np.ones(groups)  # nothing measured: balance the number of key groups
    mean = work.sum() / speed[a_mask].sum()
    placed = np.isin(current, node_ids)
    local = np.full(groups, -1)
    local[placed] = np.searchsorted(node_ids, current[placed])  # index into node_ids, -1 when not placed

    unit = _units(groups, together)
    units = int(unit.max()) + 1 if groups else 0
    # scaled so that mean = 1: d, d_u and d_l read as fractions of the mean load
    unit_load = np.bincount(unit, weights=work / mean, minlength=units)
    unit_mc = np.bincount(unit[placed], weights=mc[placed], minlength=units)  # unplaced members move for free
    members_on = np.zeros((units, m))
    np.add.at(members_on, (unit[placed], local[placed]), 1.0)
    stay = np.zeros((units, m))
    np.add.at(stay, (unit[placed], local[placed]), mc[placed])
    cost = unit_mc[:, None] - stay  # moving unit u to node j moves the state of its members elsewhere now
    cost[np.abs(cost) < 1e-12] = 0.0
    size = np.bincount(unit, minlength=units)
    home = np.where(members_on.max(axis=1) == size, members_on.argmax(axis=1), -1)  # node holding all of u

    allowed = np.ones((units, m), dtype=bool)
    kill_local = kill[node_ids]
    # Lemma 1: nothing moves into B; a unit stays on a node of B only if all of it is there already
    allowed[:, kill_local] = members_on[:, kill_local] == size[:, None]
    for k, node in (pinned or {}).items():
        if not 0 <= k < groups:
            raise ValueError(f"pinned key group {k} is outside [0, {groups})")
        if not (0 <= node < n and in_n[node]):
            raise ValueError(f"key group {k} is pinned to node {node}, which is not active")
        allowed[unit[k]] &= node_ids == node
    frozen = _movable(unit_load, home, size, kill_local, m, max_variables, pinned_units={unit[k] for k in pinned or {}})
    allowed[frozen] = False
    allowed[frozen, home[frozen]] = True

    speed_local = speed[node_ids]
    rel = work / mean
    util_now = np.bincount(local[placed], weights=rel[placed], minlength=m) / speed_local
    on_b_now = np.count_nonzero(kill_local[local[placed]])
    before = _objective(util_now, on_b_now, kill_local, w1, w2)
    info: dict = {
        "groups": groups,
        "units": units,
        "nodes": m,
        "movable_units": int(units - frozen.sum()),
        "mean": float(loads.sum() / speed[a_mask].sum()),
        "load_distance_before": load_distance(node_loads(loads, current, n), a_mask, speed),
    }
    c, constraints, integrality, bounds = _program(
        unit_load, size, speed_local, kill_local, cost, allowed, budget, w1, w2, float(mc.mean()) if groups else 1.0
    )
    with warnings.catch_warnings():
        # scipy hands HiGHS options it does not list (the absolute gap) over verbatim, with a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        from scipy.optimize import milp  # 0.2 to 0.7 s to import: only a run that solves pays it (load_solver)

        res = milp(
            c,
            constraints=constraints,
            integrality=integrality,
            bounds=bounds,
            options=_solver_options(time_limit, node_limit, gap),
        )
    info["solve_s"] = time.perf_counter() - started
    info["mip_gap"] = None if getattr(res, "mip_gap", None) is None else float(res.mip_gap)
    info["solver_status"] = {0: "optimal", 1: "time_limit", 2: "infeasible"}.get(res.status, "no_solution")
    if node_limit > 0 and res.status not in (0, 2) and res.x is not None:
        info["solver_status"] = "node_limit"  # scipy reports HiGHS' node limit as an unnamed status
    info["status"] = info["solver_status"]
    new = current.copy()
    if res.x is not None and groups:
        choice = res.x[: units * m].reshape(units, m).argmax(axis=1)[unit]
        util = np.bincount(choice, weights=rel, minlength=m) / speed_local
        after = _objective(util, np.count_nonzero(kill_local[choice]), kill_local, w1, w2)
        # a plan no better than staying put is not worth its migrations (a time-limited solve may return one),
        # unless staying put breaks a constraint (unplaced key groups, a unit split over nodes, a pin)
        stays_valid = placed.all() and home.min() >= 0
        stays_valid = stays_valid and all(node_ids[home[unit[k]]] == node for k, node in (pinned or {}).items())
        if not stays_valid or after < before - 1e-12:
            new = node_ids[choice]
        else:
            info["status"] = "kept"
    elif not placed.all():
        if res.status == 2:
            raise ValueError("no placement of the unplaced key groups meets the constraints")
        new = _place_greedily(rel, local, speed_local, kill_local, node_ids, current)
    moved = new != current
    info["migrations"] = int(moved.sum())
    info["migration_cost"] = float(mc[moved & placed].sum())
    info["load_distance"] = load_distance(node_loads(loads, new, n), a_mask, speed)
    return new, info


def _place_greedily(
    rel: np.ndarray,
    local: np.ndarray,
    speed: np.ndarray,
    kill_local: np.ndarray,
    node_ids: np.ndarray,
    current: np.ndarray,
) -> np.ndarray:
    """Unplaced key groups, largest first, each on the then least loaded node of A (when the solver found nothing)."""
    placed = local >= 0
    util = np.bincount(local[placed], weights=rel[placed], minlength=speed.size) / speed
    util[kill_local] = np.inf
    new = current.copy()
    for k in np.flatnonzero(~placed)[np.argsort(-rel[~placed], kind="stable")]:
        j = int(np.argmin(util))
        new[k] = node_ids[j]
        util[j] += rel[k] / speed[j]
    return new


def _movable(
    unit_load: np.ndarray,
    home: np.ndarray,
    size: np.ndarray,
    kill_local: np.ndarray,
    m: int,
    max_variables: int,
    pinned_units: set,
) -> np.ndarray:
    """Units that must stay where they are, so that at most about `max_variables` placement variables remain.

    Large instances leave the solver no time to do better than a heuristic (its LP bound is weak), so only a
    spread of key groups per node may move: per node of A, the ones at evenly spaced ranks of load (largest
    and smallest included), which keeps the sizes to choose from. Units on B, unplaced, split or pinned units
    always may move.
    """
    frozen = np.zeros(home.size, dtype=bool)
    if home.size * m <= max_variables:
        return frozen
    keep = max(2, max_variables // (m * m))
    for j in np.flatnonzero(~kill_local):
        mine = np.flatnonzero(home == j)  # collocated units too: ALBIC's hundreds of pairs would all be free
        mine = np.array([u for u in mine if u not in pinned_units], dtype=np.int64)
        if mine.size <= keep:
            continue
        ranked = mine[np.argsort(unit_load[mine], kind="stable")]
        spread = np.zeros(ranked.size, dtype=bool)
        spread[np.round(np.linspace(0, ranked.size - 1, keep)).astype(np.int64)] = True
        frozen[ranked[~spread]] = True
    return frozen


def _objective(util: np.ndarray, on_b: int, kill_local: np.ndarray, w1: float, w2: float) -> float:
    """The MILP's objective (without the tie-break) at node utilizations `util` (mean 1) with `on_b` key groups on B."""
    over = util.max() - 1.0
    under = 1.0 - util[~kill_local].min()
    d = max(over, under, 0.0)
    return w1 * d - w2 * ((d - over) + (d - under)) + W_B * util[kill_local].sum() + W_B_GROUP * on_b


def _program(
    unit_load: np.ndarray,
    size: np.ndarray,
    speed: np.ndarray,
    kill_local: np.ndarray,
    cost: np.ndarray,
    allowed: np.ndarray,
    budget: float,
    w1: float,
    w2: float,
    avg_mc: float,
) -> tuple:
    """Objective, constraints, integrality and bounds of the MILP over y[u, j] (row-major), d, d_u, d_l.

    Besides w1 d - w2 (d_u + d_l), the objective charges what stays on B (W_B per unit of load, W_B_GROUP per
    key group), the paper's second aim: with whole key groups, d alone may stop caring about the last ones.
    """
    units, m = allowed.shape
    nv = units * m
    u_idx, j_idx = np.divmod(np.arange(nv), m)
    load = unit_load[u_idx] / speed[j_idx]
    D, DU, DL = nv, nv + 1, nv + 2
    c = np.zeros(nv + 3)
    c[:nv] = TIE_BREAK * cost.ravel() / (avg_mc if avg_mc > 0 else 1.0)
    on_b = kill_local[j_idx]
    c[:nv][on_b] += W_B * load[on_b] + W_B_GROUP * size[u_idx[on_b]]
    c[nv:] = (w1, -w2, -w2)
    a_local = np.flatnonzero(~kill_local)
    a_pos = np.full(m, -1)
    a_pos[a_local] = np.arange(a_local.size)
    in_a = a_pos[j_idx] >= 0
    every = np.arange(nv)
    na = a_local.size
    # row blocks: (1) one node per unit, (2) migration budget, (3) upper bound on N, (4) lower bound on A,
    # then d_u <= d and d_l <= d
    r_budget, r_upper, r_lower, r_tight = units, units + 1, units + 1 + m, units + 1 + m + na
    rows = [u_idx, np.full(nv, r_budget), r_upper + j_idx, r_upper + np.arange(m), r_upper + np.arange(m)]
    cols = [every, every, every, np.full(m, D), np.full(m, DU)]
    vals = [np.ones(nv), cost.ravel(), load, -np.ones(m), np.ones(m)]
    rows += [r_lower + a_pos[j_idx[in_a]], r_lower + np.arange(na), r_lower + np.arange(na)]
    cols += [every[in_a], np.full(na, D), np.full(na, DL)]
    vals += [load[in_a], np.ones(na), -np.ones(na)]
    rows += [np.array([r_tight, r_tight, r_tight + 1, r_tight + 1])]
    cols += [np.array([DU, D, DL, D])]
    vals += [np.array([1.0, -1.0, 1.0, -1.0])]
    n_rows = r_tight + 2
    lo = np.concatenate([np.ones(units), [-np.inf], np.full(m, -np.inf), np.ones(na), [-np.inf, -np.inf]])
    hi = np.concatenate([np.ones(units), [float(budget)], np.ones(m), np.full(na, np.inf), [0.0, 0.0]])
    from scipy.optimize import Bounds, LinearConstraint
    from scipy.sparse import coo_array

    matrix = coo_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_rows, nv + 3)
    ).tocsr()
    upper = np.concatenate([allowed.ravel().astype(float), np.full(3, np.inf)])
    integrality = np.concatenate([np.ones(nv), np.zeros(3)])
    return c, LinearConstraint(matrix, lo, hi), integrality, Bounds(np.zeros(nv + 3), upper)
