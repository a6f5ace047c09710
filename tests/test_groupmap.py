"""The versioned map from groups to workers shared by CG, ALBIC and Gedik."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupings.groupmap import GroupMap, Versions, apportion


def consistent(m: GroupMap) -> None:
    """Holdings and the owner array tell the same story, and every group is held exactly once."""
    held = [m.held(w) for w in range(m.workers)]
    assert sorted(g for h in held for g in h) == list(range(m.groups))
    for w, h in enumerate(held):
        assert all(m.current[g] == w for g in h)
    assert m.holdings().tolist() == [len(h) for h in held]


def test_versions_keep_current_and_previous_only():
    v = Versions("a")
    assert v.get() == "a" and v.kept() == [0] and v.previous is None
    assert v.install("b") == 1 and v.install("c") == 2
    assert v.get(2) == "c" and v.get(1) == "b" and v.previous == "b"
    with pytest.raises(ValueError, match="version 0 is not kept"):
        v.get(0)


def test_copies_are_independent():
    v = GroupMap.striped(6, 2)
    w = v.copy()
    v.move(0, 1)
    assert w.version == 0 and w.holdings().tolist() == [3, 3] and v.holdings().tolist() == [2, 4]


def test_move_gives_the_longest_held_group_and_keeps_the_old_owner_array():
    m = GroupMap.striped(6, 3)  # 0: [0, 3], 1: [1, 4], 2: [2, 5]
    before = m.current
    assert m.move(0, 2) == 0
    assert m.held(0) == [3] and m.held(2) == [2, 5, 0]
    assert m.version == 1 and m.get(0) is before and before[0] == 0 and m.current[0] == 2
    assert m.lookup(np.array([0, 3]), 0).tolist() == [0, 0] and m.lookup(np.array([0, 3])).tolist() == [2, 0]


def test_blocks_and_apportion():
    assert apportion([3.0, 1.0], 10, 1) == [7, 3]
    assert sum(apportion([0.2, 0.5, 0.3], 17, 2)) == 17 and min(apportion([0.0, 1.0], 4, 1)) >= 1
    with pytest.raises(ValueError):
        apportion([1.0, 1.0], 3, 2)
    m = GroupMap.blocks([2, 0, 3])
    assert m.current.tolist() == [0, 0, 2, 2, 2] and m.workers == 3


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 6),
    per=st.integers(1, 5),
    ops=st.lists(st.tuples(st.sampled_from(["move", "join", "leave", "install"]), st.integers(0, 10**6)), max_size=12),
)
def test_every_edit_keeps_the_map_whole_and_versioned(n, per, ops):
    rng = np.random.default_rng(0)
    m = GroupMap.striped(n * per, n)
    consistent(m)
    for op, x in ops:
        before, version = m.current.copy(), m.version
        if op == "move" and m.workers > 1:
            donor = int(np.argmax(m.holdings()))
            moved = m.move(donor, (donor + 1 + x % (m.workers - 1)) % m.workers)
            assert int((before != m.current).sum()) == 1 and before[moved] == donor
        elif op == "join" and m.workers < m.groups:
            new = min(m.groups, m.workers + 1 + x % 2)
            m.join(new)
            assert m.workers == new and m.holdings()[-1] == m.groups // new
        elif op == "leave" and m.workers > 1:
            remaining = 1 + x % (m.workers - 1)
            m.leave(remaining)
            assert m.workers == remaining and m.current.max() < remaining
        elif op == "install":
            new = rng.integers(0, m.workers, size=m.groups)
            stay = {w: [g for g in m.held(w) if new[g] == w] for w in range(m.workers)}
            m.install(new)
            assert all(m.held(w)[: len(stay[w])] == stay[w] for w in stay)  # stayers keep their order
        else:
            continue
        consistent(m)
        assert m.version == version + 1 and np.array_equal(m.get(version), before)
