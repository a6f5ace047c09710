"""Pulsar's Key_Shared selector: a consistent-hashing ring on 65,536 slots, and slots that drain before they move."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupings
from groupings.adaptive.key_shared import key_slots, ring_slots
from groupings.feedback import AckReport
from groupings.reference import py_grouping

# 200,000 distinct keys: the moved fractions below are fractions of distinct keys, not of traffic
KEYS = np.unique(np.random.default_rng(5).integers(0, 2**63, 200_000, dtype=np.int64).astype(np.uint64))


def test_registered_with_pulsars_defaults():
    info = groupings.describe("key_shared")
    assert {p["name"]: p["default"] for p in info["params"]} == {"points": 100, "slots": 65_536}
    assert not info["controller"] and not info["delegation"]
    assert groupings.make("key_shared", 3, points="7").params == {"points": 7, "slots": 65_536}
    for bad in ({"points": 0}, {"slots": 1}, {"slots": 2**25}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            groupings.make("key_shared", 3, **bad)


def test_a_key_goes_to_the_first_point_at_or_after_its_slot_wrapping_past_the_last():
    at, owners = ring_slots(5, 100, 65_536)
    assert np.all(np.diff(at) > 0) and at.size <= 500 and set(owners.tolist()) == set(range(5))
    g = groupings.make("key_shared", 5)
    slots = key_slots(KEYS)
    following = np.searchsorted(at, slots, side="left")  # first point at or after the slot
    expected = owners[np.where(following == at.size, 0, following)]  # none after the last: the first point
    assert np.array_equal(g.route(KEYS), expected)
    assert np.any(slots > at[-1]) and np.any(np.isin(slots, at))  # both the wrap and exact hits occur


def test_colliding_points_belong_to_the_worker_that_joined_first():
    at, owners = ring_slots(6, 40, 64)  # 240 points on 64 slots: most slots hold points of several workers
    held = {}
    for w in range(6):
        for s in ring_slots(w + 1, 40, 64)[0].tolist():
            held.setdefault(s, w)  # the first worker (lowest index) with a point on the slot
    assert dict(zip(at.tolist(), owners.tolist(), strict=True)) == held
    assert at.size < 6 * 40  # collisions did happen
    # a worker joining later never takes a slot that an earlier worker holds
    before = dict(zip(*(x.tolist() for x in ring_slots(3, 40, 64)), strict=True))
    assert all(held[s] == w for s, w in before.items())


@pytest.mark.parametrize("n", range(1, 33))
def test_one_worker_joining_or_leaving_moves_only_its_own_share_of_the_keys(n):
    # Worker n joining n workers, or leaving n + 1, moves the keys of its own ring share, 1/(n+1) on average.
    # A worker's share is the sum of 100 arcs, so it varies by about 1/sqrt(100) = 10% of itself: the bound is
    # three standard deviations above the mean (measured: at most 1.21/(n+1) for n = 1..32).
    small, large = groupings.make("key_shared", n).route(KEYS), groupings.make("key_shared", n + 1).route(KEYS)
    moved = small != large
    assert moved.mean() <= 1.3 / (n + 1)
    assert np.all(large[moved] == n)  # joining: every moved key goes to the newcomer
    g = groupings.make("key_shared", n + 1)
    before = g.route(KEYS)
    g.resize(n)  # leaving: only the leaver's keys move, at once (it is gone), to the owners of the next points
    after = g.route(KEYS)
    assert np.array_equal(after, small) and np.all(before[after != before] == n)
    assert g.stats()["drains"] == 0 and g.stats()["drained_tuples"] == 0


def test_a_moved_key_stays_on_its_old_owner_until_the_acks_reach_what_was_sent_before_the_change():
    g = groupings.make("key_shared", 3)
    first = g.route(KEYS)  # every key once: nothing acked yet
    g.resize(4)
    moved = g.owners(KEYS) == 3
    assert 0.15 < moved.mean() < 0.35
    assert np.array_equal(g.route(KEYS[moved]), first[moved])  # draining: still the old owners
    sent = np.bincount(first, minlength=3)
    # a slot's mark is its old owner's count right after the slot's last tuple before the change
    position = np.empty(KEYS.size, dtype=np.int64)
    for w in range(3):
        position[first == w] = np.arange(1, sent[w] + 1)
    slots = key_slots(KEYS)
    mark = np.zeros(65_536, dtype=np.int64)
    np.maximum.at(mark, slots, position)
    half = sent // 2
    g.feedback(AckReport.of([0, 1, 2], acked=half, now=1.0))
    expected = np.where(mark[slots] <= half[first], 3, first)[moved]
    assert 0 < np.mean(expected == 3) < 1
    assert np.array_equal(g.route(KEYS[moved]), expected)
    g.feedback(AckReport.of([0, 1, 2], acked=sent - half, now=2.0))  # now all of it: every moved slot drained
    assert np.all(g.route(KEYS[moved]) == 3)
    assert np.array_equal(g.route(KEYS), g.owners(KEYS))
    assert g.stats()["draining_slots"] == 0 and g.stats()["drains"] > 0


def test_a_slot_with_nothing_unacked_moves_at_once():
    g = groupings.make("key_shared", 3)
    sent = g.route(KEYS[::2])
    g.feedback(AckReport.of([0, 1, 2], acked=np.bincount(sent, minlength=3), now=1.0))
    g.resize(4)
    routed = np.isin(key_slots(KEYS), key_slots(KEYS[::2]))
    fresh = KEYS[~routed]  # keys whose slots were never routed
    assert np.all(g.route(fresh) == g.owners(fresh)) and np.any(g.owners(fresh) == 3)
    assert np.array_equal(g.route(KEYS[::2]), g.owners(KEYS[::2]))  # acked: nothing holds them back
    assert g.stats()["drains"] == 0


def test_a_leaving_worker_is_not_waited_for_and_a_returning_slot_stops_draining():
    g = groupings.make("key_shared", 4)
    first = g.route(KEYS)
    g.resize(5)  # slots drain from workers 0..3 towards worker 4
    assert g.stats()["draining_slots"] > 0
    g.resize(4)  # worker 4 leaves before anything drained: its slots come back to their owners
    assert g.stats()["draining_slots"] == 0
    assert np.array_equal(g.route(KEYS), first)
    g.resize(3)  # worker 3 leaves with tuples unacked: Pulsar redelivers them, its slots move at once
    out = g.route(KEYS)
    assert out.max() < 3 and np.array_equal(out, g.owners(KEYS))


keys_drawn = st.lists(st.integers(0, 40), min_size=0, max_size=120).map(
    lambda xs: (np.array(xs, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
)
steps = st.lists(
    st.tuples(
        st.integers(1, 7),  # workers from this step on
        keys_drawn,  # tuples routed
        st.lists(st.tuples(st.integers(0, 6), st.integers(0, 60)), max_size=4),  # acks: (worker, tuples acked)
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=80, deadline=None)
@given(
    params=st.sampled_from([{}, {"points": 3, "slots": 16}, {"points": 5, "slots": 200}, {"points": 1, "slots": 2}]),
    start=st.integers(1, 7),
    steps=steps,
)
def test_matches_the_plain_version_tuple_for_tuple_through_resizes_and_acks(params, start, steps):
    compiled, plain = groupings.make("key_shared", start, **params), py_grouping("key_shared", start, **params)
    for t, (n, keys, acks) in enumerate(steps):
        acks = [(w % compiled.workers, a) for w, a in acks]
        report = AckReport.of([w for w, _ in acks], acked=[a for _, a in acks], now=float(t))
        for g in (compiled, plain):
            g.feedback(report)
        assert np.array_equal(compiled.route(keys), plain.route(keys)), t
        for g in (compiled, plain):
            g.resize(n)
    tail = (np.arange(60, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    assert np.array_equal(compiled.route(tail), plain.route(tail))
