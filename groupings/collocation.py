"""ALBIC's collocation heuristic around the allocation MILP (Madsen et al. 2016, Section 4.3.2, Algorithm 2).

Over one stream edge between an upstream and a downstream operator, with out[k, j] the tuples key group k of
the upstream operator sent to key group j of the downstream one during the period:

1. Score: a pair (k, j) is worth collocating when out[k, j] > avg_k * sF, avg_k = sum_j out[k, j] / #j.
2. Maintain: pairs already collocated are merged into sets; a set heavier than maxPL (load) or maxMigrCost
   (state) is split by balanced graph partitioning, cutting as little traffic as possible; each part then
   migrates as a unit.
3. Improve: the one pair not yet collocated with the most traffic is made a unit on the less loaded of its
   two nodes (or on the node of the part one of them already belongs to).
4. Solve the MILP with those units; while the load distance exceeds maxLD, retry with maxPL - stepPL
   (maxPL = 0 is the plain MILP).

Key groups are numbered as one set of vertices: the upstream operator's 0..U-1, then the downstream's U..U+D-1.
A longer chain of operators (S1 -> S2 -> S3 ...) is given as the list of its edges' matrices, [out_12, out_23,
...], and numbered stage after stage in the same way; a pair then joins key groups of consecutive stages.
Balanced partitioning is recursive spectral bisection (the Fiedler vector of the traffic graph's Laplacian,
cut where the vertex weight splits in the wanted ratio), which needs nothing beyond numpy; the disconnected
pieces of a graph are kept whole where the weights allow. `cola` is the baseline the paper compares ALBIC
with: the whole placement re-optimised from scratch by balanced graph partitioning, with no migration budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components

from .milp import MAX_VARIABLES, allocate, load_distance, node_loads

MAX_LD = 10.0  # maximum load distance, in the loads' units (the paper: percentage points of a node)
MAX_PL = 25.0  # initial maximum load of one part
STEP_PL = 5.0  # decrease of maxPL per retry
SCORE_FACTOR = 1.5  # sF


@dataclass
class CollocationPlan:
    """Constraints ALBIC adds to the MILP: parts that migrate as units, and the pair it collocates now."""

    units: list[np.ndarray] = field(default_factory=list)  # vertex sets that must end on one node
    pinned: dict[int, int] = field(default_factory=dict)  # vertex -> node its unit must end on
    pair: tuple[int, int] | None = None  # (upstream vertex, downstream vertex) being collocated, if any


Traffic = np.ndarray | Sequence[np.ndarray]  # one edge's out[k, j], or the edges of a chain of operators


def directed_traffic(out: Traffic) -> tuple[np.ndarray, np.ndarray]:
    """T[a, b], the tuples vertex a sent to vertex b, and the number of key groups of each vertex's downstream
    operator (0 for the last stage), for one edge or a chain of edges."""
    edges = [_matrix(out)] if isinstance(out, np.ndarray) else [_matrix(e) for e in out]
    if not edges:
        raise ValueError("a chain needs at least one edge")
    sizes = [edges[0].shape[0]] + [e.shape[1] for e in edges]
    if any(e.shape[0] != sizes[i] for i, e in enumerate(edges)):
        raise ValueError("each edge's upstream key groups must be the previous edge's downstream key groups")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    directed = np.zeros((starts[-1], starts[-1]))
    fanout = np.zeros(starts[-1])
    for i, e in enumerate(edges):
        directed[starts[i] : starts[i + 1], starts[i + 1] : starts[i + 2]] = e
        fanout[starts[i] : starts[i + 1]] = sizes[i + 1]
    return directed, fanout


def traffic_graph(out: Traffic) -> np.ndarray:
    """Symmetric vertex-by-vertex traffic of an upstream x downstream communication matrix (or of a chain)."""
    directed, _ = directed_traffic(out)
    return directed + directed.T


def score_pairs(out: Traffic, score_factor: float = SCORE_FACTOR) -> np.ndarray:
    """Pairs (upstream vertex, downstream vertex), as a (P, 2) array, with out[k, j] > avg_k * sF."""
    directed, fanout = directed_traffic(out)
    avg = directed.sum(axis=1, keepdims=True) / np.maximum(fanout, 1)[:, None]
    k, j = np.nonzero((directed > avg * score_factor) & (directed > 0))
    return np.column_stack([k, j]).astype(np.int64)


def collocation_factor(out: Traffic, assignment: np.ndarray) -> float:
    """Share of the edge's (or chain's) traffic whose two key groups sit on the same node (1.0 when there is none)."""
    directed, _ = directed_traffic(out)
    assignment = np.asarray(assignment)
    total = directed.sum()
    if total <= 0:
        return 1.0
    same = assignment[:, None] == assignment[None, :]
    return float(directed[same].sum() / total)


def balanced_partition(graph: np.ndarray, weights: np.ndarray, parts: int) -> np.ndarray:
    """Label in [0, parts) of each vertex: parts of about equal weight with little edge weight cut between them."""
    graph = np.asarray(graph, dtype=float)
    weights = np.asarray(weights, dtype=float)
    n = weights.size
    if graph.shape != (n, n) or not np.allclose(graph, graph.T):
        raise ValueError("graph must be a symmetric square matrix with one row per vertex")
    if parts < 1 or parts > max(n, 1):
        raise ValueError(f"cannot split {n} vertices into {parts} parts")
    labels = np.zeros(n, dtype=np.int64)
    _bisect(graph, weights, np.arange(n), parts, 0, labels)
    return labels


def _bisect(graph: np.ndarray, weights: np.ndarray, members: np.ndarray, parts: int, first: int, labels: np.ndarray):
    """Label `members` first..first+parts-1 by recursive spectral bisection in the ratio of the part counts."""
    if parts == 1:
        labels[members] = first
        return
    left_parts = parts // 2
    order = _fiedler_order(graph[np.ix_(members, members)])
    w = weights[members][order]
    total = w.sum()
    share = left_parts / parts
    cumulative = np.cumsum(w) if total > 0 else np.arange(1, members.size + 1, dtype=float)
    target = share * (total if total > 0 else members.size)
    # the cut: at least left_parts vertices on the left and parts - left_parts on the right
    cut = int(np.argmin(np.abs(cumulative - target))) + 1
    cut = min(max(cut, left_parts), members.size - (parts - left_parts))
    _bisect(graph, weights, members[order[:cut]], left_parts, first, labels)
    _bisect(graph, weights, members[order[cut:]], parts - left_parts, first + left_parts, labels)


def _fiedler_order(graph: np.ndarray) -> np.ndarray:
    """Vertices sorted by the Fiedler vector (second eigenvector) of the graph Laplacian; a disconnected graph's
    pieces one after the other (its Fiedler vector would be any mix of them), each in its own Fiedler order."""
    n = graph.shape[0]
    if n <= 2:
        return np.arange(n)
    pieces, label = connected_components(graph != 0, directed=False)
    if pieces > 1:
        order = []
        for piece in range(pieces):
            members = np.flatnonzero(label == piece)
            order.append(members[_fiedler_order(graph[np.ix_(members, members)])])
        return np.concatenate(order)
    fiedler = _fiedler_vector(np.diag(graph.sum(axis=1)) - graph)
    # ranks from values rounded well above the BLAS kernels' last bits, ties by vertex number
    return np.lexsort((np.arange(n), np.round(fiedler / np.abs(fiedler).max(), 9)))


EIGENSPACE_TOL = 1e-7  # eigenvalues this close (relative to the largest) span one Fiedler eigenspace
_REFERENCE_SEED = 20160901  # the fixed direction projected onto that eigenspace (any seed would do; one for all)


def _fiedler_vector(laplacian: np.ndarray) -> np.ndarray:
    """A Fiedler vector that depends on the Laplacian alone, not on the LAPACK kernel that computed it.

    Where the second eigenvalue is repeated (one-to-one pairs give such graphs), any vector of its eigenspace is a
    Fiedler vector, and the basis LAPACK returns differs between OpenBLAS kernels, that is between machines (ARPACK's
    hidden random state differed even between calls). The projection of one fixed direction onto the whole
    eigenspace does not depend on its basis, nor on the eigenvectors' signs.
    """
    values, vectors = np.linalg.eigh(laplacian)
    n = values.size
    tol = EIGENSPACE_TOL * max(abs(values[-1]), 1.0)
    space = vectors[:, 1 : 1 + int(np.count_nonzero(values[1:] - values[1] <= tol))]
    reference = np.random.default_rng(_REFERENCE_SEED).standard_normal(n)
    fiedler = space @ (space.T @ reference)
    if not np.abs(fiedler).max() > 1e-9 * np.linalg.norm(reference):  # the direction missed the space: basis order
        fiedler = space[:, 0] * np.sign(space[np.argmax(np.abs(space[:, 0])), 0])
    return fiedler


def plan_collocation(
    out: Traffic,
    assignment: np.ndarray,
    loads: np.ndarray,
    migration_cost: np.ndarray,
    max_migr_cost: float,
    max_pl: float,
    *,
    kill_mask: np.ndarray | None = None,
    node_speed: np.ndarray | None = None,
    score_factor: float = SCORE_FACTOR,
    rng: np.random.Generator | None = None,
) -> CollocationPlan:
    """Steps 1-3 of ALBIC: score pairs, split collocated sets into parts within maxPL and maxMigrCost, add one pair."""
    graph = traffic_graph(out)
    vertices = graph.shape[0]
    assignment = np.asarray(assignment, dtype=np.int64)
    loads = np.asarray(loads, dtype=float)
    mc = np.asarray(migration_cost, dtype=float)
    if not (assignment.shape == loads.shape == mc.shape == (vertices,)):
        raise ValueError(f"assignment, loads and migration_cost need one entry per key group ({vertices})")
    rng = rng if rng is not None else np.random.default_rng(0)
    plan = CollocationPlan()
    if max_pl <= 0:
        return plan  # one key group per part: the plain MILP
    pairs = score_pairs(out, score_factor)
    together = assignment[pairs[:, 0]] == assignment[pairs[:, 1]] if pairs.size else np.zeros(0, dtype=bool)

    # step 2: collocated pairs -> sets -> parts
    part_of = np.full(vertices, -1)
    if together.any():
        linked = pairs[together]
        adjacency = coo_array((np.ones(len(linked)), (linked[:, 0], linked[:, 1])), shape=(vertices, vertices))
        _, component = connected_components(adjacency, directed=False)
        in_pair = np.zeros(vertices, dtype=bool)
        in_pair[linked.ravel()] = True
        for label in np.unique(component[in_pair]):
            members = np.flatnonzero((component == label) & in_pair)
            for part in _split(graph, members, loads, mc, max_migr_cost, max_pl, rng):
                if part.size > 1:
                    part_of[part] = len(plan.units)
                    plan.units.append(part)

    # step 3: the uncollocated pair with the most traffic (ties at random) joins one node
    apart = pairs[~together] if pairs.size else pairs
    if apart.size == 0:
        return plan
    traffic = graph[apart[:, 0], apart[:, 1]]
    best = np.flatnonzero(traffic == traffic.max())
    gi, gj = (int(v) for v in apart[rng.choice(best)])
    nodes = int(assignment.max()) + 1
    kill = np.zeros(nodes, dtype=bool) if kill_mask is None else np.asarray(kill_mask, dtype=bool)
    per_node = node_loads(loads, assignment, kill.size, node_speed)
    n1, n2 = int(assignment[gi]), int(assignment[gj])
    if part_of[gi] >= 0 and part_of[gj] < 0:
        candidates = [n1]
    elif part_of[gj] >= 0 and part_of[gi] < 0:
        candidates = [n2]
    else:
        candidates = sorted((n1, n2), key=lambda node: (per_node[node], node))
    candidates = [node for node in candidates if not kill[node]]  # Lemma 1: never into a node being removed
    if not candidates:
        return plan
    target = candidates[0]
    unit_i = plan.units[part_of[gi]] if part_of[gi] >= 0 else np.array([gi])
    unit_j = plan.units[part_of[gj]] if part_of[gj] >= 0 else np.array([gj])
    merged = np.union1d(unit_i, unit_j)
    if mc[merged][assignment[merged] != target].sum() > max_migr_cost:
        return plan  # the pair cannot move together within this period's budget
    plan.units.append(merged)
    plan.pinned[gi] = target
    plan.pair = (gi, gj)
    return plan


def _split(
    graph: np.ndarray,
    members: np.ndarray,
    loads: np.ndarray,
    mc: np.ndarray,
    max_migr_cost: float,
    max_pl: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Parts of a collocated set, each within maxMigrCost and maxPL where one key group alone allows it."""
    pmc, pl = mc[members].sum(), loads[members].sum()
    if members.size <= 1 or (pmc <= max_migr_cost and pl <= max_pl):
        return [members]
    p1 = math.ceil(pmc / max_migr_cost) if max_migr_cost > 0 else members.size
    p2 = math.ceil(pl / max_pl)
    parts = min(max(p1, p2, 2), members.size)
    by_cost, by_load = pmc / max_migr_cost if max_migr_cost > 0 else math.inf, pl / max_pl
    use_cost = by_cost > by_load or (by_cost == by_load and rng.random() < 0.5)
    weights = (mc if use_cost else loads)[members]
    labels = balanced_partition(graph[np.ix_(members, members)], weights, parts)
    result: list[np.ndarray] = []
    for label in range(parts):
        result += _split(graph, members[labels == label], loads, mc, max_migr_cost, max_pl, rng)
    return result


def albic(
    out: Traffic,
    assignment: np.ndarray,
    loads: np.ndarray,
    migration_cost: np.ndarray | None,
    max_migr_cost: float,
    nodes_active: np.ndarray,
    kill_mask: np.ndarray,
    *,
    max_ld: float = MAX_LD,
    max_pl: float = MAX_PL,
    step_pl: float = STEP_PL,
    score_factor: float = SCORE_FACTOR,
    node_speed: np.ndarray | None = None,
    time_limit: float = 1.0,
    node_limit: int = 0,
    max_variables: int = MAX_VARIABLES,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, dict]:
    """One ALBIC invocation (Algorithm 2): the new node of every key group of the edge, and what was decided.

    Loads, max_ld, max_pl and step_pl share one unit (the paper: percentage points of a node's capacity)."""
    assignment = np.asarray(assignment, dtype=np.int64)
    loads = np.asarray(loads, dtype=float)
    mc = np.ones(loads.size) if migration_cost is None else np.asarray(migration_cost, dtype=float)
    if step_pl <= 0:
        raise ValueError(f"stepPL must be > 0 (got {step_pl})")
    rng = rng if rng is not None else np.random.default_rng(0)
    pl, tries = float(max_pl), 0
    while True:
        plan = plan_collocation(
            out,
            assignment,
            loads,
            mc,
            max_migr_cost,
            pl,
            kill_mask=kill_mask,
            node_speed=node_speed,
            score_factor=score_factor,
            rng=rng,
        )
        new, info = allocate(
            loads,
            assignment,
            nodes_active,
            kill_mask,
            mc,
            max_migr_cost,
            node_speed=node_speed,
            together=plan.units,
            pinned=plan.pinned,
            time_limit=time_limit,
            node_limit=node_limit,
            max_variables=max_variables,
        )
        tries += 1
        if pl <= 0 or info["load_distance"] <= max_ld:
            break
        pl = max(pl - step_pl, 0.0)
    info.update(
        max_pl=pl,
        tries=tries,
        parts=len(plan.units) - (plan.pair is not None),
        pair=plan.pair,
        collocation_before=collocation_factor(out, assignment),
        collocation=collocation_factor(out, new),
    )
    return new, info


def cola(
    out: Traffic,
    assignment: np.ndarray,
    loads: np.ndarray,
    nodes_active: np.ndarray,
    kill_mask: np.ndarray,
) -> tuple[np.ndarray, dict]:
    """COLA's plan from scratch: one part per node of A by balanced graph partitioning (parts of about equal load,
    little traffic cut between them), each part on the node of A that holds most of its key groups now.

    No migration budget: the matching only keeps the moves from being needlessly many."""
    from scipy.optimize import linear_sum_assignment  # scipy.optimize is slow to import: only COLA's users pay

    graph = traffic_graph(out)
    assignment = np.asarray(assignment, dtype=np.int64)
    loads = np.asarray(loads, dtype=float)
    if not (assignment.shape == loads.shape == (graph.shape[0],)):
        raise ValueError(f"assignment and loads need one entry per key group ({graph.shape[0]})")
    in_a = np.asarray(nodes_active, dtype=bool) & ~np.asarray(kill_mask, dtype=bool)
    targets = np.flatnonzero(in_a)
    labels = balanced_partition(graph, loads, targets.size)
    overlap = np.zeros((targets.size, targets.size))
    on_a = np.isin(assignment, targets)
    np.add.at(overlap, (labels[on_a], np.searchsorted(targets, assignment[on_a])), 1.0)
    parts, nodes = linear_sum_assignment(overlap, maximize=True)
    node_of_part = np.empty(targets.size, dtype=np.int64)
    node_of_part[parts] = targets[nodes]
    new = node_of_part[labels]
    per_node = node_loads(loads, new, in_a.size)
    info = {
        "migrations": int(np.count_nonzero(new != assignment)),
        "load_distance": load_distance(per_node, in_a),
        "collocation": collocation_factor(out, new),
    }
    return new, info


def _matrix(out: np.ndarray) -> np.ndarray:
    """The communication matrix as floats, checked."""
    out = np.asarray(out, dtype=float)
    if out.ndim != 2 or np.any(out < 0) or not np.all(np.isfinite(out)):
        raise ValueError("out must be a two-dimensional matrix of non-negative traffic")
    return out
