"""Routing kernels: each strategy is one candidate set x one selector, or a head/tail split of two such pairs.

    kg    one hash       x least loaded       porc  salted rehash x first with spare capacity
    sg    all workers    x round robin        chbl  ring walk     x first with spare capacity
    pkg   two hashes     x least loaded       dc    head: d hashes (all workers once d = n) x least loaded
                                                    (d from FindOptimalChoices, or fixed: catalog.greedy_d)
    potc  random pair    x least loaded       wc    head: all workers x least loaded
                                              rr    head: all workers x round robin
    (dc, wc, rr: tail keys use two hashes x least loaded, i.e. PKG)
    (pkg with choices=d: d hashes; with distinct=true: Storm's distinct hashes x least loaded)

Each kernel routes a batch in order, updating the instance's state in place, so a batch gives exactly what
routing its keys one at a time would. The number of workers is the size of the state's load array, so after
a resize the same kernels route over the new count. They are written out one per strategy (not built by a factory) so
numba can cache them on disk (numba checks only this file for changes: edit it too when a selector or a
candidate set changes); a new strategy is a new three-line kernel, a row in the registry, and its number in
`route_with` (how the simulator's compiled loop calls it).
"""

from __future__ import annotations

from ..jit import hot
from .candidates import (
    all_workers,
    d_hashes,
    distinct_hashes,
    hash_family,
    one_hash,
    picked,
    random_pair,
    ring_successor,
    ring_walk,
    rotated,
    salted_rehash,
    two_hashes,
)
from .head import in_head, refresh_choices
from .selectors import first_with_spare, least_loaded, round_robin
from .state import DISTINCT, D


@hot
def route_kg(keys, out, st):
    """Key grouping: F_1(key)."""
    for j in range(keys.size):
        out[j] = least_loaded(one_hash, hash_family, keys[j], st)


@hot
def route_sg(keys, out, st):
    """Shuffle grouping: round robin over all workers."""
    for j in range(keys.size):
        out[j] = round_robin(all_workers, rotated, keys[j], st)


@hot
def route_pkg(keys, out, st):
    """Partial key grouping: the less loaded of F_1(key), F_2(key), or of d choices, or of Storm's distinct ones."""
    if st.counters[DISTINCT]:
        for j in range(keys.size):
            out[j] = least_loaded(distinct_hashes, picked, keys[j], st)
    elif st.counters[D] == 2:  # the paper's two choices, which may coincide
        for j in range(keys.size):
            out[j] = least_loaded(two_hashes, hash_family, keys[j], st)
    else:
        for j in range(keys.size):
            out[j] = least_loaded(d_hashes, hash_family, keys[j], st)


@hot
def route_potc(keys, out, st):
    """Power of two choices: the less loaded of two bins drawn at random per message."""
    for j in range(keys.size):
        out[j] = least_loaded(random_pair, hash_family, keys[j], st)


@hot
def route_porc(keys, out, st):
    """Power of random choices: the first of H_1(key), H_2(key), ... with spare capacity."""
    for j in range(keys.size):
        out[j] = first_with_spare(salted_rehash, hash_family, keys[j], st)


@hot
def route_chbl(keys, out, st):
    """Consistent hashing with bounded loads: the first bin clockwise on the ring with spare capacity."""
    for j in range(keys.size):
        out[j] = first_with_spare(ring_walk, ring_successor, keys[j], st)


@hot
def route_dc(keys, out, st):
    """D-Choices: head by Greedy-d over F_1..F_d (all workers once d reaches n), tail by PKG; d from
    FindOptimalChoices, or fixed (the state's FIXED_D)."""
    n = st.loads.size
    for j in range(keys.size):
        key = keys[j]
        if not in_head(key, st):
            out[j] = least_loaded(two_hashes, hash_family, key, st)
        elif st.counters[D] >= n:
            out[j] = least_loaded(all_workers, rotated, key, st)
        else:
            out[j] = least_loaded(d_hashes, hash_family, key, st)
        refresh_choices(st)


@hot
def route_wc(keys, out, st):
    """W-Choices: head to the least loaded of all workers, tail by PKG."""
    for j in range(keys.size):
        key = keys[j]
        if in_head(key, st):
            out[j] = least_loaded(all_workers, rotated, key, st)
        else:
            out[j] = least_loaded(two_hashes, hash_family, key, st)


@hot
def route_rr(keys, out, st):
    """Round-Robin head: head in turn over all workers ignoring load, tail by PKG."""
    for j in range(keys.size):
        key = keys[j]
        if in_head(key, st):
            out[j] = round_robin(all_workers, rotated, key, st)
        else:
            out[j] = least_loaded(two_hashes, hash_family, key, st)


# every kernel by number, for compiled callers: numba cannot cache a function that takes a kernel as an argument
KERNELS = (route_kg, route_sg, route_pkg, route_potc, route_porc, route_chbl, route_dc, route_wc, route_rr)


@hot
def route_with(kernel, keys, out, st):
    """Route with KERNELS[kernel]."""
    if kernel == 0:
        route_kg(keys, out, st)
    elif kernel == 1:
        route_sg(keys, out, st)
    elif kernel == 2:
        route_pkg(keys, out, st)
    elif kernel == 3:
        route_potc(keys, out, st)
    elif kernel == 4:
        route_porc(keys, out, st)
    elif kernel == 5:
        route_chbl(keys, out, st)
    elif kernel == 6:
        route_dc(keys, out, st)
    elif kernel == 7:
        route_wc(keys, out, st)
    elif kernel == 8:
        route_rr(keys, out, st)
