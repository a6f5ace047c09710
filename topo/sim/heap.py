"""The compiled event loop's priority queue: events in slots, a binary heap of slot numbers ordered by (time,
priority, order), as `events.Kernel` orders its actions. Arrays, not a list of tuples: a typed list's every read
and write is a call, and a push or a pop makes dozens of them."""

from __future__ import annotations

import numpy as np
from numba import njit

# a heap is (slots, at, ints, t, free, count): slots[:count[0]] the heap; per slot its time, its integers
# (priority, order, kind, source, worker, x, y, z) and one float; free[:count[1]] the unused slots
N_INTS = 8


def new_heap(capacity: int) -> tuple:
    """An empty heap with room for `capacity` events."""
    return (np.zeros(capacity, np.int64), np.zeros(capacity), np.zeros((capacity, N_INTS), np.int64),
            np.zeros(capacity), np.arange(capacity - 1, -1, -1, dtype=np.int64), np.array([0, capacity], np.int64))


def grown(heap: tuple) -> tuple:
    """The same events in a heap of twice the room."""
    slots, at, ints, t, free, count = heap
    old = len(slots)
    bigger = new_heap(2 * old)
    bigger[0][: count[0]] = slots[: count[0]]
    bigger[1][:old], bigger[2][:old], bigger[3][:old] = at, ints, t
    # the old free slots, then the new ones, with the last pushed (used first) on top
    bigger[4][: count[1]] = free[: count[1]]
    bigger[4][count[1] : count[1] + old] = np.arange(2 * old - 1, old - 1, -1)
    bigger[5][:] = count[0], count[1] + old
    return bigger


@njit(cache=True, inline="always")
def room(heap):
    """Events that can still be pushed."""
    return heap[5][1]


@njit(cache=True, inline="always")
def size(heap):
    """Events waiting."""
    return heap[5][0]


@njit(cache=True, inline="always")
def _before(at, ints, a, b):
    if at[a] != at[b]:
        return at[a] < at[b]
    if ints[a, 0] != ints[b, 0]:
        return ints[a, 0] < ints[b, 0]
    return ints[a, 1] < ints[b, 1]


@njit(cache=True, inline="always")
def push(heap, when, priority, order, kind, s, w, x, y, z, t):
    """Add an event (there must be room)."""
    slots, at, ints, times, free, count = heap
    count[1] -= 1
    slot = free[count[1]]
    at[slot], times[slot] = when, t
    ints[slot, 0], ints[slot, 1], ints[slot, 2], ints[slot, 3] = priority, order, kind, s
    ints[slot, 4], ints[slot, 5], ints[slot, 6], ints[slot, 7] = w, x, y, z
    i = count[0]
    count[0] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(at, ints, slot, slots[parent]):
            break
        slots[i] = slots[parent]
        i = parent
    slots[i] = slot


@njit(cache=True, inline="always")
def pop(heap):
    """Take the first event: (at, kind, source, worker, x, y, z, t)."""
    slots, at, ints, times, free, count = heap
    first = slots[0]
    n = count[0] - 1
    count[0] = n
    if n:
        last = slots[n]
        i = 0
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and _before(at, ints, slots[child + 1], slots[child]):
                child += 1
            if not _before(at, ints, slots[child], last):
                break
            slots[i] = slots[child]
            i = child
        slots[i] = last
    free[count[1]] = first
    count[1] += 1
    return (at[first], ints[first, 2], ints[first, 3], ints[first, 4], ints[first, 5], ints[first, 6],
            ints[first, 7], times[first])
