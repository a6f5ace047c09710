"""What a run's summary asks of the per-tuple log in compiled passes: each worker's tuples together, and a FIFO
worker's largest queue. At 10M tuples a sort and gathers, and two binary searches per tuple, took most of the
summary's time. Loaded only when a summary is made."""

from __future__ import annotations

import numpy as np
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


@njit(cache=True)
def split_by_worker(worker, workers, enqueue, start, finish):
    """Each worker's tuples together, in log order within a worker (a stable counting sort): the three columns
    rearranged, and the workers' bounds in them."""
    bounds = np.zeros(workers + 1, np.int64)
    for i in range(worker.size):
        bounds[worker[i] + 1] += 1
    for w in range(workers):
        bounds[w + 1] += bounds[w]
    cursor = bounds[:-1].copy()
    out = (np.empty(worker.size), np.empty(worker.size), np.empty(worker.size))
    for i in range(worker.size):
        at = cursor[worker[i]]
        cursor[worker[i]] = at + 1
        out[0][at], out[1][at], out[2][at] = enqueue[i], start[i], finish[i]
    return out[0], out[1], out[2], bounds
