"""SpaceSaving: the guarantees of Metwally et al. and the deterministic O(1) counter layout."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupings import SpaceSaving, keytable
from groupings.reference import PySpaceSaving


def zipf_items(z: float, n_keys: int, messages: int, seed: int) -> np.ndarray:
    """Ranks of a bounded Zipf stream, spread over 64 bits."""
    pmf = np.arange(1, n_keys + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(pmf / pmf.sum())
    ranks = np.minimum(np.searchsorted(cdf, np.random.default_rng(seed).random(messages), side="right"), n_keys - 1)
    return ranks.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def check_guarantees(items: np.ndarray, k: int) -> SpaceSaving:
    ss = SpaceSaving(k)
    ss.offer(items)
    m = items.size
    truth = Counter(items.tolist())
    monitored = ss.items()
    assert len(monitored) == min(k, len(truth))
    assert sum(c for c, _ in monitored.values()) == m  # every item adds one to exactly one counter
    for key, count in truth.items():
        if count > m / k:
            assert key in monitored  # every key above m/k is caught
        estimate = ss.estimate(key)
        if key in monitored:
            est, err = monitored[key]
            assert count <= est <= count + m / k  # overestimates, by at most m/k
            assert est - err <= count  # the recorded error bounds the overestimate
        else:
            assert estimate == 0 and count <= m / k
    return ss


@pytest.mark.parametrize("k", [1, 2, 10, 100, 1000])
@pytest.mark.parametrize("z", [0.6, 1.0, 1.5])
def test_guarantees_on_zipf_streams(k, z):
    check_guarantees(zipf_items(z, 5000, 20_000, seed=k), k)


@settings(max_examples=80, deadline=None)
@given(items=st.lists(st.integers(0, 40), min_size=0, max_size=500), k=st.integers(1, 30))
def test_guarantees_on_any_stream(items, k):
    check_guarantees(np.array(items, dtype=np.uint64), k)


def test_keys_colliding_in_the_index_are_kept_apart():
    # identical low bits and identical Fibonacci home slots stress the probing and backward-shift deletion
    items = np.repeat(np.arange(50, dtype=np.uint64) << np.uint64(40), 3)
    np.random.default_rng(0).shuffle(items)
    check_guarantees(np.tile(items, 4), 8)


def test_the_index_holds_exactly_the_monitored_keys_after_evictions():
    items = zipf_items(0.8, 4000, 20_000, seed=3)
    ss = SpaceSaving(100)
    for part in np.array_split(items, 10):
        ss.offer(part)
        s = ss.summary
        used = np.flatnonzero(s.counts)
        assert all(keytable.find(s.table, s.keys, s.keys[slot]) == slot for slot in used)
        assert int((s.table >= 0).sum()) == used.size


def test_same_state_as_the_plain_version():
    items = zipf_items(1.1, 3000, 30_000, seed=9)
    ss, plain = SpaceSaving(64), PySpaceSaving(64)
    ss.offer(items)
    for key in items.tolist():
        plain.offer(key)
    assert ss.summary.order.tolist() == plain.order
    assert ss.summary.counts.tolist() == plain.counts
    plain_items = {plain.keys[s]: plain.counts[s] for s in plain.slot_of.values()}
    assert {k: c for k, (c, _) in ss.items().items()} == plain_items


def test_offering_in_pieces_equals_offering_at_once():
    items = zipf_items(1.0, 1000, 5000, seed=2)
    a, b = SpaceSaving(50), SpaceSaving(50)
    a.offer(items)
    for piece in np.array_split(items, 7):
        b.offer(piece)
    assert all(np.array_equal(x, y) for x, y in zip(a.summary, b.summary, strict=True))


def test_counters_stay_sorted_by_count():
    ss = SpaceSaving(40)
    ss.offer(zipf_items(0.9, 2000, 10_000, seed=4))
    s = ss.summary
    assert np.all(np.diff(s.counts[s.order]) >= 0)
    assert np.array_equal(s.pos[s.order], np.arange(40))


def test_heavy_hitters_and_seen():
    items = np.array([1] * 50 + [2] * 30 + list(range(3, 23)), dtype=np.uint64)
    ss = SpaceSaving(10)
    ss.offer(items)
    assert ss.seen == 100 and ss.capacity == 10
    assert set(ss.heavy_hitters(0.25)) == {1, 2}
    with pytest.raises(ValueError):
        ss.heavy_hitters(0.0)


@pytest.mark.parametrize("capacity", [0, -3, 2.5])
def test_bad_capacity(capacity):
    with pytest.raises(ValueError):
        SpaceSaving(capacity)
