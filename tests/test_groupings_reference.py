"""The compiled kernels route exactly like the plain per-tuple Python versions of the same algorithms."""

from __future__ import annotations

import numpy as np
import pytest

import groupings
from groupings.hashing import seeded_hashes
from groupings.reference import PyGrouping, bucket, mix64, optimal_choices


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


@pytest.mark.parametrize("name", groupings.names())
@pytest.mark.parametrize("n, z", [(3, 1.0), (10, 1.2), (50, 1.6)])
def test_kernel_equals_plain_python(name, n, z):
    keys = zipf_keys(z, 3000, 12_000, seed=n)
    params = {"eps": 0.05} if name in ("porc", "chbl") else {}
    compiled = groupings.make(name, n, seed=4, **params).route(keys)
    plain = PyGrouping(name, n, seed=4, **params).route(keys)
    assert np.array_equal(compiled, plain)


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
