"""Lossy counting (Manku & Motwani, VLDB'02) on 64-bit key hashes, and a sliding window of staggered counters.

A lossy counter with error eps cuts its stream into windows of w = ceil(1/eps) items. An entry is a key with
its appearance count c_a and error count c_e: a key first seen in window i enters with c_a = 1, c_e = i - 1,
and when window i closes every entry with c_a + c_e <= i is evicted. After n items every key whose true count
exceeds eps*n is held, and c_a never overcounts nor undercounts by more than eps*n.

Gedik's sliding window: x such counters start x-1 equal strides apart and live x strides each, so at any time
the oldest one (the active one, read by the controller) has counted between W and W + W/(x-1) of the latest
items (W and 1.5W for x = 3), and a counter that restarts takes the latest eps.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import keytable
from .jit import hot

# columns of Lossy.meta (one row per counter)
SIZE = 0  # entries in use
SEEN = 1  # items counted since the counter (re)started: n
WIDTH = 2  # window width w = ceil(1/eps)
WINDOW = 3  # index i of the current window, from 1
AGE = 4  # items since the counter (re)started; negative: it starts that many items from now
N_META = 5

# slots of Lossy.clock
ACTIVE = 0  # the counter the controller reads: the oldest
LIFESPAN = 1  # items a counter lives before it restarts: x strides
NEXT_WIDTH = 2  # window width a counter takes when it restarts
N_CLOCK = 3

# entries a sliding window's counters start with: they double as needed, and an index sized to the entries held,
# not to the window width, stays in cache (at eps 2e-5 a counter held 7,000 entries in room for 101,278)
START_CAPACITY = 1024
NEVER = np.int64(1) << np.int64(62)  # the lifespan of a counter that never restarts (whole-history counting)


class Lossy(NamedTuple):
    """x lossy counters side by side: entry arrays, an open-addressing index per counter, and the window clock."""

    keys: np.ndarray  # uint64[x, cap]: key of each entry
    counts: np.ndarray  # int64[x, cap]: appearance count c_a
    errors: np.ndarray  # int64[x, cap]: error count c_e
    table: np.ndarray  # int32[x, 2^b >= 2 cap]: each counter's index key -> entry (groupings.keytable)
    meta: np.ndarray  # int64[x, N_META]
    clock: np.ndarray  # int64[N_CLOCK]


def width_of(eps: float) -> int:
    """Window width ceil(1/eps) of a lossy counter with error eps in (0, 1]."""
    if not 0 < eps <= 1:
        raise ValueError(f"lossy counting needs an error eps in (0, 1] (got {eps})")
    return max(1, math.ceil(1.0 / eps - 1e-9))


def new_lossy(counters: int, lifespan: int, width: int, capacity: int) -> Lossy:
    """`counters` empty lossy counters of window width `width`, restarting every `lifespan` items, staggered."""
    if counters < 1 or lifespan < counters or width < 1 or capacity < 1:
        raise ValueError(f"bad lossy counter layout ({counters=}, {lifespan=}, {width=}, {capacity=})")
    stride = lifespan // counters
    meta = np.zeros((counters, N_META), dtype=np.int64)
    meta[:, WIDTH] = width
    meta[:, WINDOW] = 1
    meta[:, AGE] = -stride * np.arange(counters, dtype=np.int64)  # counter r starts r strides late
    return Lossy(
        keys=np.zeros((counters, capacity), dtype=np.uint64),
        counts=np.zeros((counters, capacity), dtype=np.int64),
        errors=np.zeros((counters, capacity), dtype=np.int64),
        table=keytable.new_table(capacity, rows=counters),
        meta=meta,
        clock=np.array([0, lifespan, width], dtype=np.int64),
    )


@hot
def reindex(c, r):
    """Rebuild counter r's index from its entries."""
    keytable.rebuild(c.table[r], c.keys[r], c.meta[r, SIZE])


@hot
def _evict(c, r, window):
    """Close window `window` of counter r: drop the entries with c_a + c_e <= window."""
    keys, counts, errors = c.keys, c.counts, c.errors
    kept = 0
    for e in range(c.meta[r, SIZE]):
        if counts[r, e] + errors[r, e] > window:
            keys[r, kept] = keys[r, e]
            counts[r, kept] = counts[r, e]
            errors[r, kept] = errors[r, e]
            kept += 1
    c.meta[r, SIZE] = kept
    reindex(c, r)


@hot
def _restart(c, r):
    meta = c.meta
    meta[r, SIZE] = 0
    keytable.rebuild(c.table[r], c.keys[r], 0)
    meta[r, SEEN] = 0
    meta[r, WIDTH] = c.clock[NEXT_WIDTH]
    meta[r, WINDOW] = 1
    meta[r, AGE] = 0


@hot
def _count_in(c, r, key):
    """One item for counter r (lossy counting's update, then the window boundary if it is reached)."""
    meta = c.meta
    n = meta[r, SEEN] + 1
    meta[r, SEEN] = n
    e = keytable.find(c.table[r], c.keys[r], key)
    if e >= 0:
        c.counts[r, e] += 1
    else:
        e = meta[r, SIZE]
        meta[r, SIZE] = e + 1
        c.keys[r, e] = key
        c.counts[r, e] = 1
        c.errors[r, e] = meta[r, WINDOW] - 1
        keytable.insert(c.table[r], c.keys[r], e)
    if n % meta[r, WIDTH] == 0:
        _evict(c, r, meta[r, WINDOW])
        meta[r, WINDOW] += 1


@hot
def count(c, key):
    """Count one item in every running counter; True when some counter has no free entry left."""
    meta = c.meta
    x = meta.shape[0]
    cap = c.keys.shape[1]
    full = False
    for r in range(x):
        age = meta[r, AGE]
        if age >= 0:
            _count_in(c, r, key)
            if meta[r, SIZE] >= cap:
                full = True
        age += 1
        meta[r, AGE] = age
        if age >= c.clock[LIFESPAN]:
            _restart(c, r)
            c.clock[ACTIVE] = (r + 1) % x  # the next oldest takes over
    return full


@hot
def count_all(c, keys, start):
    """Count keys[start:] in order; stop after a key that filled a counter; return the next index to count."""
    for j in range(start, keys.size):
        if count(c, keys[j]):
            return j + 1
    return keys.size


def grown(c: Lossy) -> Lossy:
    """The same counters with twice the entry capacity (entries and clock kept)."""
    x, cap = c.keys.shape
    bigger = 2 * cap
    out = Lossy(
        keys=np.zeros((x, bigger), dtype=np.uint64),
        counts=np.zeros((x, bigger), dtype=np.int64),
        errors=np.zeros((x, bigger), dtype=np.int64),
        table=keytable.new_table(bigger, rows=x),
        meta=c.meta,
        clock=c.clock,
    )
    out.keys[:, :cap] = c.keys
    out.counts[:, :cap] = c.counts
    out.errors[:, :cap] = c.errors
    for r in range(x):
        reindex(out, r)
    return out


def offer(c: Lossy, keys: np.ndarray) -> Lossy:
    """Count every key in order, growing the counters when needed; returns the (possibly new) counters."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    done = 0
    while done < keys.size:
        done = count_all(c, keys, done)
        if int(c.meta[:, SIZE].max()) >= c.keys.shape[1]:
            c = grown(c)
    return c


class Entries(NamedTuple):
    """What one lossy counter holds: its entries and how many items it counted with which window width."""

    keys: np.ndarray  # uint64
    counts: np.ndarray  # int64: c_a, at most eps*seen below the true count
    errors: np.ndarray  # int64: c_e
    seen: int
    width: int

    @property
    def eps(self) -> float:
        """Error bound per item counted: 1/w."""
        return 1.0 / self.width


def entries(c: Lossy, r: int) -> Entries:
    """Copy of counter r's entries."""
    size = int(c.meta[r, SIZE])
    return Entries(
        c.keys[r, :size].copy(),
        c.counts[r, :size].copy(),
        c.errors[r, :size].copy(),
        int(c.meta[r, SEEN]),
        int(c.meta[r, WIDTH]),
    )


def merged(parts: list[Entries]) -> tuple[np.ndarray, np.ndarray, int, float]:
    """Sum of several counters' c_a per key: (keys ascending, counts, items seen, undercount bound).

    Each counter undercounts a key by at most seen/width, so the sum undercounts by at most their sum.
    """
    parts = [p for p in parts if p.seen > 0]
    if not parts:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), 0, 0.0
    keys = np.concatenate([p.keys for p in parts])
    counts = np.concatenate([p.counts for p in parts])
    uniq, where = np.unique(keys, return_inverse=True)
    total = np.bincount(where, weights=counts, minlength=uniq.size).astype(np.int64)
    return uniq, total, sum(p.seen for p in parts), float(sum(p.seen / p.width for p in parts))


def frequent_of(part: Entries, support: float) -> dict[int, int]:
    """Keys lossy counting reports at `support`: c_a >= (support - eps) * seen, with their c_a."""
    bound = (support - part.eps) * part.seen
    hit = part.counts >= bound
    return dict(zip(part.keys[hit].tolist(), part.counts[hit].tolist(), strict=True))


class LossyCounter:
    """Lossy counting over the whole stream with error `eps` (one counter that never restarts)."""

    def __init__(self, eps: float, capacity: int = 1024) -> None:
        self._c = new_lossy(1, int(NEVER), width_of(eps), max(1, capacity))

    def offer(self, keys: np.ndarray) -> None:
        """Count every key of `keys`, in order."""
        self._c = offer(self._c, keys)

    @property
    def seen(self) -> int:
        """Items counted so far (n)."""
        return int(self._c.meta[0, SEEN])

    @property
    def eps(self) -> float:
        """Error bound per item: 1/w."""
        return 1.0 / int(self._c.meta[0, WIDTH])

    def entries(self) -> Entries:
        """The entries held now."""
        return entries(self._c, 0)

    def estimate(self, key: int) -> int:
        """c_a of `key` (0 when not held): between its true count minus eps*n and its true count."""
        e = keytable.find(self._c.table[0], self._c.keys[0], np.uint64(key))
        return int(self._c.counts[0, e]) if e >= 0 else 0

    def frequent(self, support: float) -> dict[int, int]:
        """Every key with true frequency >= `support`, and perhaps some down to support - eps, with its c_a."""
        return frequent_of(self.entries(), support)


class SlidingLossyCounter:
    """Gedik's sliding window: `counters` lossy counters over the latest `window` to (1 + 1/(counters-1)) window."""

    def __init__(self, window: int, eps: float, counters: int = 3, capacity: int | None = None) -> None:
        if not isinstance(counters, (int, np.integer)) or counters < 2:
            raise ValueError(f"a sliding window needs at least 2 counters (got {counters!r})")
        if not isinstance(window, (int, np.integer)) or window < counters - 1:
            raise ValueError(f"the window must hold at least counters - 1 = {counters - 1} items (got {window!r})")
        stride = math.ceil(window / (counters - 1))
        width = width_of(eps)
        cap = capacity if capacity is not None else min(stride * counters, START_CAPACITY)
        self.window = int(window)
        self._c = new_lossy(int(counters), stride * int(counters), width, max(1, int(cap)))

    def offer(self, keys: np.ndarray) -> None:
        """Count every key of `keys`, in order."""
        self._c = offer(self._c, keys)

    @property
    def lossy(self) -> Lossy:
        """The compiled counters (routing kernels count with them directly)."""
        return self._c

    @lossy.setter
    def lossy(self, value: Lossy) -> None:
        self._c = value

    @property
    def active(self) -> int:
        """Index of the counter read now: the oldest one."""
        return int(self._c.clock[ACTIVE])

    @property
    def seen(self) -> int:
        """Items the active counter holds: the latest W to (1 + 1/(x-1)) W (fewer while the stream is young)."""
        return int(self._c.meta[self.active, SEEN])

    @property
    def size(self) -> int:
        """Entries held by all counters together (the memory the window costs)."""
        return int(self._c.meta[:, SIZE].sum())

    def set_eps(self, eps: float) -> None:
        """Error for counters from their next restart on (the running ones keep theirs, so guarantees hold)."""
        self._c.clock[NEXT_WIDTH] = width_of(eps)

    def entries(self) -> Entries:
        """The active counter's entries."""
        return entries(self._c, self.active)

    def frequent(self, support: float) -> dict[int, int]:
        """Keys whose frequency over the active counter's items is at least `support` (lossy counting's report)."""
        return frequent_of(self.entries(), support)
