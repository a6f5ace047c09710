"""D-Choices with a fixed d for the head (the Greedy-d runs of the paper's Min-d search, Fig. 9)."""

from __future__ import annotations

import numpy as np
import pytest

import groupings
from groupings.compiled.catalog import greedy_d
from groupings.reference import PyGrouping


def zipf_keys(z: float, n_keys: int, messages: int, seed: int) -> np.ndarray:
    pmf = np.arange(1, n_keys + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(pmf / pmf.sum())
    ranks = np.minimum(np.searchsorted(cdf, np.random.default_rng(seed).random(messages), side="right"), n_keys - 1)
    return groupings.hash_keys([f"key{i}" for i in range(n_keys)])[ranks]


class PlainGreedyD(PyGrouping):
    """The plain per-tuple D-Choices with its d pinned: the head by d hashed choices, never FindOptimalChoices."""

    def __init__(self, workers: int, seed: int, d: int, **params) -> None:
        super().__init__("dc", workers, seed, **params)
        self.d = d
        self.next_refresh = float("inf")


@pytest.mark.parametrize("n, d, z", [(10, 2, 1.4), (10, 4, 1.4), (20, 7, 1.8), (8, 8, 1.6), (8, 12, 1.6)])
def test_fixed_d_routes_like_plain_greedy_d(n, d, z):
    keys = zipf_keys(z, 2000, 15_000, seed=n + d)
    got = greedy_d(n, 3, d).route(keys)
    assert np.array_equal(got, PlainGreedyD(n, 3, d).route(keys))


def test_default_is_find_optimal_choices_and_d_stays_fixed():
    keys = zipf_keys(1.5, 3000, 20_000, seed=2)
    free, fixed = groupings.make("dc", 40, refresh=3000), greedy_d(40, 0, 3, refresh=3000)
    assert "d" not in free.params and fixed.params["d"] == 3
    assert np.array_equal(free.route(keys), PyGrouping("dc", 40, refresh=3000).route(keys))
    fixed.route(keys)
    assert free.stats()["d"] > 3  # this head needs more than three choices ...
    assert fixed.stats()["d"] == 3  # ... and a fixed d is kept through every recomputation
    assert fixed.stats()["refreshes"] == free.stats()["refreshes"] > 1
    assert fixed.stats()["head_size"] == free.stats()["head_size"] > 0


def test_fixed_d_stays_through_a_resize():
    keys = zipf_keys(1.5, 3000, 12_000, seed=5)
    g = greedy_d(20, 1, 4)
    g.route(keys[:6000])
    g.resize(30)
    out = g.route(keys[6000:])
    assert g.stats()["d"] == 4 and out.max() < 30


def test_more_choices_balance_a_skewed_head_better():
    # the search for Min-d relies on this: with more choices the head spreads over more workers
    keys = zipf_keys(1.6, 5000, 60_000, seed=9)
    n = 20
    imb = {}
    for d in (2, 6, 12, n):
        w = greedy_d(n, 1, d).route(keys)
        imb[d] = np.bincount(w, minlength=n).max() / w.size - 1 / n
    assert imb[2] > imb[6] > imb[12] >= imb[n] - 1e-4
    assert imb[2] > 0.05 and imb[n] < 1e-3


def test_d_at_n_is_w_choices():
    keys = zipf_keys(1.8, 2000, 10_000, seed=4)
    assert np.array_equal(greedy_d(6, 2, 6).route(keys),
                          groupings.make("wc", 6, seed=2).route(keys))


@pytest.mark.parametrize("bad", [1, -1, "x", 2.5, True])
def test_bad_d_is_refused(bad):
    with pytest.raises(ValueError, match="d >= 2"):
        greedy_d(10, 0, bad)
    with pytest.raises(ValueError, match="unknown parameter"):
        groupings.make("dc", 10, d=3)  # a fixed d is not a parameter of the registered dc


def test_routing_like_the_engine_deals_the_sources():
    # the Min-d experiment deals the stream over the sources itself; at d = n it must give route_stream's wc
    from experiments.dchoices.figs import greedy_d_workers
    from experiments.routing import route_stream

    keys = zipf_keys(1.7, 2000, 20_000, seed=6)
    assert np.array_equal(greedy_d_workers(keys, 7, 7), route_stream("wc", keys, 7, 5).workers)
