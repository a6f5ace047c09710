"""Lossy counting: Manku-Motwani's guarantees, and Gedik's sliding window of staggered counters."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupings import keytable
from groupings.lossy import SIZE, LossyCounter, SlidingLossyCounter, merged

_SPREAD = np.uint64(0x9E3779B97F4A7C15)


def zipf_items(z: float, n_keys: int, messages: int, seed: int) -> np.ndarray:
    """Ranks of a bounded Zipf stream, spread over 64 bits."""
    pmf = np.arange(1, n_keys + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(pmf / pmf.sum())
    ranks = np.minimum(np.searchsorted(cdf, np.random.default_rng(seed).random(messages), side="right"), n_keys - 1)
    return ranks.astype(np.uint64) * _SPREAD


def check_guarantees(items: np.ndarray, eps: float, support: float) -> LossyCounter:
    lc = LossyCounter(eps)
    lc.offer(items)
    n = items.size
    assert lc.seen == n
    truth = Counter(items.tolist())
    e = lc.entries()
    held = dict(zip(e.keys.tolist(), e.counts.tolist(), strict=True))
    reported = lc.frequent(support)
    for key, count in truth.items():
        if count > lc.eps * n:
            assert key in held  # every key above eps*n is held
        if key in held:
            assert count - lc.eps * n <= held[key] <= count  # undercount at most eps*n, never over
        if count >= support * n:
            assert key in reported  # every key of true frequency >= support is reported
    for key in reported:
        assert truth[key] >= (support - lc.eps) * n  # and nothing much below it
    return lc


@pytest.mark.parametrize("z", [0.5, 1.0, 1.5])
@pytest.mark.parametrize("eps", [0.01, 0.002])
def test_guarantees_on_zipf_streams(z, eps):
    lc = check_guarantees(zipf_items(z, 20_000, 50_000, seed=int(z * 10)), eps, support=10 * eps)
    # space: at most (1/eps) log(eps n) entries after a window closes, plus the window being filled
    assert lc.entries().keys.size <= (1 / eps) * (math.log(eps * lc.seen) + 1) + 1 / eps


@settings(max_examples=80, deadline=None)
@given(items=st.lists(st.integers(0, 30), max_size=400), eps=st.sampled_from([0.5, 0.2, 0.1, 0.05]))
def test_guarantees_on_any_stream(items, eps):
    check_guarantees(np.array(items, dtype=np.uint64) * _SPREAD, eps, support=min(1.0, 2 * eps))


def test_window_boundary_evicts_by_count_plus_error():
    lc = LossyCounter(0.25)  # windows of 4 items
    lc.offer(np.array([1, 1, 2, 3], dtype=np.uint64))  # window 1 closes: 2 and 3 (1 + 0 <= 1) leave
    assert lc.estimate(1) == 2 and lc.estimate(2) == 0 and lc.estimate(3) == 0
    lc.offer(np.array([5], dtype=np.uint64))  # enters in window 2 with error 1
    e = lc.entries()
    assert dict(zip(e.keys.tolist(), e.errors.tolist(), strict=True)) == {1: 0, 5: 1}


def test_growth_and_batching_do_not_change_the_counts():
    items = zipf_items(1.0, 5_000, 20_000, seed=2)
    small = LossyCounter(0.001, capacity=1)
    for part in np.array_split(items, 37):
        small.offer(part)
    big = LossyCounter(0.001, capacity=100_000)
    big.offer(items)
    a, b = small.entries(), big.entries()
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.counts, b.counts)
    assert np.array_equal(a.errors, b.errors)


@pytest.mark.parametrize("counters", [2, 3, 5])
def test_sliding_window_reads_the_latest_w_to_w_plus_a_stride(counters):
    window = 1_200
    items = zipf_items(1.0, 500, 9_000, seed=counters)
    sliding = SlidingLossyCounter(window, 0.01, counters=counters)
    stride = math.ceil(window / (counters - 1))
    for j in range(0, items.size, 250):
        sliding.offer(items[j : j + 250])
        n = j + 250
        if n >= window:
            assert window <= sliding.seen <= window + stride  # between W and (1 + 1/(x-1)) W
        else:
            assert sliding.seen == n  # the young stream: everything so far
        # the active counter is plain lossy counting over exactly the latest `seen` items
        plain = LossyCounter(0.01)
        plain.offer(items[n - sliding.seen : n])
        a, b = sliding.entries(), plain.entries()
        assert np.array_equal(a.keys, b.keys) and np.array_equal(a.counts, b.counts)


def test_each_counters_index_finds_exactly_its_entries():
    """Windows close, counters grow and restart, each on its own row of the index."""
    items = zipf_items(1.1, 3_000, 20_000, seed=6)
    sliding = SlidingLossyCounter(3_000, 0.005, counters=3, capacity=8)
    absent = np.arange(1, 200, dtype=np.uint64)  # not in the stream: its keys are ranks times a large odd number
    for part in np.array_split(items, 9):
        sliding.offer(part)
        c = sliding.lossy
        for r in range(c.keys.shape[0]):
            size = int(c.meta[r, SIZE])
            for e in range(size):
                assert keytable.find(c.table[r], c.keys[r], c.keys[r, e]) == e
            assert all(keytable.find(c.table[r], c.keys[r], k) == keytable.EMPTY for k in absent)
            assert int((c.table[r] >= 0).sum()) == size


def test_sliding_window_forgets_the_old_distribution():
    old = np.full(5_000, 7, dtype=np.uint64)
    new = zipf_items(1.0, 100, 5_000, seed=1) + np.uint64(1)
    sliding = SlidingLossyCounter(2_000, 0.01)
    sliding.offer(np.concatenate([old, new]))
    assert sliding.seen <= 3_000 and 7 not in sliding.entries().keys.tolist()
    top = Counter(new[-sliding.seen :].tolist()).most_common(1)[0][0]
    assert top in sliding.frequent(0.05)


def test_new_eps_applies_when_each_counter_restarts():
    sliding = SlidingLossyCounter(1_000, 0.1)
    sliding.offer(np.arange(100, dtype=np.uint64))
    sliding.set_eps(0.01)
    assert sliding.entries().width == 10  # the running counters keep their error
    sliding.offer(np.arange(1_900, dtype=np.uint64))
    assert sliding.entries().width == 10  # counter 0 restarted at 1 500, but counter 2 is still the oldest
    sliding.offer(np.arange(600, dtype=np.uint64))  # 2 600 items: counter 0 is the oldest again
    assert sliding.entries().width == 100


def test_merged_counters_sum_counts_and_bound_the_undercount():
    items = zipf_items(1.0, 2_000, 30_000, seed=4)
    parts = []
    for half in np.array_split(items, 2):
        lc = LossyCounter(0.002)
        lc.offer(half)
        parts.append(lc.entries())
    keys, counts, seen, under = merged(parts)
    assert seen == items.size and under == pytest.approx(items.size * 0.002)
    truth = Counter(items.tolist())
    for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
        assert truth[key] - under <= count <= truth[key]
    for key, count in truth.items():
        if count > under:
            assert key in set(keys.tolist())


@pytest.mark.parametrize(
    "make",
    [
        lambda: LossyCounter(0),
        lambda: LossyCounter(1.5),
        lambda: SlidingLossyCounter(100, 0.1, counters=1),
        lambda: SlidingLossyCounter(0, 0.1, counters=3),
    ],
)
def test_bad_settings_are_refused(make):
    with pytest.raises(ValueError):
        make()
