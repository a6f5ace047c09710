"""Naive Bayes: counters per (feature value, class), exact after merging, and a model that predicts."""

from __future__ import annotations

import math
import pickle
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import operators
from operators.base import Operator
from operators.naivebayes import NaiveBayes, NaiveBayesState

# batches of (key, label) tuples; a few keys and labels so that pairs repeat across batches
batch_strategy = st.lists(
    st.tuples(st.integers(min_value=0, max_value=20), st.integers(min_value=-1, max_value=3)), max_size=50
).map(lambda xs: (np.array([k for k, _ in xs], dtype=np.uint64), np.array([c for _, c in xs], dtype=np.int64)))


def _direct(keys: np.ndarray, labels: np.ndarray) -> dict[tuple[int, int], int]:
    """The counters, one tuple at a time."""
    return dict(Counter(zip(keys.tolist(), labels.tolist(), strict=True)))


def _as_dict(state: NaiveBayesState) -> dict[tuple[int, int], int]:
    """The counters of a state as {(key, label): count}."""
    keys, labels, counts = (arr.tolist() for arr in state.table())
    return {(k, c): n for k, c, n in zip(keys, labels, counts, strict=True)}


@pytest.fixture
def nb() -> NaiveBayes:
    return operators.make("naivebayes")


def test_registry_lists_all_operators() -> None:
    assert {"wordcount", "naivebayes", "topk"} <= set(operators.names())
    assert isinstance(operators.make("naivebayes"), Operator)
    assert operators.make("naivebayes", classes="3", alpha="0.5").classes == 3
    assert operators.parameters("naivebayes") == {"classes": 2, "alpha": 1.0}
    for name, params in [
        ("naivebayes", {"clases": 3}),
        ("naivebayes", {"classes": 0}),
        ("naivebayes", {"classes": "two"}),
        ("naivebayes", {"alpha": -1.0}),
        ("wordcount", {"classes": 2}),
    ]:
        with pytest.raises(ValueError) as info:
            operators.make(name, **params)
        assert "\n" not in str(info.value) and str(info.value).startswith(name)


def test_counts_against_a_direct_count(nb: NaiveBayes) -> None:
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 300, 20_000).astype(np.uint64)
    labels = rng.integers(0, 3, keys.size)
    state = nb.exact(keys, labels)
    assert _as_dict(state) == _direct(keys, labels)
    order = np.lexsort((state.labels, state.keys))
    assert np.array_equal(order, np.arange(order.size))  # sorted by key, then label
    assert nb.distinct_keys(state) == np.unique(keys).size
    assert nb.state_size_bytes(state) == 24 * len(_direct(keys, labels))
    classes, totals = state.class_totals()
    assert classes.tolist() == [0, 1, 2] and totals.tolist() == np.bincount(labels).tolist()
    assert nb.summary(state) == {
        "distinct_keys": nb.distinct_keys(state),
        "state_bytes": nb.state_size_bytes(state),
        "tuples": keys.size,
        "pairs": state.keys.size,
        "classes": 3,
    }


def test_labels_far_apart_take_the_general_path(nb: NaiveBayes) -> None:
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 50, 5000).astype(np.uint64)
    labels = rng.choice(np.array([-7, 0, 1000, 2**40]), keys.size)
    assert _as_dict(nb.exact(keys, labels)) == _direct(keys, labels)
    assert _as_dict(nb.exact(keys, labels.astype(np.float64))) == _direct(keys, labels)


def test_streams_without_values_take_the_class_from_the_key_hash() -> None:
    op = operators.make("naivebayes", classes=3)
    keys = np.array([10, 11, 12, 10, 14, 11], dtype=np.uint64)
    state = op.exact(keys)
    assert op.equal(state, op.exact(keys, (keys % np.uint64(3)).astype(np.int64)))
    assert _as_dict(state) == {(10, 1): 2, (11, 2): 2, (12, 0): 1, (14, 2): 1}
    # with a few tuples per feature value the evidence outweighs the prior of the larger class
    repeated = op.exact(np.repeat(keys, 5))
    assert op.predict(repeated, keys).tolist() == (keys % np.uint64(3)).tolist()


@settings(max_examples=80, deadline=None)
@given(a=batch_strategy, b=batch_strategy, c=batch_strategy)
def test_merge_is_associative_and_commutative(a, b, c) -> None:
    op = NaiveBayes()
    sa, sb, sc = (op.exact(*batch) for batch in (a, b, c))
    left = op.merge([op.merge([sa, sb]), sc])
    right = op.merge([sa, op.merge([sb, sc])])
    assert op.equal(left, right) and op.equal(left, op.merge([sc, sa, sb]))
    assert op.equal(op.merge([sa, sb]), op.merge([sb, sa]))
    everything = op.exact(*(np.concatenate(col) for col in zip(a, b, c, strict=True)))
    assert op.equal(left, everything)
    assert op.equal(op.merge([sa, op.empty()]), sa) and op.equal(op.merge([sa]), sa)
    assert op.equal(op.merge([]), op.empty())
    # merging leaves its inputs as they were
    assert op.equal(sa, op.exact(*a)) and op.equal(sb, op.exact(*b))


def test_many_small_updates_equal_the_exact_result(nb: NaiveBayes) -> None:
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 40_000, 300_000).astype(np.uint64)
    labels = (keys % np.uint64(2)).astype(np.int64)
    given = (np.arange(keys.size) // 1000) % 2 == 1
    labels[given & (rng.random(keys.size) < 0.2)] = 5
    state = nb.empty()
    for i in range(0, keys.size, 1000):
        # every other batch comes without values and so gets the label derived from its key
        state = nb.update(state, keys[i : i + 1000], labels[i : i + 1000] if given[i] else None)
    assert nb.equal(state, nb.exact(keys, labels))


def test_update_copies_the_batch(nb: NaiveBayes) -> None:
    keys, labels = np.array([1, 2], dtype=np.uint64), np.array([0, 1])
    state = nb.update(nb.empty(), keys, labels)
    keys[:], labels[:] = 7, 0
    assert _as_dict(state) == {(1, 0): 1, (2, 1): 1}


def test_bad_labels_are_refused(nb: NaiveBayes) -> None:
    keys = np.array([1, 2], dtype=np.uint64)
    for values in (np.array([0.5, 1.0]), np.array(["a", "b"]), np.array([0, 1, 1]), np.array([np.nan, 1.0])):
        with pytest.raises(ValueError, match="naivebayes"):
            nb.update(nb.empty(), keys, values)


def test_from_grouped_merges_to_the_exact_result(nb: NaiveBayes) -> None:
    rng = np.random.default_rng(3)
    keys = (rng.zipf(1.5, 200_000) % 5000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    labels = rng.integers(0, 4, keys.size)
    worker = rng.integers(0, 7, keys.size)
    for values in (labels, None):
        states = nb.from_grouped(keys, worker, 7, values)
        for w in range(7):
            expected = nb.exact(keys[worker == w], None if values is None else values[worker == w])
            assert nb.equal(states[w], expected)
        generic = Operator.from_grouped(nb, keys, worker, 7, values)
        assert all(nb.equal(x, y) for x, y in zip(states, generic, strict=True))
        assert nb.equal(nb.merge(states), nb.exact(keys, values))
    with pytest.raises(ValueError, match="entries for"):
        nb.from_grouped(keys[:2], worker[:1], 7)


def test_wrong_states_are_detected(nb: NaiveBayes) -> None:
    keys = np.array([1, 2, 2, 3, 3, 3], dtype=np.uint64)
    labels = np.array([0, 0, 1, 1, 1, 1])
    exact = nb.exact(keys, labels)
    assert not nb.equal(nb.exact(keys[1:], labels[1:]), exact)  # a lost tuple
    assert not nb.equal(nb.exact(keys, np.array([0, 0, 1, 1, 1, 0])), exact)  # a tuple under the wrong class
    doubled = nb.merge([exact, nb.exact(keys[:1], labels[:1])])
    assert not nb.equal(doubled, exact)  # a partial state merged twice


def test_log_scores_follow_laplace_smoothing(nb: NaiveBayes) -> None:
    # feature 1 seen 3 times in class 0, feature 2 once in class 0 and twice in class 1
    keys = np.array([1, 1, 1, 2, 2, 2], dtype=np.uint64)
    state = nb.exact(keys, np.array([0, 0, 0, 0, 1, 1]))
    classes, scores = nb.log_scores(state, np.array([1, 2, 9], dtype=np.uint64))
    assert classes.tolist() == [0, 1]
    vocabulary, alpha = 2, 1.0
    expected = [
        [math.log(4 / 6) + math.log((3 + alpha) / (4 + alpha * vocabulary)), math.log(2 / 6) + math.log(alpha / 4)],
        [math.log(4 / 6) + math.log((1 + alpha) / 6), math.log(2 / 6) + math.log((2 + alpha) / 4)],
        [math.log(4 / 6) + math.log(alpha / 6), math.log(2 / 6) + math.log(alpha / 4)],
    ]
    assert np.allclose(scores, expected)
    assert nb.predict(state, np.array([1, 2, 9], dtype=np.uint64)).tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="no tuple"):
        nb.predict(nb.empty(), keys)


def test_the_merged_model_predicts_the_training_classes() -> None:
    rng = np.random.default_rng(4)
    op = operators.make("naivebayes", classes=3)
    ranks = np.minimum(rng.zipf(1.3, 300_000), 5000)
    keys = ranks.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    truth = ranks % 3
    # one label in ten is noise
    labels = np.where(rng.random(keys.size) < 0.1, rng.integers(0, 3, keys.size), truth)
    worker = np.arange(keys.size) % 4  # shuffle grouping: every worker holds a partial count of every key
    merged = op.merge(op.from_grouped(keys, worker, 4, labels))
    assert op.equal(merged, op.exact(keys, labels))
    assert np.mean(op.predict(merged, keys) == labels) > 0.9
    assert np.mean(op.predict(merged, keys) == truth) > 0.99


def test_states_survive_pickling(nb: NaiveBayes) -> None:
    state = nb.update(nb.empty(), np.array([3, 4, 3], dtype=np.uint64), np.array([0, 1, 0]))
    copy = pickle.loads(pickle.dumps(state))
    assert nb.equal(copy, state)
    nb.update(copy, np.array([5], dtype=np.uint64))
    assert nb.distinct_keys(copy) == 3 and nb.distinct_keys(state) == 2
