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


@njit(cache=True)
def _sort_runs(column, bounds):
    # each worker's run sorted in place, unless it already is (engines that log in service order)
    for w in range(bounds.size - 1):
        a, b = bounds[w], bounds[w + 1]
        for i in range(a + 1, b):
            if column[i] < column[i - 1]:
                column[a:b] = np.sort(column[a:b])
                break


@njit(cache=True, nogil=True)  # (a run's outputs build it while another thread judges the operator's outcome)
def timelines_of(worker, workers, enqueue, start, finish):
    """Every worker's timeline at once: its tuples together (`split_by_worker`), each of its three columns sorted,
    and its running busy time. (enqueue, start, finish, busy, bounds): worker w's tuples are [bounds[w],
    bounds[w + 1]) of the columns, and its busy seconds before its k-th tuple busy[bounds[w] + w + k], k = 0..n_w
    (one more entry per worker than it has tuples)."""
    enqueue, start, finish, bounds = split_by_worker(worker, workers, enqueue, start, finish)
    for column in (enqueue, start, finish):
        _sort_runs(column, bounds)
    busy = np.empty(worker.size + workers)
    for w in range(workers):
        a, b = bounds[w], bounds[w + 1]
        base, total = a + w, 0.0
        busy[base] = 0.0
        for k in range(a, b):
            total += finish[k] - start[k]  # numpy's cumsum of the service times, one after another
            busy[base + 1 + k - a] = total
    return enqueue, start, finish, busy, bounds


@njit(cache=True, inline="always")
def _right(values, lo, hi, v):
    # numpy's searchsorted(values[lo:hi], v, side="right"): how many of them are <= v
    low, high = lo, hi
    while low < high:
        mid = (low + high) >> 1
        if values[mid] <= v:
            low = mid + 1
        else:
            high = mid
    return low - lo


@njit(cache=True, inline="always")
def _busy_at(start, busy, a, n, base, done, t):
    # busy seconds by t of a FIFO worker that finished `done` tuples by then: the one after them is the only one
    # that can be in service
    if done >= n:
        return busy[base + done] + 0.0
    return busy[base + done] + max(t - start[a + done], 0.0)


@njit(cache=True)
def busy_until(start, finish, busy, t):
    """One worker's cumulative busy seconds at each time in t (its columns sorted, busy[k] before its k-th tuple)."""
    out = np.empty(t.size)
    for j in range(t.size):
        out[j] = _busy_at(start, busy, 0, finish.size, 0, _right(finish, 0, finish.size, t[j]), t[j])
    return out


@njit(cache=True)
def sample(enqueue, start, finish, busy, bounds, t, first, interval_s):
    """Every worker's queue length, utilization over the interval before, and tuples processed at each sample time
    t (sorted, each closing an interval of `interval_s` from `first`), from `timelines_of`'s arrays: (queue,
    utilization, processed), one row per worker."""
    workers = bounds.size - 1
    queue = np.empty((workers, t.size), np.int64)
    utilization = np.empty((workers, t.size))
    done = np.empty((workers, t.size), np.int64)
    for w in range(workers):
        a, b = bounds[w], bounds[w + 1]
        n, base = b - a, a + w
        before = _busy_at(start, busy, a, n, base, _right(finish, a, b, first), first)
        for j in range(t.size):
            finished = _right(finish, a, b, t[j])
            queue[w, j] = _right(enqueue, a, b, t[j]) - finished
            done[w, j] = finished
            now = _busy_at(start, busy, a, n, base, finished, t[j])
            utilization[w, j] = (now - before) / interval_s
            before = now
    return queue, utilization, done
