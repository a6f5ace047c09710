"""A source's output buffers, one per worker, as linked lists over its input positions, kept by compiled code.

Routing appends each tuple to its worker's buffer in routing order, and sending cuts the oldest `n` tuples off a
buffer. Kept as Python lists of array pieces, both cost a Python step per worker per routing call and a
concatenation per buffer sent, which at a hundred workers was most of a source's step. Here a buffer is a chain
of input positions (`after[position]` is the next one of the same buffer), so appending a routing call is one
compiled pass over its tuples and cutting a buffer one pass over the tuples cut. The order is the same as before:
a buffer holds its tuples in routing order.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _append(chosen, begin, arrival, after, head, tail, held, oldest):
    for i in range(chosen.size):
        w = chosen[i]
        position = begin + i
        after[position] = -1
        if tail[w] >= 0:
            after[tail[w]] = position
        else:  # the buffer opens: its oldest tuple is this one
            head[w] = position
            oldest[w] = arrival[position]
        tail[w] = position
        held[w] += 1


@numba.njit(cache=True)
def _cut(w, n, arrival, after, head, tail, held, oldest, out):
    position = head[w]
    for i in range(n):
        out[i] = position
        position = after[position]
    head[w] = position
    held[w] -= n
    if position < 0:
        tail[w] = -1
        oldest[w] = np.inf
    else:
        oldest[w] = arrival[position]


class OutputBuffers:
    """The per-worker output buffers of one source over `positions` input positions."""

    def __init__(self, workers: int, positions: int, arrival: np.ndarray) -> None:
        self.arrival = arrival  # each position's arrival (the source may fill it in as it routes)
        self.held = np.zeros(workers, np.int64)  # tuples in each buffer
        self.oldest = np.full(workers, np.inf)  # arrival of each buffer's oldest tuple
        self._after = np.empty(positions, np.int64)
        self._head = np.full(workers, -1, np.int64)
        self._tail = np.full(workers, -1, np.int64)

    def append(self, chosen: np.ndarray, begin: int) -> None:
        """Input positions begin, begin + 1, ... join the buffers of the workers `chosen` (int32) for them."""
        _append(chosen, begin, self.arrival, self._after, self._head, self._tail, self.held, self.oldest)

    def cut(self, w: int, n: int) -> np.ndarray:
        """The oldest `n` positions (int64, in routing order) of worker w's buffer, taken out of it."""
        out = np.empty(min(n, int(self.held[w])), np.int64)
        _cut(w, out.size, self.arrival, self._after, self._head, self._tail, self.held, self.oldest, out)
        return out
