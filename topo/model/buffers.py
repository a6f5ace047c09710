"""A source's output buffers, one per worker, as linked lists over its input positions, kept by compiled code.

Routing appends each tuple to its worker's buffer in routing order, and sending cuts the oldest `n` tuples off a
buffer. Kept as Python lists of array pieces, both cost a Python step per worker per routing call and a
concatenation per buffer sent, which at a hundred workers was most of a source's step. Here a buffer is a chain
of input positions (`after[position]` is the next one of the same buffer), so appending a routing call is one
compiled pass over its tuples, and sending every buffer that is due one pass over the channels and the tuples cut.
A step's questions about the channels (is any buffer waiting for credit, could one go out) are one pass too: numpy
reductions over a hundred channels cost a few microseconds each, several times per step. The order is the same as
before: a buffer holds its tuples in routing order, and the buffers of a step go out in worker order.

The channels whose buffer holds a tuple are also bits of `opened` (64 channels a word), and the passes visit those
alone, in worker order: a channel with nothing buffered costs a step nothing, so a thousand workers of which a
few hold tuples cost about what those few do.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

ONE = np.uint64(1)


def words(workers: int) -> int:
    """uint64 words of a bitmap over `workers` channels."""
    return (workers + 63) // 64


@numba.njit(cache=True, inline="always")
def _bit(w):
    return ONE << np.uint64(w & 63)


@numba.njit(cache=True, inline="always")  # no call, no reference counts, in a compiled caller
def _append(chosen, begin, arrival, after, head, tail, held, oldest, opened):
    for i in range(chosen.size):
        w = chosen[i]
        position = begin + i
        after[position] = -1
        if tail[w] >= 0:
            after[tail[w]] = position
        else:  # the buffer opens: its oldest tuple is this one
            head[w] = position
            oldest[w] = arrival[position]
            opened[w >> 6] |= _bit(w)
        tail[w] = position
        held[w] += 1


@numba.njit(cache=True, inline="always")  # no call, no reference counts, in a compiled caller
def _cut(w, n, arrival, after, head, tail, held, oldest, opened, out):
    position = head[w]
    for i in range(n):
        out[i] = position
        position = after[position]
    head[w] = position
    held[w] -= n
    if position < 0:
        tail[w] = -1
        oldest[w] = np.inf
        opened[w >> 6] &= ~_bit(w)
    else:
        oldest[w] = arrival[position]


@numba.njit(cache=True, inline="always")  # no call, no reference counts, in a compiled caller
def _due(w, tick, full_only, exhausted, batch_size, credits, held, oldest, in_flight):
    # channel w has a buffer to cut now: full, or unless `full_only` its oldest tuple saw `tick`, and a credit
    return held[w] > 0 and in_flight[w] < credits and (
        held[w] >= batch_size or (not full_only and (oldest[w] <= tick or exhausted)))


@numba.njit(cache=True, inline="always")  # no call, no reference counts, in a compiled caller
def _cut_due_into(tick, full_only, exhausted, batch_size, credits, arrival, after, head, tail, held, oldest, opened,
                  in_flight, max_in_flight, workers, sizes, positions):
    """Cut every buffer that is due and has a credit, channel by channel, as long as each stays due, into `workers`,
    `sizes` and `positions` (room for them given): (buffers cut, positions used). Allocates nothing, so a compiled
    caller without reference counting can take it."""
    n = 0
    used = 0
    for i in range(opened.size):
        bits = opened[i]  # (a cut may clear a bit of the word, not of this copy)
        while bits:
            w = i * 64 + trailing_zeros(bits)
            bits &= bits - ONE
            while _due(w, tick, full_only, exhausted, batch_size, credits, held, oldest, in_flight):
                k = min(batch_size, held[w])
                _cut(w, k, arrival, after, head, tail, held, oldest, opened, positions[used : used + k])
                in_flight[w] += 1
                max_in_flight[w] = max(max_in_flight[w], in_flight[w])
                workers[n] = w
                sizes[n] = k
                n += 1
                used += k
    return n, used


@numba.njit(cache=True, inline="always")  # no call, no reference counts, in a compiled caller
def _cut_due(tick, full_only, exhausted, batch_size, credits, arrival, after, head, tail, held, oldest, opened,
             in_flight, max_in_flight):
    """`_cut_due_into` arrays of their own: (workers, sizes, positions) of the buffers cut, in that order."""
    # sized for every tuple of the channels due now (a cut may make a channel due again, never one that was not)
    total = 0
    for i in range(opened.size):
        bits = opened[i]
        while bits:
            w = i * 64 + trailing_zeros(bits)
            bits &= bits - ONE
            if _due(w, tick, full_only, exhausted, batch_size, credits, held, oldest, in_flight):
                total += held[w]
    positions = np.empty(total, np.int64)
    workers = np.empty(total, np.int64)
    sizes = np.empty(total, np.int64)
    n, used = _cut_due_into(tick, full_only, exhausted, batch_size, credits, arrival, after, head, tail, held, oldest,
                            opened, in_flight, max_in_flight, workers, sizes, positions)
    return workers[:n], sizes[:n], positions[:used]


@numba.njit(cache=True, inline="always")  # no call, no reference counts, in a compiled caller
def channel_state(held, in_flight, credits, batch_size, opened):
    """One pass over the channels that hold tuples: (any tuple held or buffer in flight, a buffer waits for its
    channel's credit, a buffer could go out on credit, a full buffer has no credit, the most tuples one buffer
    holds)."""
    busy = waiting = sendable = full_stuck = False
    most = 0
    for i in range(opened.size):
        bits = opened[i]
        while bits:
            w = i * 64 + trailing_zeros(bits)
            bits &= bits - ONE
            busy = True
            most = max(most, held[w])
            if in_flight[w] < credits:
                sendable = True
            else:
                waiting = True
                if held[w] >= batch_size:
                    full_stuck = True
    for w in range(in_flight.size if not busy else 0):  # nothing held: a buffer in flight is what keeps it busy
        if in_flight[w] > 0:
            busy = True
            break
    return busy, waiting, sendable, full_stuck, most


class OutputBuffers:
    """The per-worker output buffers of one source over `positions` input positions."""

    def __init__(self, workers: int, positions: int, arrival: np.ndarray) -> None:
        self.arrival = arrival  # each position's arrival (the source may fill it in as it routes)
        self.held = np.zeros(workers, np.int64)  # tuples in each buffer
        self.oldest = np.full(workers, np.inf)  # arrival of each buffer's oldest tuple
        self._after = np.empty(positions, np.int64)
        self._head = np.full(workers, -1, np.int64)
        self._tail = np.full(workers, -1, np.int64)
        self.opened = np.zeros(words(workers), np.uint64)  # bit w: buffer w holds a tuple

    def append(self, chosen: np.ndarray, begin: int) -> None:
        """Input positions begin, begin + 1, ... join the buffers of the workers `chosen` (int32) for them."""
        _append(chosen, begin, self.arrival, self._after, self._head, self._tail, self.held, self.oldest, self.opened)

    def channels(self, in_flight: np.ndarray, credits: int, batch_size: int) -> tuple[bool, bool, bool, bool, int]:
        """`channel_state` of these buffers with the channels' buffers in flight."""
        return channel_state(self.held, in_flight, credits, batch_size, self.opened)

    def cut_due(self, tick: float, full_only: bool, exhausted: bool, batch_size: int, credits: int,
                in_flight: np.ndarray, max_in_flight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cut every due buffer that has a credit, in one compiled pass, counting each in `in_flight`: (workers,
        sizes, positions), the buffers in worker order and their positions one after another."""
        return _cut_due(tick, full_only, exhausted, batch_size, credits, self.arrival, self._after, self._head,
                        self._tail, self.held, self.oldest, self.opened, in_flight, max_in_flight)


# `SourceNode`'s flush ticks (phase + k x linger from the start, k >= 1), for compiled callers (the simulator's loop)
@numba.njit(cache=True, inline="always")
def tick_after(now, linger, phase):
    if not linger > 0:
        return now
    return (np.floor((now - phase) / linger + 1e-9) + 1.0) * linger + phase


@numba.njit(cache=True, inline="always")
def tick_at_or_after(t, linger, phase):
    if not linger > 0:
        return t
    return max(1.0, np.ceil((t - phase) / linger - 1e-9)) * linger + phase


@numba.njit(cache=True, inline="always")
def last_tick(now, linger, phase):
    if not linger > 0:
        return now
    k = np.floor((now - phase) / linger + 1e-9)
    return k * linger + phase if k >= 1 else -np.inf
