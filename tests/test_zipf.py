"""The bounded Zipf law and its sampler."""

from __future__ import annotations

import math

import numpy as np
import pytest

from topo.data.dataset import load_stream
from topo.data.streamspec import block_uniforms, epoch_offsets, sample_key_ids
from topo.data.zipf import zipf_cdf, zipf_p1, zipf_pmf, zipf_rank_index


def _within(observed: float, p: float, n: int, sds: float = 5.0) -> bool:
    """True if a frequency observed over n draws is within `sds` binomial standard deviations of p."""
    return abs(observed - p) <= sds * math.sqrt(p * (1 - p) / n) + 1e-12


def test_pmf_is_the_normalized_power_law() -> None:
    pmf = zipf_pmf(1.2, 1000)
    assert pmf.shape == (1000,)
    assert math.isclose(pmf.sum(), 1.0, rel_tol=1e-12)
    assert np.all(np.diff(pmf) < 0)
    assert math.isclose(pmf[0] / pmf[9], 10**1.2, rel_tol=1e-12)


def test_p1_is_one_over_the_generalized_harmonic_number() -> None:
    assert math.isclose(zipf_p1(1.0, 10), 1 / sum(1 / r for r in range(1, 11)), rel_tol=1e-14)
    assert math.isclose(zipf_p1(2.0, 100000), 1 / sum(r**-2.0 for r in range(1, 100001)), rel_tol=1e-12)
    assert zipf_p1(0.0, 50) == pytest.approx(1 / 50)


def test_uniform_when_z_is_zero() -> None:
    assert np.allclose(zipf_pmf(0.0, 7), 1 / 7)


def test_cdf_ends_at_one_and_is_cached_read_only() -> None:
    cdf = zipf_cdf(0.8, 500)
    assert cdf[-1] == 1.0
    assert zipf_cdf(0.8, 500) is cdf
    with pytest.raises(ValueError):
        cdf[0] = 0.5


@pytest.mark.parametrize("z", [0.5, 1.0, 1.2, 2.0])
def test_top_rank_frequencies_match_the_pmf(z: float) -> None:
    n, keys = 1_000_000, 10_000
    ranks = zipf_rank_index(block_uniforms(11, 0, n), z, keys)
    freq = np.bincount(ranks, minlength=keys) / n
    pmf = zipf_pmf(z, keys)
    for r in range(5):
        assert _within(freq[r], pmf[r], n), (z, r + 1, freq[r], pmf[r])


def test_sampled_key_ids_are_rotated_ranks() -> None:
    n, keys, z, seed = 200_000, 1000, 1.0, 3
    ids = sample_key_ids("zipf", {"z": z, "keys": keys, "seed": seed}, 0, n)
    offset = epoch_offsets(seed, keys, np.zeros(1))[0]
    ranks = (ids - offset) % keys
    assert np.array_equal(ranks, zipf_rank_index(block_uniforms(seed, 0, n), z, keys))
    freq = np.bincount(ranks, minlength=keys) / n
    assert _within(freq[0], zipf_pmf(z, keys)[0], n)


def test_p1_of_a_sampled_stream_is_near_the_exact_value() -> None:
    n = 1_000_000
    stream = load_stream(f"zipf:z=1.03,keys=100000,messages={n},seed=5")
    exact = zipf_p1(1.03, 100000)
    assert stream.meta["p1_exact"] == exact
    assert _within(stream.meta["p1"], exact, n)


def test_single_key_and_bad_parameters() -> None:
    assert np.array_equal(zipf_rank_index(np.array([0.0, 0.5, 0.999999]), 1.5, 1), [0, 0, 0])
    with pytest.raises(ValueError):
        zipf_pmf(-0.1, 10)
    with pytest.raises(ValueError):
        zipf_pmf(1.0, 0)
    with pytest.raises(ValueError):
        zipf_p1(float("nan"), 10)


@pytest.mark.parametrize(("z", "keys"), [(0.0, 1000), (1.2, 100_000), (2.0, 3), (0.7, 1 << 21)])
def test_guided_lookup_equals_a_plain_binary_search(z: float, keys: int) -> None:
    rng = np.random.default_rng(4)
    cdf = zipf_cdf(z, keys)
    picks = cdf[rng.integers(0, keys, 500)]
    # uniforms on and just below cdf values and bucket edges are where an off-by-one would show
    u = np.concatenate(
        [rng.random(20_000), picks, np.nextafter(picks, 0), np.arange(512) / 512, [0.0, np.nextafter(1.0, 0)]]
    )
    assert np.array_equal(zipf_rank_index(u, z, keys), np.searchsorted(cdf, u, side="right"))
