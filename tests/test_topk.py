"""Top-k: SpaceSaving guarantees per summary and after merging, and the heavy hitters of a split Zipf stream."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import operators
from groupings.spacesaving import SpaceSaving
from operators.base import Operator
from operators.topk import TopK, TopKState

keys_strategy = st.lists(st.integers(min_value=0, max_value=25), max_size=60).map(
    lambda xs: np.array(xs, dtype=np.uint64)
)


def _zipf_keys(z: float, keys: int, messages: int, seed: int) -> np.ndarray:
    """Key hashes of a bounded Zipf stream (rank r drawn with probability proportional to r^-z)."""
    cdf = np.cumsum(np.arange(1, keys + 1, dtype=np.float64) ** -z)
    ranks = np.searchsorted(cdf / cdf[-1], np.random.default_rng(seed).random(messages), side="right") + 1
    # an odd multiplier is a bijection on 64-bit words: distinct ranks get distinct, well-spread hashes
    return ranks.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def _check_guarantees(op: TopK, state: TopKState, keys: np.ndarray) -> None:
    """Every key's true count lies in [g, g + e], and e is within the mergeable-summary bound."""
    assert state.tuples == keys.size
    universe, true = np.unique(keys, return_counts=True)
    estimate = op.estimate(state, universe)
    assert np.all(estimate >= true)
    assert np.all(estimate - true <= state.error)
    assert op.distinct_keys(state) <= op.counters
    # Agarwal et al.: e <= (n - sum of g) / (counters + 1), hence below n / counters
    assert state.error * (op.counters + 1) <= keys.size - int(state.lower.sum())
    assert state.error <= keys.size / op.counters


def _same(a: TopKState, b: TopKState) -> bool:
    """True if the two summaries are identical, not just equal within their bounds."""
    return (
        np.array_equal(a.keys, b.keys)
        and np.array_equal(a.lower, b.lower)
        and (a.tuples, a.error) == (b.tuples, b.error)
    )


def test_registry_and_parameters() -> None:
    assert {"wordcount", "naivebayes", "topk"} <= set(operators.names())
    op = operators.make("topk", k=5)
    assert isinstance(op, TopK) and (op.k, op.counters) == (5, 1000)
    assert operators.make("topk", k="3", counters="1e4").counters == 10_000
    for params in ({"kk": 5}, {"k": 0}, {"k": 2.5}, {"k": 20, "counters": 10}, {"counters": "many"}):
        with pytest.raises(ValueError) as info:
            operators.make("topk", **params)
        assert "\n" not in str(info.value) and str(info.value).startswith("topk")


def test_a_batch_of_one_is_a_spacesaving_update() -> None:
    # Agarwal et al.: SpaceSaving with c + 1 counters, less its least count, is Misra-Gries with c counters
    rng = np.random.default_rng(0)
    for _ in range(100):
        counters = int(rng.integers(1, 8))
        keys = rng.integers(0, int(rng.integers(2, 20)), int(rng.integers(0, 150))).astype(np.uint64)
        reference, state = SpaceSaving(counters + 1), TopKState(counters)
        for key in keys:
            reference.offer(np.array([key], dtype=np.uint64))
            state.add(np.array([key], dtype=np.uint64))
            state.compact()
        items = reference.items()
        least = min(count for count, _ in items.values()) if len(items) == counters + 1 else 0
        expected = {key: count - least for key, (count, _) in items.items() if count > least}
        assert dict(zip(state.keys.tolist(), state.lower.tolist(), strict=True)) == expected
        assert state.error == least


@settings(max_examples=80, deadline=None)
@given(a=keys_strategy, b=keys_strategy, c=keys_strategy, counters=st.integers(min_value=1, max_value=30))
def test_merge_is_commutative_and_keeps_its_guarantees(a, b, c, counters) -> None:
    op = TopK(k=1, counters=counters)
    sa, sb, sc = (op.update(op.empty(), keys) for keys in (a, b, c))
    everything = np.concatenate([a, b, c])
    for state, keys in ((sa, a), (sb, b), (sc, c)):
        _check_guarantees(op, state, keys)
    left = op.merge([op.merge([sa, sb]), sc])
    right = op.merge([sa, op.merge([sb, sc])])
    flat = op.merge([sc, sa, sb])
    # the same summaries in any order merge to the identical summary
    assert _same(op.merge([sa, sb]), op.merge([sb, sa])) and _same(flat, op.merge([sb, sc, sa]))
    # any merge tree keeps the SpaceSaving guarantees for the whole input
    for state in (left, right, flat):
        _check_guarantees(op, state, everything)
    if np.unique(everything).size <= counters:
        # nothing was dropped, so every tree gives the exact counts
        assert _same(left, right) and _same(left, flat) and _same(left, op.exact(everything))
    assert _same(op.merge([sa, op.empty()]), sa) and _same(op.merge([sa]), sa)
    # merging leaves its inputs as they were
    assert _same(sa, op.update(op.empty(), a))


def test_error_bound_holds_per_worker_and_after_merging() -> None:
    op = TopK(k=10, counters=200)
    keys = _zipf_keys(1.0, 20_000, 200_000, seed=1)
    n = 8
    for worker in (np.arange(keys.size) % n, (keys % np.uint64(n)).astype(np.int64)):
        states = op.from_grouped(keys, worker, n)
        for w, state in enumerate(states):
            _check_guarantees(op, state, keys[worker == w])
        merged = op.merge(states)
        _check_guarantees(op, merged, keys)
        # the merged error is the sum of the partial errors plus what the merge itself dropped
        assert merged.error >= sum(s.error for s in states)
        # a tree of pairwise merges keeps the same bound
        pairs = [op.merge(states[i : i + 2]) for i in range(0, n, 2)]
        _check_guarantees(op, op.merge([op.merge(pairs[:2]), op.merge(pairs[2:])]), keys)


def test_many_small_updates_keep_the_guarantees() -> None:
    op = TopK(k=10, counters=500)
    keys = _zipf_keys(1.1, 50_000, 300_000, seed=2)
    state = op.empty()
    for i in range(0, keys.size, 997):
        state = op.update(state, keys[i : i + 997])
    _check_guarantees(op, state, keys)
    assert op.equal(state, op.exact(keys))


@pytest.mark.parametrize("z", [1.0, 1.2])
@pytest.mark.parametrize("n", [2, 4, 10])
def test_top_k_of_a_zipf_stream_split_across_workers(z: float, n: int) -> None:
    op = operators.make("topk", k=10, counters=10_000)
    keys = _zipf_keys(z, 100_000, 1_000_000, seed=3)
    exact = op.exact(keys)
    true_top = np.arange(1, 11, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    assert np.array_equal(op.top(exact)[0], true_top)  # the sample keeps the ranks of the law
    groupings = {"kg": (keys % np.uint64(n)).astype(np.int64), "sg": np.arange(keys.size) % n}
    for worker in groupings.values():
        merged = op.merge(op.from_grouped(keys, worker, n))
        assert op.equal(merged, exact)
        # counts 1/counters of the stream apart are told apart, in the right order
        assert np.array_equal(op.top(merged)[0], true_top)


def test_equal_compares_key_sets_and_count_intervals() -> None:
    op = TopK(k=2, counters=2)
    exact = op.exact(np.array([1, 1, 1, 2, 2, 3], dtype=np.uint64))
    assert op.top(exact)[0].tolist() == [1, 2] and op.top(exact)[1].tolist() == [3, 2]
    # a summary that had to drop a key (error bound 1) still reports the truth within its bound
    summary = op.update(op.empty(), np.array([3, 1, 1, 1, 2, 2], dtype=np.uint64))
    assert summary.error == 1
    assert op.equal(summary, exact) and op.equal(exact, summary)
    assert not op.equal(op.exact(np.array([1, 1, 1, 3, 3, 2], dtype=np.uint64)), exact)  # another top 2
    assert not op.equal(op.exact(np.array([1, 1, 2, 2, 2, 3], dtype=np.uint64)), exact)  # counts too far off
    assert not op.equal(op.merge([exact, op.exact(np.array([3], dtype=np.uint64))]), exact)  # an extra tuple
    # a summary whose interval [estimate - error, estimate] misses the true count is not equal
    off = TopKState(2, np.array([1, 2], dtype=np.uint64), np.array([1, 2]), tuples=6, error=1)
    assert not op.equal(off, exact)


def test_from_grouped_matches_the_generic_path() -> None:
    op = TopK(k=5, counters=300)
    keys = _zipf_keys(1.2, 10_000, 100_000, seed=4)
    worker = np.random.default_rng(5).integers(0, 5, keys.size)
    fast = op.from_grouped(keys, worker, 5)
    generic = Operator.from_grouped(op, keys, worker, 5)
    assert all(_same(x, y) for x, y in zip(fast, generic, strict=True))
    with pytest.raises(ValueError, match="entries for"):
        op.from_grouped(keys[:3], worker[:2], 5)


def test_summary_sizes_and_pickling() -> None:
    op = operators.make("topk", k=2, counters=3)
    # four keys for three counters: the 4th largest count (1) is subtracted and becomes the error bound
    state = op.update(op.empty(), np.array([7, 7, 7, 8, 8, 9, 10], dtype=np.uint64))
    assert state.keys.tolist() == [7, 8] and state.lower.tolist() == [2, 1] and state.error == 1
    assert op.distinct_keys(state) == 2 and op.state_size_bytes(state) == 2 * 16
    assert op.summary(state) == {
        "distinct_keys": 2,
        "state_bytes": 32,
        "tuples": 7,
        "error_bound": 1,
        "top": [[7, 3], [8, 2]],
    }
    assert op.estimate(state, np.array([7, 10, 11], dtype=np.uint64)).tolist() == [3, 1, 1]
    copy = pickle.loads(pickle.dumps(state))
    assert _same(copy, state)
    op.update(copy, np.array([11], dtype=np.uint64))
    assert copy.tuples == 8 and state.tuples == 7
    assert op.distinct_keys(op.empty()) == 0 and op.top(op.empty())[0].size == 0
