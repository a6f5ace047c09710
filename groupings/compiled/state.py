"""The routing state one source instance owns: plain numpy arrays, so compiled kernels can update it in place.

Every grouping uses the same `State` layout (fields it does not need are empty arrays): one numba type means
the candidate sets and selectors compile once per kernel and compose freely. The number of bins is
`loads.size`; a resize swaps in arrays of the new size (same types, so nothing recompiles).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..keytable import new_table
from ..ring import build_ring, ring_directory

# slots of State.counters (int64)
MESSAGES = 0  # messages routed so far by this instance (m)
RR_NEXT = 1  # next position of the round-robin pointer
OFFSET = 2  # per-source rotation of the all-workers candidate order (spreads ties across sources)
PROBES = 3  # probes past the principal choice (PoRC, CH with bounded loads)
FALLBACKS = 4  # messages that exhausted their probe budget and took the least-loaded bin instead
D = 5  # current number of choices for the head (D-Choices); n means W-Choices
HEAD_SIZE = 6  # |H| at the last recomputation of d
HEAD_MESSAGES = 7  # messages whose key was in the head when routed
NEXT_REFRESH = 8  # message count at which d is recomputed next
REFRESH = 9  # longest interval between two recomputations of d
REFRESHES = 10  # how many times d was recomputed
MAX_PROBES = 11  # probe budget of salted rehashing before the fallback
DISTINCT = 12  # 1: a key's hash choices are forced apart, as Storm's PartialKeyGrouping does (pkg)
FIXED_D = 13  # D-Choices with a fixed d for the head (Greedy-d); 0: d from FindOptimalChoices
N_COUNTERS = 14

# slots of State.params (float64)
EPS = 0  # capacity slack (PoRC, CH) or imbalance target (D-Choices)
THETA = 1  # head threshold on estimated frequency
LOAD_SHIFT = 2  # sum of the load estimates minus MESSAGES (non-zero only after a resize)
N_PARAMS = 3


class Summary(NamedTuple):
    """SpaceSaving counters kept sorted by count, in blocks of equal count, found through a hash table."""

    keys: np.ndarray  # uint64[k]: monitored key of each counter slot
    counts: np.ndarray  # int64[k]: estimated count (never below the true count); 0 = slot unused
    errors: np.ndarray  # int64[k]: overestimation bound inherited at takeover
    order: np.ndarray  # int32[k]: slots by ascending count
    pos: np.ndarray  # int32[k]: position of each slot in `order`
    block: np.ndarray  # int32[k]: block (run of equal counts in `order`) of each slot
    block_start: np.ndarray  # int32[k]: first position of each block
    block_end: np.ndarray  # int32[k]: last position of each block
    free_blocks: np.ndarray  # int32[k]: stack of unused block ids
    table: np.ndarray  # int32[2^b >= 2k]: index key -> slot (groupings.keytable), -1 when empty
    scratch: np.ndarray  # float64[k]: room for the head's frequencies, so routing never allocates
    meta: np.ndarray  # int64[3]: [slots in use, items seen, free blocks on the stack]


class State(NamedTuple):
    """Everything a grouping instance remembers between two calls of route."""

    loads: np.ndarray  # float64[bins]: local load estimate (tuples this source sent to each bin)
    counters: np.ndarray  # int64[N_COUNTERS]
    params: np.ndarray  # float64[N_PARAMS]
    rng: np.ndarray  # uint64[1]: splitmix64 state for per-message random choices
    ring_points: np.ndarray  # uint64[R]: sorted positions of the consistent-hashing ring
    ring_owner: np.ndarray  # int32[R]: bin that owns each ring point
    ring_directory: np.ndarray  # int32[2^b]: first ring point at or after the start of each of 2^b arcs
    summary: Summary  # heavy-hitter counters (head detection); empty when unused
    picks: np.ndarray  # int64[d]: one message's candidates, for a candidate set that must see them all at once


def new_summary(capacity: int) -> Summary:
    """Empty SpaceSaving summary with `capacity` counters (0 gives an unused placeholder)."""
    if capacity < 0:
        raise ValueError(f"SpaceSaving capacity must be >= 0 (got {capacity})")
    k = capacity
    block_end = np.zeros(k, dtype=np.int32)
    if k:
        block_end[0] = k - 1  # every counter starts at count 0, all in block 0
    return Summary(
        keys=np.zeros(k, dtype=np.uint64),
        counts=np.zeros(k, dtype=np.int64),
        errors=np.zeros(k, dtype=np.int64),
        order=np.arange(k, dtype=np.int32),
        pos=np.arange(k, dtype=np.int32),
        block=np.zeros(k, dtype=np.int32),
        block_start=np.zeros(k, dtype=np.int32),
        block_end=block_end,
        free_blocks=np.arange(k - 1, -1, -1, dtype=np.int32),  # ids k-1 .. 1 free, 1 on top
        table=new_table(k),
        scratch=np.zeros(k, dtype=np.float64),
        meta=np.array([0, 0, max(k - 1, 0)], dtype=np.int64),
    )


def new_state(
    bins: int,
    *,
    rng_seed: int = 0,
    ring: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    summary_capacity: int = 0,
    picks: int = 0,
) -> State:
    """Fresh state for `bins` bins: zero loads and counters, optional ring (points, owners, directory), summary."""
    if bins < 1:
        raise ValueError(f"a grouping needs at least one bin (got {bins})")
    points, owner, directory = ring if ring is not None else (np.zeros(0, np.uint64), np.zeros(0, np.int32), None)
    return State(
        loads=np.zeros(bins, dtype=np.float64),
        counters=np.zeros(N_COUNTERS, dtype=np.int64),
        params=np.zeros(N_PARAMS, dtype=np.float64),
        rng=np.array([rng_seed], dtype=np.uint64),
        ring_points=np.ascontiguousarray(points, dtype=np.uint64),
        ring_owner=np.ascontiguousarray(owner, dtype=np.int32),
        ring_directory=np.ascontiguousarray(directory if directory is not None else np.zeros(0), dtype=np.int32),
        summary=new_summary(summary_capacity),
        picks=np.zeros(picks, dtype=np.int64),
    )


# --- fresh and resized states of the compiled strategies ------------------------------------------------------

FIRST_REFRESH = 1000  # D-Choices recomputes d after this many messages, then at doubling intervals
_MASK64 = (1 << 64) - 1


def probe_budget(bins: int) -> int:
    """Salted rehashes tried before the fallback: the odds of missing every spare bin that often are below e^-64."""
    return max(1024, 64 * bins)


def plain_state(bins: int, seed: int) -> State:
    """State of a strategy that needs only loads and counters (kg, sg, potc)."""
    st = new_state(bins, rng_seed=seed & _MASK64)
    st.counters[OFFSET] = seed % bins  # each source starts its all-workers scans somewhere else
    return st


def pkg_state(bins: int, seed: int, choices: int = 2, distinct: bool = False) -> State:
    """State of partial key grouping: `choices` hash choices per key, forced apart when `distinct` (Storm's rule)."""
    st = new_state(bins, rng_seed=seed & _MASK64, picks=choices)
    st.counters[OFFSET] = seed % bins
    st.counters[D] = choices
    st.counters[DISTINCT] = int(distinct)
    return st


def bounded_state(bins: int, seed: int, eps: float, replicas: int = 0) -> State:
    """State of a capacity-bounded strategy: PoRC, or CH with bounded loads when `replicas` > 0."""
    ring = None
    if replicas:
        points, owners = build_ring(bins, replicas)
        ring = (points, owners, ring_directory(points))
    st = new_state(bins, rng_seed=seed & _MASK64, ring=ring)
    st.counters[OFFSET] = seed % bins
    st.params[EPS] = eps
    st.counters[MAX_PROBES] = probe_budget(bins)
    return st


def head_state(
    bins: int, seed: int, theta: float, counters: int, eps: float = 0.0, refresh: int = 1, fixed_d: int = 0
) -> State:
    """State of a head/tail strategy (dc, wc, rr): a SpaceSaving summary, and d = 2 until the first estimate
    (or `fixed_d` throughout, when it is not 0)."""
    st = new_state(bins, rng_seed=seed & _MASK64, summary_capacity=counters)
    st.counters[OFFSET] = seed % bins
    st.params[THETA] = theta
    st.params[EPS] = eps
    st.counters[D] = fixed_d if fixed_d else 2
    st.counters[FIXED_D] = fixed_d
    st.counters[REFRESH] = refresh
    st.counters[NEXT_REFRESH] = min(FIRST_REFRESH, refresh)
    return st


def resized_loads(loads: np.ndarray, bins: int) -> np.ndarray:
    """Load estimates for `bins` bins: a removed bin's estimate is dropped, a new bin starts at the mean.

    Estimates count every message since the start, so a newcomer at 0 would look empty to every least-loaded
    choice and draw all traffic it is a candidate for until it caught up with the others' totals; at the
    mean (rounded down to whole messages, so capacity bounds stay exact) it joins as a peer.
    """
    old = loads.size
    if bins <= old:
        return loads[:bins].copy()
    out = np.empty(bins, dtype=np.float64)
    out[:old] = loads
    out[old:] = math.floor(math.fsum(loads) / old)
    return out


def resized_state(st: State, bins: int, seed: int, replicas: int = 0) -> State:
    """The state for `bins` bins: loads resized, per-bin quantities recomputed, the ring grown or cut.

    Candidate sets that bucket a hash over n follow the new n by themselves; the ring of CH keeps every point
    of the bins that stay, so only the keys next to an added or removed bin's points move.
    """
    loads = resized_loads(st.loads, bins)
    ring = {}
    if replicas:
        points, owners = build_ring(bins, replicas)  # bin b's points do not depend on the number of bins
        ring = {"ring_points": points, "ring_owner": owners, "ring_directory": ring_directory(points)}
    new = st._replace(loads=loads, **ring)
    new.counters[OFFSET] = seed % bins
    new.counters[MAX_PROBES] = probe_budget(bins)
    # capacities count m as the sum of the estimates, so the bound stays reachable after a resize
    new.params[LOAD_SHIFT] = math.fsum(loads) - float(new.counters[MESSAGES])
    if new.summary.keys.size:
        new.counters[NEXT_REFRESH] = new.counters[MESSAGES]  # recompute d (which depends on n) at once
    return new
