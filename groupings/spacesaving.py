"""SpaceSaving heavy hitters (Metwally et al., ICDT'05) on 64-bit key hashes: compiled functions on a Summary.

With k counters after m items: every key whose true count exceeds m/k is monitored, and every estimate lies
in [true count, true count + m/k]. The counters start at count 0 and stay sorted by count in `order`, cut
into blocks of equal count (the paper's Stream-Summary, flattened into arrays): a unit increment moves a
counter to the end of its block and into the next, so every update is O(1). A key that is not monitored
takes over the counter at the front of the lowest block, which makes the summary fully deterministic.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import keytable
from .compiled.state import new_summary
from .jit import hot

# The index and the helpers take the summary's arrays rather than the summary: taking a field out of the tuple
# inside a hot loop costs a reference-count round trip each time.


@hot
def _increment(s, slot):
    # keeps `order` sorted: swap the slot to the end of its block, then hand it to the block of count + 1
    order, pos, block, start, end, counts = s.order, s.pos, s.block, s.block_start, s.block_end, s.counts
    b = block[slot]
    e = end[b]
    other = order[e]
    p = pos[slot]
    order[p] = other
    pos[other] = p
    order[e] = slot
    pos[slot] = e
    c = counts[slot] + 1
    counts[slot] = c
    if start[b] == e:
        s.free_blocks[s.meta[2]] = b  # the block only held this slot
        s.meta[2] += 1
    else:
        end[b] = e - 1
    if e + 1 < order.size and counts[order[e + 1]] == c:
        nb = block[order[e + 1]]
        start[nb] = e
    else:
        s.meta[2] -= 1
        nb = s.free_blocks[s.meta[2]]
        start[nb] = e
        end[nb] = e
    block[slot] = nb


@hot
def find(s, key):
    """Counter slot monitoring `key`, or -1 when the key is not monitored."""
    return keytable.find(s.table, s.keys, key)


@hot
def offer(s, key):
    """Count one occurrence of `key` and return its counter slot (SpaceSaving update)."""
    table, keys, counts = s.table, s.keys, s.counts
    s.meta[1] += 1
    slot = keytable.find(table, keys, key)
    if slot < 0:
        # the key takes over the least counter; that counter's count bounds its overestimation
        slot = s.order[0]
        if counts[slot] > 0:
            keytable.delete(table, keys, keys[slot])
        else:
            s.meta[0] += 1
        keys[slot] = key
        s.errors[slot] = counts[slot]
        keytable.insert(table, keys, slot)
    _increment(s, slot)
    return slot


@hot
def offer_all(s, keys):
    """Offer every key of an array, in order."""
    for i in range(keys.size):
        offer(s, keys[i])


@hot
def head_into(s, theta, out):
    """Write the estimated frequencies at or above `theta` into `out`, descending; return how many."""
    bound = theta * s.meta[1]
    order, counts = s.order, s.counts
    k = order.size
    h = 0
    # `order` is ascending by count: walk it from the top
    while h < k and counts[order[k - 1 - h]] > 0 and counts[order[k - 1 - h]] >= bound:
        out[h] = counts[order[k - 1 - h]] / s.meta[1]
        h += 1
    return h


@njit(cache=True)
def head_frequencies(s, theta):
    """Estimated frequencies (count / items seen) of the monitored keys at or above `theta`, descending."""
    out = np.empty(s.keys.size, dtype=np.float64)
    return out[: head_into(s, theta, out)].copy()


class SpaceSaving:
    """A standalone SpaceSaving summary over uint64 keys (the routing kernels use the same functions)."""

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"SpaceSaving needs at least one counter (got {capacity!r})")
        self.summary = new_summary(int(capacity))

    @property
    def capacity(self) -> int:
        """Number of counters k."""
        return int(self.summary.keys.size)

    @property
    def seen(self) -> int:
        """Items offered so far (m)."""
        return int(self.summary.meta[1])

    def offer(self, keys: np.ndarray) -> None:
        """Count every key of `keys`, in order."""
        offer_all(self.summary, np.ascontiguousarray(keys, dtype=np.uint64))

    def estimate(self, key: int) -> int:
        """Estimated count of `key`: at least its true count; 0 when unmonitored (true count <= m/k then)."""
        slot = find(self.summary, np.uint64(key))
        return int(self.summary.counts[slot]) if slot >= 0 else 0

    def items(self) -> dict[int, tuple[int, int]]:
        """Monitored keys -> (estimated count, overestimation bound)."""
        s = self.summary
        used = np.flatnonzero(s.counts)
        return {int(s.keys[i]): (int(s.counts[i]), int(s.errors[i])) for i in used}

    def heavy_hitters(self, phi: float) -> dict[int, int]:
        """Monitored keys whose estimated frequency is at least `phi` -> estimated count."""
        if not 0 < phi <= 1:
            raise ValueError(f"phi must be in (0, 1] (got {phi})")
        bound = phi * self.seen
        return {k: c for k, (c, _) in self.items().items() if c >= bound}
