"""What a run's summary asks of the per-tuple log, in compiled passes over it one chunk at a time: each worker's
tuples, busy time and largest queue (`fold`), and its queue, busy time and tuples done at sample times (`sample`).

A FIFO worker's enqueue, start and finish times never go back, so a pass carries a few numbers per worker from one
chunk to the next (and, for the largest queue, the finish times of the tuples still queued) and never needs the
whole log at once. A log whose workers' times are not in order (an engine that logs in service order) is passed as
one chunk with each worker's columns sorted (`split_by_worker`, `sort_runs`). Loaded only when a summary is made.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# fold's integer state per worker: tuples so far, tuples finished by the last enqueue instant, largest queue, and
# the queue after the last enqueue (counted once the instant's last tuple is known); its float state: busy
# seconds, and the last enqueue, start and finish seen (the order check)
TUPLES, DONE, BEST, CANDIDATE = range(4)
BUSY, LAST_ENQUEUE, LAST_START, LAST_FINISH = range(4)
# sample's integer state per worker: tuples enqueued, tuples finished, next sample of each; float: busy seconds
ENQUEUED, FINISHED, NEXT_ENQUEUE, NEXT_FINISH = range(4)


def fold_state(workers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`fold`'s state before the first chunk: (integers, floats, carried finish times, their bounds)."""
    ints = np.zeros((workers, 4), np.int64)
    ints[:, CANDIDATE] = -1
    floats = np.full((workers, 4), -np.inf)
    floats[:, BUSY] = 0.0
    return ints, floats, np.empty(0), np.zeros(workers + 1, np.int64)


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def sort_runs(column, bounds):
    """Each worker's run of the column sorted in place, unless it already is."""
    for w in range(bounds.size - 1):
        a, b = bounds[w], bounds[w + 1]
        for i in range(a + 1, b):
            if column[i] < column[i - 1]:
                column[a:b] = np.sort(column[a:b])
                break


@njit(cache=True, nogil=True)
def fold(enqueue, start, finish, bounds, ints, floats, carry, carry_bounds):
    """Add a chunk (split by worker) to each worker's tuples, busy seconds and largest queue. Returns the finish
    times of the tuples still queued after it (for the next chunk) and their bounds; False when some worker's times
    go back (the state is then spoilt: start over with the log's columns sorted per worker)."""
    workers = bounds.size - 1
    out = np.empty(carry.size + enqueue.size)
    out_bounds = np.zeros(workers + 1, np.int64)
    n = 0
    for w in range(workers):
        a, b = bounds[w], bounds[w + 1]
        last_e, last_s, last_f = floats[w, LAST_ENQUEUE], floats[w, LAST_START], floats[w, LAST_FINISH]
        for i in range(a, b):
            if enqueue[i] < last_e or start[i] < last_s or finish[i] < last_f:
                return out[:0], out_bounds, False
            last_e, last_s, last_f = enqueue[i], start[i], finish[i]
        # the tuples still queued: first those carried over, then this chunk's
        k, carried_end, j = carry_bounds[w], carry_bounds[w + 1], a
        tuples, done, best, candidate = ints[w, TUPLES], ints[w, DONE], ints[w, BEST], ints[w, CANDIDATE]
        busy, at = floats[w, BUSY], floats[w, LAST_ENQUEUE]
        for i in range(a, b):
            t = enqueue[i]
            if candidate >= 0 and t != at:
                best = max(best, candidate)  # the tuples enqueued at one instant count together, at the last
            tuples += 1
            while k < carried_end and carry[k] <= t:
                k += 1
                done += 1
            if k == carried_end:
                while j <= i and finish[j] <= t:
                    j += 1
                    done += 1
            candidate, at = tuples - done, t
            busy += finish[i] - start[i]  # numpy's cumsum of the service times, one after another
        ints[w, TUPLES], ints[w, DONE], ints[w, BEST], ints[w, CANDIDATE] = tuples, done, best, candidate
        floats[w, BUSY], floats[w, LAST_ENQUEUE], floats[w, LAST_START], floats[w, LAST_FINISH] = (
            busy, last_e, last_s, last_f)
        for x in range(k, carried_end):
            out[n] = carry[x]
            n += 1
        for x in range(j, b):
            out[n] = finish[x]
            n += 1
        out_bounds[w + 1] = n
    return out[:n].copy(), out_bounds, True


@njit(cache=True, nogil=True)
def queue_max(ints):
    """Each worker's largest queue once every chunk is folded (its last enqueue instant counted too)."""
    return np.maximum(ints[:, BEST], ints[:, CANDIDATE])


@njit(cache=True, nogil=True)
def sample(enqueue, start, finish, bounds, t, ints, busy, enqueued, finished, busy_at):
    """Add a chunk (split by worker) to each worker's tuples enqueued, tuples finished and busy seconds at the
    sorted sample times t: sample j of worker w is written once the chunk shows a tuple of w past t[j]."""
    for w in range(bounds.size - 1):
        n_in, n_out, ja, jf = ints[w, ENQUEUED], ints[w, FINISHED], ints[w, NEXT_ENQUEUE], ints[w, NEXT_FINISH]
        total = busy[w]
        for i in range(bounds[w], bounds[w + 1]):
            while ja < t.size and t[ja] < enqueue[i]:
                enqueued[w, ja] = n_in
                ja += 1
            n_in += 1
            while jf < t.size and t[jf] < finish[i]:
                # this tuple is the first not finished by t[jf]: the only one that can be in service then
                finished[w, jf] = n_out
                busy_at[w, jf] = total + max(t[jf] - start[i], 0.0)
                jf += 1
            total += finish[i] - start[i]
            n_out += 1
        ints[w, ENQUEUED], ints[w, FINISHED], ints[w, NEXT_ENQUEUE], ints[w, NEXT_FINISH] = n_in, n_out, ja, jf
        busy[w] = total


@njit(cache=True, nogil=True)
def sample_rest(t, ints, busy, enqueued, finished, busy_at):
    """The samples after each worker's last tuple, once every chunk is sampled."""
    for w in range(ints.shape[0]):
        for j in range(ints[w, NEXT_ENQUEUE], t.size):
            enqueued[w, j] = ints[w, ENQUEUED]
        for j in range(ints[w, NEXT_FINISH], t.size):
            finished[w, j] = ints[w, FINISHED]
            busy_at[w, j] = busy[w] + 0.0
