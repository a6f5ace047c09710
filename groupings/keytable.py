"""An open-addressing index from 64-bit key hashes to entry slots: compiled functions over plain arrays.

The entries live in the caller's arrays (a key array, and whatever else a slot holds); the index is an int32
array of a power-of-two size whose cells hold a slot, or EMPTY. A key starts at its Fibonacci home cell and
probes linearly; deletion shifts the rest of its run back, so tables that evict all the time never fill up with
tombstones. SpaceSaving, lossy counting (one index per counter: pass a row, `table[r]`, `keys[r]`), FISH's
epoch counters and Gedik's explicit hash all use it.

numba's own typed dict (numba.typed.Dict) does not compile without reference counting, which routing code runs
without (see `jit.hot`), and was two to four times slower than this table on SpaceSaving's find-evict-insert loop.
"""

from __future__ import annotations

import numpy as np

from .jit import hot

EMPTY = -1  # an index cell that holds no slot
_FIB = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio


def table_size(entries: int) -> int:
    """Cells of an index for up to `entries` keys: the least power of two >= 2 entries (load <= 1/2, short probes)."""
    if entries < 0:
        raise ValueError(f"an index holds a non-negative number of keys (got {entries})")
    size = 1
    while size < 2 * entries:
        size *= 2
    return size


def new_table(entries: int, rows: int | None = None) -> np.ndarray:
    """An empty index for up to `entries` keys (int32), or `rows` of them side by side, one per row."""
    shape = table_size(entries) if rows is None else (rows, table_size(entries))
    return np.full(shape, EMPTY, dtype=np.int32)


@hot(inline=True)
def home(key: np.uint64, size: int) -> int:
    """Home cell of `key` in an index of `size` cells: Fibonacci hashing, so keys differing in high bits spread."""
    return np.int64(((key * _FIB) >> np.uint64(32)) & np.uint64(size - 1))


# inlined: a call per lookup from inside Gedik's inlined LOOKUP made its routing loop twice as slow
@hot(inline=True)
def find(table: np.ndarray, keys: np.ndarray, key: np.uint64) -> int:
    """Slot whose key (keys[slot]) is `key`, or EMPTY: probe from its home cell to the first empty cell."""
    mask = table.size - 1
    i = home(key, table.size)
    while True:
        slot = table[i]
        if slot < 0 or keys[slot] == key:
            return slot
        i = (i + 1) & mask


@hot
def insert(table: np.ndarray, keys: np.ndarray, slot: int) -> None:
    """Index `slot` under its key keys[slot], which must not be indexed yet: the first empty cell from its home."""
    mask = table.size - 1
    i = home(keys[slot], table.size)
    while table[i] >= 0:
        i = (i + 1) & mask
    table[i] = slot


@hot
def delete(table: np.ndarray, keys: np.ndarray, key: np.uint64) -> None:
    """Unindex `key`, which must be indexed, shifting later entries of its run back so no probe path breaks."""
    mask = table.size - 1
    i = home(key, table.size)
    while keys[table[i]] != key:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        slot = table[j]
        if slot < 0:
            table[i] = EMPTY
            return
        h = home(keys[slot], table.size)
        # the entry at j may fill the hole at i only if its home is not cyclically in (i, j]
        if (i < j and (h <= i or h > j)) or (i > j and h <= i and h > j):
            table[i] = slot
            i = j


@hot
def rebuild(table: np.ndarray, keys: np.ndarray, n: int) -> None:
    """Index exactly the slots 0 .. n-1, in that order (after entries were compacted, or to build from scratch)."""
    for i in range(table.size):
        table[i] = EMPTY
    for slot in range(n):
        insert(table, keys, slot)


@hot
def add_new(table: np.ndarray, keys: np.ndarray, count: int, new: np.ndarray) -> tuple[int, int]:
    """A set of keys: append each key of `new` not held in keys[:count] to keys, indexed, until the index is half
    full or keys is; (keys held now, how many of `new` were looked at)."""
    room = min(table.size // 2, keys.size)
    for j in range(new.size):
        if count >= room:
            return count, j
        key = new[j]
        if find(table, keys, key) < 0:
            keys[count] = key
            insert(table, keys, count)
            count += 1
    return count, new.size


class KeySet:
    """The distinct 64-bit keys added so far (numpy's unique over every key added cost about 0.13 s a million)."""

    def __init__(self, capacity: int = 1024) -> None:
        self._keys = np.empty(max(1, capacity), np.uint64)
        self._table = new_table(self._keys.size)
        self.size = 0

    def add(self, new: np.ndarray) -> None:
        """Add every key of `new` (duplicates allowed)."""
        new = np.ascontiguousarray(new, dtype=np.uint64)
        done = 0
        while done < new.size:
            self.size, looked = add_new(self._table, self._keys, self.size, new[done:])
            done += looked
            if done < new.size:  # full: twice the room, indexed again
                self._keys = np.concatenate([self._keys, np.empty(self._keys.size, np.uint64)])
                self._table = new_table(self._keys.size)
                rebuild(self._table, self._keys, self.size)

    def sorted(self) -> np.ndarray:
        """The keys held, ascending (what np.unique of every key added gives)."""
        return np.sort(self._keys[: self.size])
