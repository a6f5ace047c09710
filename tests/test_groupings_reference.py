"""The compiled code routes exactly like the plain per-tuple Python versions of the same algorithms."""

from __future__ import annotations

import numpy as np
import pytest

import groupings
from groupings.compiled.grouping import STRATEGIES
from groupings.feedback import AckReport
from groupings.hashing import seeded_hashes
from groupings.reference import REFERENCE_NAMES, PyGrouping, bucket, mix64, optimal_choices, py_grouping


def zipf_keys(z: float, n_keys: int, messages: int, seed: int) -> np.ndarray:
    """Key hashes of a bounded Zipf stream (inverse CDF over ranks)."""
    pmf = np.arange(1, n_keys + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(pmf / pmf.sum())
    ranks = np.minimum(np.searchsorted(cdf, np.random.default_rng(seed).random(messages), side="right"), n_keys - 1)
    return groupings.hash_keys([f"key{i}" for i in range(n_keys)])[ranks]


def test_plain_hash_family_matches_the_compiled_one():
    keys = zipf_keys(0.8, 500, 500, seed=1)
    for salt in (1, 2, 7):
        expected = seeded_hashes(keys, salt, 13)
        assert [bucket(mix64(int(k), salt), 13) for k in keys] == expected.tolist()


def test_every_plain_version_is_registered():
    assert set(REFERENCE_NAMES) <= set(groupings.names())


def test_every_compiled_strategy_has_a_plain_version():
    # a strategy added to the catalogue is compared with its plain per-tuple version below, or this fails
    assert set(STRATEGIES) <= set(REFERENCE_NAMES)


@pytest.mark.parametrize("name", REFERENCE_NAMES)
@pytest.mark.parametrize("n, z", [(3, 1.0), (10, 1.2), (50, 1.6)])
def test_kernel_equals_plain_python(name, n, z):
    keys = zipf_keys(z, 3000, 12_000, seed=n)
    params = {"eps": 0.05} if name in ("porc", "chbl") else {}
    compiled = groupings.make(name, n, seed=4, **params).route(keys)
    plain = py_grouping(name, n, seed=4, **params).route(keys)
    assert np.array_equal(compiled, plain)


VARIANTS = [(name, {"eps": 0.05} if name in ("porc", "chbl") else {}) for name in REFERENCE_NAMES] + [
    ("lasg", {"weights": "linear", "refresh": 0.2}),
    ("lasg", {"slots": 7, "refresh": 0.5}),  # fewer entries than workers at times
]


@pytest.mark.parametrize("name, params", VARIANTS)
def test_kernel_equals_plain_python_through_resizes_feedback_and_time(name, params):
    keys = zipf_keys(1.3, 3000, 24_000, seed=1)
    compiled, plain = groupings.make(name, 8, seed=5, **params), py_grouping(name, 8, seed=5, **params)
    rng = np.random.default_rng(2)
    counts = [8, 8, 11, 11, 12, 5, 5, 9, 2, 2, 7, 7]
    for step, (chunk, n) in enumerate(zip(np.array_split(keys, len(counts)), counts, strict=True)):
        for g in (compiled, plain):
            g.resize(n)
        acked = rng.integers(0, n, 20)
        report = AckReport.of(acked, load=rng.random(20) ** 3, now=0.35 * step)
        for g in (compiled, plain):
            g.feedback(report)
        now = 0.35 * step + 0.1
        assert np.array_equal(compiled.route(chunk, now), plain.route(chunk, now)), (step, n)


def test_dc_recomputes_d_like_the_plain_version():
    keys = zipf_keys(1.5, 3000, 20_000, seed=2)
    g, ref = groupings.make("dc", 40, refresh=3000), PyGrouping("dc", 40, refresh=3000)
    assert np.array_equal(g.route(keys), ref.route(keys))
    assert g.stats()["d"] == ref.d > 2


def test_plain_find_optimal_choices_agrees():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 120))
        p = np.sort(rng.dirichlet(np.ones(int(rng.integers(1, 30)))) * rng.random())[::-1]
        tail = max(0.0, 1.0 - p.sum())
        assert groupings.find_optimal_choices(p, tail, n, 1e-4) == optimal_choices(p.tolist(), tail, n, 1e-4)
