"""The bounded Zipf law of the papers: P(rank r) = r^-z / H(keys, z) over ranks 1..keys, for any z >= 0.

numpy's own `zipf` draws from the unbounded law and needs z > 1, so ranks are drawn here by inverting the
cumulative pmf of the bounded law: a guide table (Chen and Asau) says where in the cdf a uniform falls to
within a few entries, and a binary search over those finishes the lookup, giving exactly the answer of
`np.searchsorted(cdf, u, side="right")` in expected O(1) time instead of O(log keys) cache misses.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

MAX_KEYS = 100_000_000  # a cdf over more ranks than this costs gigabytes; no experiment needs it
GUIDE_MAX = 1 << 20  # guide-table buckets at most; more keys than this only add a few search steps


def _check(z: float, keys: int) -> tuple[float, int]:
    """Validated (z, keys) as (float, int)."""
    z = float(z)
    if not math.isfinite(z) or z < 0:
        raise ValueError(f"z must be a finite number >= 0 (got {z})")
    if int(keys) != keys or not 1 <= keys <= MAX_KEYS:
        raise ValueError(f"keys must be a whole number in [1, {MAX_KEYS}] (got {keys})")
    return z, int(keys)


def _weights(z: float, keys: int) -> np.ndarray:
    """Unnormalized weights r^-z of ranks 1..keys."""
    return np.arange(1, keys + 1, dtype=np.float64) ** -z


def zipf_pmf(z: float, keys: int) -> np.ndarray:
    """Probability of each rank 1..keys (index r-1 holds rank r) under the bounded Zipf law."""
    z, keys = _check(z, keys)
    w = _weights(z, keys)
    return w / w.sum()


def zipf_p1(z: float, keys: int) -> float:
    """Exact share of the most frequent key (rank 1): 1 / H(keys, z)."""
    z, keys = _check(z, keys)
    # summing the small tail terms first keeps the harmonic number accurate to the last bits
    return float(1.0 / _weights(z, keys)[::-1].sum())


@functools.lru_cache(maxsize=4)
def zipf_cdf(z: float, keys: int) -> np.ndarray:
    """Read-only cumulative pmf of ranks 1..keys, ending in exactly 1.0 (cached per (z, keys))."""
    z, keys = _check(z, keys)
    cdf = np.cumsum(_weights(z, keys))
    cdf /= cdf[-1]
    # an exact 1.0 at the end means every uniform in [0, 1) lands on a valid rank
    cdf[-1] = 1.0
    cdf.flags.writeable = False
    return cdf


@functools.lru_cache(maxsize=4)
def _guide(z: float, keys: int) -> np.ndarray:
    """For each bucket edge j/m (j = 0..m), the first cdf index whose value exceeds it."""
    m = min(keys, GUIDE_MAX)
    edges = np.arange(m + 1, dtype=np.float64) / m
    return np.searchsorted(zipf_cdf(z, keys), edges, side="right").astype(np.int64)


@numba.njit(cache=True)
def _guided_search(u, cdf, starts, out):  # pragma: no cover - compiled
    m = starts.size - 1
    for k in range(u.size):
        x = u[k]
        j = min(max(int(x * m), 0), m - 1)
        # x * m may round across a bucket edge; step to the bucket with j/m <= x < (j + 1)/m
        while j > 0 and j / m > x:
            j -= 1
        while j < m - 1 and (j + 1) / m <= x:
            j += 1
        lo, hi = starts[j], starts[j + 1]
        while lo < hi:
            mid = (lo + hi) >> 1
            if cdf[mid] > x:
                hi = mid
            else:
                lo = mid + 1
        out[k] = lo


def zipf_rank_index(u: np.ndarray, z: float, keys: int) -> np.ndarray:
    """Rank minus one (0-based, int64) of each uniform u in [0, 1) by inverse-cdf lookup."""
    z, keys = _check(z, keys)
    u = np.ascontiguousarray(u, dtype=np.float64)
    out = np.empty(u.size, dtype=np.int64)
    _guided_search(u.ravel(), zipf_cdf(z, keys), _guide(z, keys), out)
    return out.reshape(u.shape)
