"""FindOptimalChoices (D-Choices, Proposition 4.1) on distributions worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import groupings
from groupings import find_optimal_choices
from groupings.dchoices import prefix_conditions_hold
from groupings.spacesaving import head_frequencies


def test_single_head_key_worked_by_hand():
    # n = 10, eps = 0.01, head p = [0.3], tail 0.7; rhs = b (1/n + eps) = 0.11 b, b = 10 - 10 * 0.9^d
    # start: d = max(2, ceil(0.3 * 10)) = 3
    # d = 3: b = 10 - 7.29 = 2.71;     lhs = 0.3 + 0.271^2 * 0.7 = 0.3 + 0.051409 = 0.351409 > 0.298100
    # d = 4: b = 10 - 6.561 = 3.439;   lhs = 0.3 + 0.3439^2 * 0.7 = 0.3 + 0.082787 = 0.382787 > 0.378290
    # d = 5: b = 10 - 5.9049 = 4.0951; lhs = 0.3 + 0.40951^2 * 0.7 = 0.3 + 0.117389 = 0.417389 <= 0.450461
    assert find_optimal_choices(np.array([0.3]), 0.7, 10, 0.01) == 5


def test_two_head_keys_worked_by_hand():
    # n = 10, eps = 0.01, head p = [0.3, 0.2], tail 0.5; the whole-head prefix h = 2 decides
    # d = 3, h = 1: b = 2.71;     lhs = 0.3 + 0.271^3 * 0.2 + 0.271^2 * 0.5 = 0.340700 > 0.298100
    # d = 4, h = 1: b = 3.439;    lhs = 0.3 + 0.3439^4 * 0.2 + 0.3439^2 * 0.5 = 0.361933 <= 0.378290
    # d = 4, h = 2: b = 10 - 10 * 0.9^8 = 5.695328;  lhs = 0.5 + 0.569533^2 * 0.5 = 0.662184 > 0.626486
    # d = 5, h = 1: b = 4.0951;   lhs = 0.3 + 0.40951^5 * 0.2 + 0.40951^2 * 0.5 = 0.386156 <= 0.450461
    # d = 5, h = 2: b = 10 - 10 * 0.9^10 = 6.513216; lhs = 0.5 + 0.651322^2 * 0.5 = 0.712110 <= 0.716454
    p = np.array([0.3, 0.2])
    assert not prefix_conditions_hold(p, 0.5, 10, 0.01, 4)
    assert prefix_conditions_hold(p, 0.5, 10, 0.01, 5)
    assert find_optimal_choices(p, 0.5, 10, 0.01) == 5


def test_switches_to_all_workers_by_hand():
    # n = 4, eps = 0.01, head p = [0.5, 0.3], tail 0.2; rhs = 0.26 b; start d = max(2, ceil(2)) = 2
    # d = 2, h = 1: b = 4 - 4 * 0.75^2 = 1.75;  lhs = 0.5 + 0.4375^2 * 0.3 + 0.4375^2 * 0.2 = 0.595703 > 0.455
    # d = 3, h = 1: b = 4 - 4 * 0.75^3 = 2.3125; lhs = 0.5 + 0.578125^3 * 0.3 + 0.578125^2 * 0.2
    #                                                = 0.5 + 0.057968 + 0.066846 = 0.624814 > 0.60125
    # d = 4 = n: W-Choices
    assert find_optimal_choices(np.array([0.5, 0.3]), 0.2, 4, 0.01) == 4


def test_lower_bound_p1_n():
    # a key with p1 = 0.45 needs d >= ceil(4.5) = 5 of 10 workers even with huge slack
    assert find_optimal_choices(np.array([0.45]), 0.55, 10, 10.0) == 5
    # p1 n = 3 exactly (0.3 * 10 = 3.0000000000000004 in floating point) starts at 3, not 4
    assert find_optimal_choices(np.array([0.3]), 0.7, 10, 10.0) == 3


def test_edge_cases():
    assert find_optimal_choices(np.array([]), 1.0, 10, 1e-4) == 2  # no head: PKG
    assert find_optimal_choices(np.array([1.0]), 0.0, 8, 1e-4) == 8  # one key is everything
    assert find_optimal_choices(np.array([0.9]), 0.1, 2, 1e-4) == 2
    assert find_optimal_choices(np.array([0.9]), 0.1, 1, 1e-4) == 1


def test_result_is_the_smallest_feasible_d():
    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(3, 80))
        p = np.sort(rng.dirichlet(np.ones(int(rng.integers(1, 20)))) * rng.uniform(0.1, 0.9))[::-1]
        tail = 1.0 - p.sum()
        d = find_optimal_choices(p, tail, n, 1e-3)
        start = max(2, int(np.ceil(p[0] * n - 1e-12)))
        assert start <= d <= n
        assert all(not prefix_conditions_hold(p, tail, n, 1e-3, x) for x in range(start, d))
        if d < n:
            assert prefix_conditions_hold(p, tail, n, 1e-3, d)


@pytest.mark.parametrize(
    "p, tail, n, eps",
    [
        (np.array([0.1, 0.3]), 0.6, 10, 1e-4),  # not descending
        (np.array([-0.1]), 1.0, 10, 1e-4),
        (np.array([[0.1]]), 0.9, 10, 1e-4),
        (np.array([0.1]), 1.5, 10, 1e-4),
        (np.array([0.1]), 0.9, 0, 1e-4),
        (np.array([0.1]), 0.9, 10, 0.0),
    ],
)
def test_bad_arguments(p, tail, n, eps):
    with pytest.raises(ValueError):
        find_optimal_choices(p, tail, n, eps)


def test_dc_uses_the_d_of_its_head_estimates():
    pmf = np.arange(1, 1001, dtype=np.float64) ** -1.5
    cdf = np.cumsum(pmf / pmf.sum())
    ranks = np.searchsorted(cdf, np.random.default_rng(0).random(32_000), side="right").clip(0, 999)
    keys = groupings.hash_keys([f"k{i}" for i in range(1000)])[ranks]
    g = groupings.make("dc", 30, refresh=40_000)
    g.route(keys)
    # d is recomputed after 1000, 2000, 4000, ..., 32000 messages: the last time on the last message
    stats = g.stats()
    assert stats["refreshes"] == 6
    p = head_frequencies(g._state.summary, g.params["theta"])
    assert stats["head_size"] == p.size > 0
    tail = 1.0
    for x in p:  # the same order of subtraction as the kernel
        tail -= x
    assert stats["d"] == find_optimal_choices(p, max(0.0, tail), 30, g.params["eps"]) > 2
