"""A FIFO worker's largest queue in one pass over its sorted enqueue and finish times, compiled: at 10M tuples
two binary searches per tuple took most of a run's summary. Loaded only when a summary is made."""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def queue_max(enqueue, finish):
    """Max over the enqueue times t of (tuples enqueued by t) - (tuples finished by t), both sorted."""
    best = 0
    done = 0
    n = enqueue.size
    for i in range(n):
        t = enqueue[i]
        if i + 1 < n and enqueue[i + 1] == t:
            continue  # the tuples enqueued at the same instant count together, at the last of them
        while done < finish.size and finish[done] <= t:
            done += 1
        best = max(best, i + 1 - done)
    return best
