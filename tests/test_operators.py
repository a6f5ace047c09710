"""Operators: the registry and word count's mergeable state."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import operators
from operators.base import Operator, group_by_worker
from operators.wordcount import WordCount, WordCountState

keys_strategy = st.lists(st.integers(min_value=0, max_value=30), max_size=60).map(
    lambda xs: np.array(xs, dtype=np.uint64)
)


@pytest.fixture
def wc() -> WordCount:
    return operators.make("wordcount")


def test_registry() -> None:
    assert "wordcount" in operators.names()
    assert isinstance(operators.make("wordcount"), Operator)
    with pytest.raises(ValueError, match="unknown operator 'nope'"):
        operators.make("nope")


def _state(op: WordCount, keys: np.ndarray) -> WordCountState:
    return op.update(op.empty(), keys)


@settings(max_examples=80, deadline=None)
@given(a=keys_strategy, b=keys_strategy, c=keys_strategy)
def test_merge_is_associative_and_commutative(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    op = WordCount()
    sa, sb, sc = _state(op, a), _state(op, b), _state(op, c)
    left = op.merge([op.merge([sa, sb]), sc])
    right = op.merge([sa, op.merge([sb, sc])])
    assert op.equal(left, right)
    assert op.equal(left, op.merge([sc, sa, sb]))
    assert op.equal(op.merge([sa, sb]), op.merge([sb, sa]))
    assert op.equal(left, op.exact(np.concatenate([a, b, c])))
    assert op.equal(op.merge([sa, op.empty()]), sa) and op.equal(op.merge([sa]), sa)
    # merging leaves its inputs as they were
    assert op.equal(sa, op.exact(a)) and op.equal(sb, op.exact(b))


def test_counts_and_sizes(wc: WordCount) -> None:
    state = wc.update(wc.empty(), np.array([5, 3, 5, 9, 5], dtype=np.uint64))
    assert state.keys.tolist() == [3, 5, 9] and state.counts.tolist() == [1, 3, 1]
    assert wc.distinct_keys(state) == 3 and wc.state_size_bytes(state) == 3 * 16
    assert wc.count_of(state, np.array([5, 4, 9, 100], dtype=np.uint64)).tolist() == [3, 0, 1, 0]
    assert wc.count_of(wc.empty(), np.array([1], dtype=np.uint64)).tolist() == [0]
    assert wc.summary(state) == {"distinct_keys": 3, "state_bytes": 48, "tuples": 5}
    assert wc.distinct_keys(wc.empty()) == 0 and wc.equal(wc.empty(), wc.merge([]))


def test_many_small_updates_equal_the_exact_result(wc: WordCount) -> None:
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 50_000, 300_000).astype(np.uint64)
    state = wc.empty()
    for i in range(0, keys.size, 1000):
        state = wc.update(state, keys[i : i + 1000])
    assert wc.equal(state, wc.exact(keys))


def test_update_copies_the_batch(wc: WordCount) -> None:
    batch = np.array([1, 2], dtype=np.uint64)
    state = wc.update(wc.empty(), batch)
    batch[:] = 7
    assert state.keys.tolist() == [1, 2]


def test_from_grouped_merges_to_the_exact_result(wc: WordCount) -> None:
    rng = np.random.default_rng(2)
    keys = (rng.zipf(1.5, 200_000) % 5000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    worker = rng.integers(0, 7, keys.size)
    states = wc.from_grouped(keys, worker, 7)
    assert len(states) == 7
    for w in range(7):
        assert wc.equal(states[w], wc.exact(keys[worker == w]))
    # the generic per-worker path of the protocol gives the same states
    generic = Operator.from_grouped(wc, keys, worker, 7)
    assert all(wc.equal(x, y) for x, y in zip(states, generic, strict=True))
    assert wc.equal(wc.merge(states), wc.exact(keys))
    assert sum(wc.distinct_keys(s) for s in states) >= wc.distinct_keys(wc.exact(keys))


def test_from_grouped_with_idle_workers(wc: WordCount) -> None:
    states = wc.from_grouped(np.array([4, 4, 8], dtype=np.uint64), np.array([2, 2, 2]), 4)
    assert [wc.distinct_keys(s) for s in states] == [0, 0, 2, 0]


def test_wrong_states_are_detected(wc: WordCount) -> None:
    keys = np.array([1, 2, 2, 3, 3, 3], dtype=np.uint64)
    exact = wc.exact(keys)
    assert not wc.equal(wc.exact(keys[1:]), exact)  # a lost tuple
    assert not wc.equal(wc.exact(np.append(keys, 4)), exact)  # an extra key
    assert not wc.equal(wc.exact(np.append(keys[:-1], 2)), exact)  # a tuple counted under the wrong key
    doubled = wc.merge([wc.exact(keys[:3]), wc.exact(keys[:3]), wc.exact(keys[3:])])
    assert not wc.equal(doubled, exact)  # a partial state merged twice


def test_group_by_worker_checks_its_input() -> None:
    order, offsets = group_by_worker(np.array([1, 0, 1, 0]), 3)
    assert order.tolist() == [1, 3, 0, 2] and offsets.tolist() == [0, 2, 4, 4]
    assert group_by_worker(np.array([70_000, 1]), 70_001)[0].tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"in \[0, 2\)"):
        group_by_worker(np.array([0, 2]), 2)
    with pytest.raises(ValueError):
        group_by_worker(np.array([0]), 0)
    with pytest.raises(ValueError, match="entries for"):
        WordCount().from_grouped(np.array([1, 2], dtype=np.uint64), np.array([0]), 1)


@pytest.mark.parametrize("name", ["wordcount", "topk", "naivebayes"])
def test_key_copies_are_the_routings_whichever_way_they_are_counted(name):
    # an operator that holds every key it was sent counts key copies from its states; any other from the tuples:
    # both must give the routing's own counts (a worker that got nothing holds no key)
    from topo.results.outcome import operator_outcome

    rng = np.random.default_rng(3)
    keys = rng.zipf(1.3, 20_000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    worker = rng.integers(0, 6, keys.size)
    worker[worker == 4] = 5  # worker 4 gets nothing
    values = rng.integers(0, 3, keys.size) if name == "naivebayes" else None

    def chunks(cut, end=keys.size):  # the tuples `cut` at a time, as a run's log gives them
        return lambda: ((keys[a : min(a + cut, end)], worker[a : min(a + cut, end)],
                         None if values is None else values[a : min(a + cut, end)]) for a in range(0, end, cut))

    per_worker, total, exact = operator_outcome(name, chunks(keys.size), 7)
    pairs = np.unique(np.stack([keys, worker.astype(np.uint64)]), axis=1)  # the (key, worker) pairs routed
    assert (per_worker, total) == (np.bincount(pairs[1].astype(np.int64), minlength=7).tolist(), np.unique(keys).size)
    assert per_worker[4] == per_worker[6] == 0 and exact
    assert operator_outcome(name, chunks(997), 7) == (per_worker, total, exact)  # however the tuples are cut
    assert operator_outcome(name, chunks(10, end=0), 3)[:2] == ([0] * 3, 0)
    # the states judged a chunk at a time are the ones judged from the whole (a word count folds each chunk)
    op = operators.make(name)
    whole_states, whole = op.judge(chunks(keys.size)(), 7)
    states, exact_state = op.judge(chunks(1234)(), 7)
    assert all(op.equal(a, b) for a, b in zip(states, whole_states, strict=True)) and op.equal(exact_state, whole)


def test_a_word_count_checks_its_merge_without_building_it():
    op = WordCount()
    keys = np.array([5, 7, 7, 9, 9, 9], np.uint64)
    whole = op.exact(keys)
    states = op.from_grouped(keys, np.array([0, 1, 0, 1, 1, 0]), 3)
    assert op.merges_to(states, whole) and op.merges_to(states, whole) == op.equal(op.merge(states), whole)
    assert not op.merges_to(states, op.exact(keys[:-1]))  # a count off by one
    assert not op.merges_to([*states, op.exact(np.array([11], np.uint64))], whole)  # a key the whole never saw
    assert not op.merges_to([*states, op.exact(np.array([1], np.uint64))], whole)  # one below every key
    assert op.merges_to([], op.empty()) and not op.merges_to([], whole)
