"""Consistent Grouping's pairing (`ConsistentGrouping.feedback`) in compiled code, for the simulator's compiled
event loop (`topo.sim.loop`), which then needs no Python between events for CG either.

`cg.py` stays the model: this is its `_on_increase`, `_on_decrease`, `_pair`, `_probe_capacity` and the map's
`move`, line for line, on one source's state laid out as arrays (`ConsistentGrouping.pairing_arrays` packs it,
`take_pairing_arrays` writes it back), and `tests/test_sim_loop.py` holds the two to the same runs. The state of
source s is row s of each array:

    owner  = each virtual worker's worker (the map's current version)
    after  = the next virtual worker its owner got after it (-1: the last): each worker's holdings, oldest first
    holds  = per worker (first held, last held, how many)
    idle, busy = the queues: workers in order, and (length, ) in `count`
    last_busy = order stamp of each worker's latest DECREASE (-1: never)
    count  = (idle length, busy length, stamp, moves, probe moves, refused, increases, decreases, version,
              last moved virtual worker, its owner before, min_vw, probe)
"""

from __future__ import annotations

from numba import njit

IDLE_N, BUSY_N, STAMP, MOVES, PROBE_MOVES, REFUSED, INCREASES, DECREASES, VERSION, LAST_GROUP, LAST_FROM, MIN_VW, \
    PROBE = range(13)


@njit(cache=True, inline="always")
def _find(queue, n, w):
    for i in range(n):
        if queue[i] == w:
            return i
    return -1


@njit(cache=True, inline="always")
def _remove_at(queue, n, i):
    for k in range(i, n - 1):
        queue[k] = queue[k + 1]


@njit(cache=True, inline="always")
def _leave(queue, count, s, at, w):
    """w leaves source s's queue (count[s, at] long) if it is in it: True if it was."""
    i = _find(queue[s], count[s, at], w)
    if i >= 0:
        _remove_at(queue[s], count[s, at], i)
        count[s, at] -= 1
    return i >= 0


@njit(cache=True, inline="always")
def _join(queue, count, s, at, w):
    """w joins the back of source s's queue unless it is in it already."""
    if _find(queue[s], count[s, at], w) < 0:
        queue[s, count[s, at]] = w
        count[s, at] += 1


@njit(cache=True, inline="always")
def _pop(queue, count, s, at):
    """The head of source s's queue, which leaves it."""
    w = queue[s, 0]
    _remove_at(queue[s], count[s, at], 0)
    count[s, at] -= 1
    return w


@njit(cache=True, inline="always")
def _move(p, s, donor, receiver):
    """`GroupMap.move` and `ConsistentGrouping._move`: the donor's longest-held virtual worker goes to the receiver."""
    owner, after, holds, count = p[0], p[1], p[2], p[6]
    g = holds[s, donor, 0]
    holds[s, donor, 0] = after[s, g]
    if holds[s, donor, 0] < 0:
        holds[s, donor, 1] = -1
    holds[s, donor, 2] -= 1
    count[s, LAST_GROUP], count[s, LAST_FROM] = g, owner[s, g]
    owner[s, g] = receiver
    after[s, g] = -1
    if holds[s, receiver, 1] >= 0:
        after[s, holds[s, receiver, 1]] = g
    else:
        holds[s, receiver, 0] = g
    holds[s, receiver, 1] = g
    holds[s, receiver, 2] += 1
    count[s, VERSION] += 1
    count[s, MOVES] += 1


@njit(cache=True, inline="always")
def _pair(p, s):
    """While both queues have a head, the busy head gives one virtual worker to the idle head."""
    idle, busy, count = p[3], p[4], p[6]
    while count[s, IDLE_N] and count[s, BUSY_N]:
        donor = _pop(busy, count, s, BUSY_N)
        if p[2][s, donor, 2] <= count[s, MIN_VW]:
            count[s, REFUSED] += 1  # nothing left to give: the signal is dropped
            continue
        _move(p, s, donor, _pop(idle, count, s, IDLE_N))


@njit(cache=True, inline="always")
def _probe(p, s, donor):
    """Give one of the busy donor's virtual workers to the worker that reported busy least recently (or never)."""
    holds, last_busy, count = p[2], p[5], p[6]
    workers = holds.shape[1]
    if holds[s, donor, 2] <= count[s, MIN_VW] or workers == 1:
        count[s, REFUSED] += 1
        return
    target = -1
    for u in range(workers):
        if u != donor and (target < 0 or last_busy[s, u] < last_busy[s, target] or (
                last_busy[s, u] == last_busy[s, target] and holds[s, u, 2] < holds[s, target, 2])):
            target = u  # the lowest (last busy, holdings, id)
    _move(p, s, donor, target)
    count[s, PROBE_MOVES] += 1


@njit(cache=True, inline="always")
def signal(p, s, w, sign):
    """Source s's CG takes worker w's signal (`_on_increase` for sign > 0, else `_on_decrease`)."""
    idle, busy, count = p[3], p[4], p[6]
    if sign > 0:
        count[s, INCREASES] += 1
        _leave(busy, count, s, BUSY_N, w)
        _join(idle, count, s, IDLE_N, w)
        _pair(p, s)
        return
    count[s, DECREASES] += 1
    p[5][s, w] = count[s, STAMP]
    count[s, STAMP] += 1
    _leave(idle, count, s, IDLE_N, w)
    _join(busy, count, s, BUSY_N, w)
    _pair(p, s)
    if count[s, PROBE] and _leave(busy, count, s, BUSY_N, w):  # still queued: no idle worker to pair with
        _probe(p, s, w)
