"""The open-addressing key index: every inserted key is found, absent keys are not, deletion keeps the rest."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupings import keytable

FIB = 0x9E3779B97F4A7C15
UNFIB = pow(FIB, -1, 2**64)  # FIB is odd, so multiplying by it is a bijection of 64-bit words


def key_at(home: int, low: int) -> np.uint64:
    """A key whose Fibonacci product has `home` in bits 32 and up: its home cell is home mod the table size.

    Distinct (home, low) give distinct keys, so drawing homes from a narrow range packs keys into long runs that
    wrap around the end of a small table: the cases where probing and backward shifts go wrong.
    """
    return np.uint64(((home << 32 | low) * UNFIB) % 2**64)


homes = st.tuples(st.integers(0, 15), st.integers(0, 3))  # tables here have at most 16 cells


def indexed(table: np.ndarray) -> int:
    return int((table >= 0).sum())


def test_home_is_the_fibonacci_hash():
    keys = np.random.default_rng(1).integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    for size in (1, 2, 8, 1024, 2**20):
        for key in keys.tolist():
            assert keytable.home(np.uint64(key), size) == ((key * FIB) % 2**64 >> 32) & (size - 1)
    assert keytable.home(key_at(13, 2), 8) == 5 and keytable.home(key_at(13, 2), 64) == 13


@pytest.mark.parametrize(("entries", "size"), [(0, 1), (1, 2), (2, 4), (3, 8), (4, 8), (5, 16), (1000, 2048)])
def test_table_size_is_the_least_power_of_two_at_twice_the_entries(entries, size):
    assert keytable.table_size(entries) == size
    assert keytable.new_table(entries).tolist() == [keytable.EMPTY] * size
    assert keytable.new_table(entries, rows=3).shape == (3, size)


def test_a_negative_number_of_entries_is_refused():
    with pytest.raises(ValueError):
        keytable.table_size(-1)


@settings(max_examples=200, deadline=None)
@given(
    present=st.lists(homes, min_size=0, max_size=12, unique=True),
    absent=st.lists(homes, max_size=12),
    capacity=st.integers(12, 40),
)
def test_every_inserted_key_is_found_and_absent_keys_are_not(present, absent, capacity):
    keys = np.zeros(capacity, dtype=np.uint64)
    keys[: len(present)] = [key_at(h, lo) for h, lo in present]
    table = keytable.new_table(capacity)
    for slot in range(len(present)):
        keytable.insert(table, keys, slot)
    for slot in range(len(present)):
        assert keytable.find(table, keys, keys[slot]) == slot
    for h, lo in absent:
        if (h, lo) not in present:
            assert keytable.find(table, keys, key_at(h, lo)) == keytable.EMPTY
    assert indexed(table) == len(present)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(st.one_of(homes, st.integers(0, 100)), max_size=80), capacity=st.integers(1, 8))
def test_deleting_with_backward_shift_keeps_every_other_key_findable(ops, capacity):
    """A (home, low) pair inserts that key when there is room; an integer deletes one of the keys present."""
    keys = np.zeros(capacity, dtype=np.uint64)
    table = keytable.new_table(capacity)
    slot_of: dict[int, int] = {}  # the model: key -> slot
    gone: set[int] = set()
    free = list(range(capacity))
    for op in ops:
        if isinstance(op, tuple):
            key = int(key_at(*op))
            if key in slot_of or not free:
                continue
            slot = free.pop()
            keys[slot] = key
            keytable.insert(table, keys, slot)
            slot_of[key] = slot
            gone.discard(key)
        elif slot_of:
            key = sorted(slot_of)[op % len(slot_of)]
            keytable.delete(table, keys, np.uint64(key))
            free.append(slot_of.pop(key))  # keys[slot] keeps the old key until the slot is reused
            gone.add(key)
        for key, slot in slot_of.items():
            assert keytable.find(table, keys, np.uint64(key)) == slot
        for key in gone:
            assert keytable.find(table, keys, np.uint64(key)) == keytable.EMPTY
        assert indexed(table) == len(slot_of)


def test_deletion_shifts_entries_back_across_the_end_of_the_table():
    """Keys homed at the last cells run on into the first ones; delete them in every order, checking after each."""
    layout = [(7, 0), (7, 1), (6, 0), (0, 0)]  # homes in a table of 8 cells: cells 7, 0, 6, 1 in insertion order
    for order in permutations(range(len(layout))):
        keys = np.array([key_at(h, lo) for h, lo in layout], dtype=np.uint64)
        table = keytable.new_table(len(layout))
        assert table.size == 8
        for slot in range(len(layout)):
            keytable.insert(table, keys, slot)
        assert table.tolist() == [1, 3, -1, -1, -1, -1, 2, 0]
        for done, gone in enumerate(order, start=1):
            keytable.delete(table, keys, keys[gone])
            for slot in range(len(layout)):
                expected = keytable.EMPTY if slot in order[:done] else slot
                assert keytable.find(table, keys, keys[slot]) == expected
            assert indexed(table) == len(layout) - done


@settings(max_examples=100, deadline=None)
@given(entries=st.lists(homes, min_size=1, max_size=10, unique=True), n=st.integers(0, 10))
def test_rebuild_indexes_exactly_the_first_n_slots_of_each_row(entries, n):
    """Lossy counting keeps one index per counter: rows of a 2-D table, rebuilt one at a time."""
    n = min(n, len(entries))
    keys = np.zeros((2, 10), dtype=np.uint64)
    keys[0, : len(entries)] = [key_at(h, lo) for h, lo in entries]
    keys[1, : len(entries)] = keys[0, : len(entries)][::-1]  # the same keys in the other row, reversed
    table = keytable.new_table(10, rows=2)
    for slot in range(len(entries)):
        keytable.insert(table[0], keys[0], slot)  # stale entries that the rebuild must drop
    keytable.rebuild(table[1], keys[1], len(entries))
    keytable.rebuild(table[0], keys[0], n)
    for slot in range(len(entries)):
        assert keytable.find(table[0], keys[0], keys[0, slot]) == (slot if slot < n else keytable.EMPTY)
        assert keytable.find(table[1], keys[1], keys[1, slot]) == slot
    assert indexed(table[0]) == n and indexed(table[1]) == len(entries)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 40), max_size=300), max_size=6),
       st.integers(1, 8))
def test_a_key_set_holds_what_numpys_unique_gives(chunks, capacity):
    seen = keytable.KeySet(capacity)  # a small start: it grows as keys come
    for chunk in chunks:
        seen.add(np.array(chunk, dtype=np.uint64))
    every = np.concatenate([np.array(c, dtype=np.uint64) for c in chunks]) if chunks else np.zeros(0, np.uint64)
    assert seen.sorted().dtype == np.uint64
    assert seen.sorted().tolist() == np.unique(every).tolist() and seen.size == np.unique(every).size
