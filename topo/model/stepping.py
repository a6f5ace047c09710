"""A source step's arithmetic over its input, in compiled code: what `SourceNode` computed with numpy before.

A step of a source at a few tuples looked at a few input positions with a dozen numpy calls (the lag of the tuples
routed, the range of the workers chosen, how late the tuples that waited were), each costing microseconds on a
two-element array; at 32 sources stepping on one flush tick that was milliseconds of one process's thread. Each
helper here is one call with the same arithmetic, bit for bit: the lag's sum is numpy's pairwise sum
(`pairwise.pairwise_sum_with`), and a tuple's flush tick is `buffers.tick_at_or_after`.
"""

from __future__ import annotations

import numba
import numpy as np

from topo.model.buffers import _append, tick_at_or_after
from topo.model.lateness import EDGES_MS
from topo.model.pairwise import new_stack, pairwise_sum_with


@numba.njit(cache=True)
def route_into(chosen, begin, now, saturating, pool, active, arrival, after, head, tail, held, oldest, opened, lag,
               stack):
    """Input positions [begin, begin + len(chosen)) join the buffers of the workers `chosen` for them, unless one
    is outside [0, active); unless input is always waiting (`saturating`), their lag (`now` minus arrival) goes
    into `lag`. (0: joined, 1: a worker outside the pool, 2: one at or above `active`; the lowest and highest
    worker; the lag's max and numpy sum, -inf and 0.0 when saturating or nothing was joined)."""
    take = chosen.size
    low = high = chosen[0] if take else 0
    for i in range(1, take):
        low, high = min(low, chosen[i]), max(high, chosen[i])
    if low < 0 or high >= pool:
        return 1, low, high, -np.inf, 0.0
    if high >= active:
        return 2, low, high, -np.inf, 0.0
    most, total = -np.inf, 0.0
    if not saturating and take:  # (a saturating source set the arrivals to now: `arrival` may be read-only)
        part = lag[:take]
        for i in range(take):
            part[i] = now - arrival[begin + i]
            most = max(most, part[i])
        total = pairwise_sum_with(part, stack)
    _append(chosen, begin, arrival, after, head, tail, held, oldest, opened)
    return 0, low, high, most, total


@numba.njit(cache=True)
def arrived_by(arrival, upto):
    """Input positions whose arrival is at or before `upto` (`arrival` ascending): numpy's searchsorted, which
    lets go of the GIL for every call, and the thread stepping the sources then waited for it back behind the
    process's other threads; compiled code keeps it."""
    return np.searchsorted(arrival, upto, side="right")


@numba.njit(cache=True)
def count_late(arrival, begin, stop, now, due, linger, phase, edges, counts):
    """Tuples [begin, stop) waited from the later of their flush tick and `due` until `now`: count those at least
    `edges[0]` ms late into the bins of `edges` (`lateness.Lateness`); the latest (ms), 0.0 if none."""
    latest = 0.0
    for i in range(begin, stop):
        late = (now - max(tick_at_or_after(arrival[i], linger, phase), due)) * 1e3
        if late >= edges[0]:
            counts[np.searchsorted(edges, late, side="right") - 1] += 1
            latest = max(latest, late)
    return latest


class Stepper:
    """The compiled helpers of one source's steps, over its output buffers (`buffers.OutputBuffers`), with room for
    one routing call's lag (`batch_size` tuples) and the pairwise sum's recursion."""

    def __init__(self, buffers, batch_size: int) -> None:
        b = buffers
        self._join = (b.arrival, b._after, b._head, b._tail, b.held, b.oldest, b.opened,
                      np.empty(max(1, batch_size)), new_stack())
        # loaded (or compiled) now for this source's kind of input, not at the first late step, mid-run
        self.count_late(0, 0, 0.0, 0.0, 0.0, 0.0, np.zeros(len(EDGES_MS), np.int64))
        self.arrived_by(0.0)

    def route(self, chosen: np.ndarray, begin: int, now: float, saturating: bool, pool: int,
              active: int) -> tuple[int, int, int, float, float]:
        """`route_into` these buffers."""
        return route_into(chosen, begin, now, saturating, pool, active, *self._join)

    def arrived_by(self, upto: float) -> int:
        """`arrived_by` of this source's input."""
        return arrived_by(self._join[0], upto)

    def count_late(self, begin: int, stop: int, now: float, due: float, linger: float, phase: float,
                   counts: np.ndarray) -> float:
        """`count_late` of input positions [begin, stop) into `counts` (binned by `lateness.EDGES_MS`)."""
        return count_late(self._join[0], begin, stop, now, due, linger, phase, EDGES_MS, counts)
