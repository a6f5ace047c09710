"""How many choices the head needs (D-Choices, Nasir et al. ICDE'16, Section IV-A): FindOptimalChoices.

Proposition 4.1 gives one necessary condition per head prefix h = 1..|H| for Greedy-d to keep the expected
imbalance below eps:

    sum_{i<=h} p_i + (b_h/n)^d sum_{h<i<=|H|} p_i + (b_h/n)^2 sum_{i>|H|} p_i <= b_h (1/n + eps),
    b_h = n - n ((n-1)/n)^(h d)   (expected number of distinct workers the first h head keys reach)

FindOptimalChoices starts at the lower bound d = p_1 n (a key cannot take more than d/n of the stream) and
raises d until every condition holds; reaching n means the head should use all workers (W-Choices).
"""

from __future__ import annotations

import math

import numpy as np

from .jit import hot

_ROUNDING = 1e-12  # p1 * n = 3.0000000000000004 must start at d = 3, not 4


@hot
def prefix_conditions_hold(p, tail_mass, n, eps, d):
    """Whether every prefix condition of Proposition 4.1 holds for d choices."""
    head_mass = 0.0
    for i in range(p.size):
        head_mass += p[i]
    prefix = 0.0
    for h in range(1, p.size + 1):
        prefix += p[h - 1]
        # float exponents: the same libm pow in compiled and plain Python code
        b = n - n * ((n - 1.0) / n) ** float(h * d)
        covered = b / n
        lhs = prefix + covered ** float(d) * (head_mass - prefix) + covered**2.0 * tail_mass
        if lhs > b * (1.0 / n + eps):
            return False
    return True


@hot
def optimal_choices(p, tail_mass, n, eps):
    """FindOptimalChoices without argument checks (the compiled kernels call this)."""
    if n <= 2 or p.size == 0:
        return n if n <= 2 else 2
    d = max(2, np.int64(math.ceil(p[0] * n - _ROUNDING)))
    while d < n:
        if prefix_conditions_hold(p, tail_mass, n, eps, d):
            return d
        d += 1
    return n


def find_optimal_choices(p: np.ndarray, tail_mass: float, n: int, eps: float) -> int:
    """Smallest d >= 2 meeting every condition of Proposition 4.1 for head frequencies `p`; n = W-Choices."""
    p = np.ascontiguousarray(p, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError("p must be a one-dimensional array of head frequencies")
    if p.size and (np.any(p < 0) or np.any(np.diff(p) > 0)):
        raise ValueError("p must hold non-negative frequencies sorted in descending order")
    if not (0.0 <= tail_mass <= 1.0):
        raise ValueError(f"tail_mass must be in [0, 1] (got {tail_mass})")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive number of workers (got {n!r})")
    if not eps > 0:
        raise ValueError(f"eps must be > 0 (got {eps})")
    return int(optimal_choices(p, float(tail_mass), int(n), float(eps)))
