"""Flux's rebalancing (Shah et al. 2003): the solver-free baseline that ALBIC's allocation MILP is compared with.

Nodes are paired from both ends of the load order, and each pair hands over one key group at a time, within a
budget of migrations. `milp` holds the MILP and the load distance both plans are judged by.
"""

from __future__ import annotations

import numpy as np


def flux(
    loads_per_group: np.ndarray, current_assignment: np.ndarray, node_loads: np.ndarray, max_migrations: int
) -> np.ndarray:
    """Flux's rebalancing: pair the most with the least loaded node, the 2nd with the 2nd-last, and so on.

    Each pair moves the largest suitable key group from its more to its less loaded node, suitable meaning it
    is smaller than the pair's load gap, so the move lowers the load variance. Passes repeat on the
    updated loads while the budget of `max_migrations` lasts and a pass still moves something.
    """
    loads = np.asarray(loads_per_group, dtype=float)
    assignment = np.array(current_assignment, dtype=np.int64, copy=True)
    node = np.array(node_loads, dtype=float, copy=True)
    if loads.shape != assignment.shape or loads.ndim != 1:
        raise ValueError("loads_per_group and current_assignment must be one-dimensional and of the same length")
    if max_migrations < 0:
        raise ValueError(f"max_migrations must be >= 0 (got {max_migrations})")
    n = node.size
    moved = 0
    while moved < max_migrations:
        order = np.argsort(-node, kind="stable")
        progress = False
        for p in range(n // 2):
            if moved >= max_migrations:
                break
            donor, receiver = order[p], order[n - 1 - p]
            gap = node[donor] - node[receiver]
            if gap <= 0:
                break
            mine = np.flatnonzero((assignment == donor) & (loads < gap) & (loads > 0))
            if mine.size == 0:
                continue
            k = mine[np.argmax(loads[mine])]
            assignment[k] = receiver
            node[donor] -= loads[k]
            node[receiver] += loads[k]
            moved += 1
            progress = True
        if not progress:
            break
    return assignment
