"""pkg's two modes: the paper's choices, which may coincide, and Storm's PartialKeyGrouping, which forces them apart."""

from __future__ import annotations

import numpy as np
import pytest

import groupings
from groupings.hashing import seeded_hashes
from groupings.reference import py_grouping

KEYS = groupings.hash_keys([f"key{i}" for i in range(2000)])


def test_defaults_are_the_papers_two_choices():
    assert groupings.make("pkg", 4).params == {"distinct": False, "choices": 2}
    assert groupings.make("pkg", 4, distinct="true", choices="3").params == {"distinct": True, "choices": 3}
    with pytest.raises(ValueError, match="choices"):
        groupings.make("pkg", 4, choices=0)


def test_with_two_workers_a_key_whose_hashes_coincide_stays_put_unless_storm_forces_them_apart():
    f1, f2 = seeded_hashes(KEYS, 1, 2), seeded_hashes(KEYS, 2, 2)
    key = KEYS[np.flatnonzero((f1 == 0) & (f2 == 0))[0]]  # "key0": F_1 = F_2 = worker 0
    four = np.full(4, key, dtype=np.uint64)
    assert groupings.make("pkg", 2).route(four).tolist() == [0, 0, 0, 0]  # the paper's code
    assert groupings.make("pkg", 2, distinct=True).route(four).tolist() == [0, 1, 0, 1]  # Storm's test: alternates


def test_storm_mode_alternates_between_two_workers_for_every_key():
    # Storm's PartialKeyGroupingTest: with 6 tasks one key goes to one task, then another, then the first again
    for key in KEYS[:300]:
        out = groupings.make("pkg", 6, distinct=True).route(np.full(3, key, dtype=np.uint64)).tolist()
        assert out[1] != out[0] and out[2] == out[0]
    coincide = np.flatnonzero(seeded_hashes(KEYS, 1, 6) == seeded_hashes(KEYS, 2, 6))
    assert coincide.size  # about 1 key in 6, which the paper's code sends to one worker only
    out = groupings.make("pkg", 6).route(np.full(3, KEYS[coincide[0]], dtype=np.uint64))
    assert np.unique(out).size == 1


@pytest.mark.parametrize("n, d", [(5, 3), (4, 4), (3, 7)])
def test_storm_mode_with_more_choices_reaches_min_d_n_workers(n, d):
    for key in KEYS[:200]:
        out = groupings.make("pkg", n, distinct=True, choices=d).route(np.full(2 * n, key, dtype=np.uint64))
        assert np.unique(out).size == min(d, n)


MODES = [{}, {"distinct": True}, {"choices": 3}, {"distinct": True, "choices": 3}, {"distinct": True, "choices": 9}]


@pytest.mark.parametrize("params", MODES)
def test_kernel_equals_plain_python_through_resizes(params):
    rng = np.random.default_rng(3)
    keys = KEYS[np.minimum(rng.zipf(1.3, 20_000) - 1, KEYS.size - 1)]
    compiled, plain = groupings.make("pkg", 8, seed=2, **params), py_grouping("pkg", 8, seed=2, **params)
    for chunk, n in zip(np.array_split(keys, 8), [8, 2, 1, 5, 12, 3, 3, 9], strict=True):
        compiled.resize(n)
        plain.resize(n)
        assert np.array_equal(compiled.route(chunk), plain.route(chunk)), (params, n)
