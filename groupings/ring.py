"""The consistent-hashing ring: `replicas` points per bin on the 64-bit circle, fixed for every source, and the
search for a position's successor on it."""

from __future__ import annotations

import numpy as np
from numba import njit

from .hashing import bucket, mix64
from .jit import hot

RING_POINT_SALT = np.uint64(0x52494E47504F494E)  # where bin points sit (apart from key positions and F_i)
RING_KEY_SALT = np.uint64(0x52494E474B4559)  # a key's ring position, mix64(key, RING_KEY_SALT) (far from F_i's)


@njit(cache=True)
def _point_positions(bins, replicas):
    out = np.empty(bins * replicas, dtype=np.uint64)
    for b in range(bins):
        for r in range(replicas):
            # (bin, replica) packed into one word: distinct inputs give distinct, well-spread points
            out[b * replicas + r] = mix64(np.uint64(b) << np.uint64(32) | np.uint64(r), RING_POINT_SALT)
    return out


def build_ring(bins: int, replicas: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ring positions and the bin owning each, for `bins` bins with `replicas` points each."""
    if bins < 1 or replicas < 1:
        raise ValueError(f"a ring needs bins >= 1 and replicas >= 1 (got {bins}, {replicas})")
    if bins >= 2**32 or replicas >= 2**32:
        raise ValueError("a ring holds fewer than 2^32 bins and replicas per bin")
    positions = _point_positions(bins, replicas)
    owners = np.repeat(np.arange(bins, dtype=np.int32), replicas)
    order = np.lexsort((owners, positions))  # equal positions (never seen in practice) still sort one way
    return positions[order], owners[order]


def ring_directory(points: np.ndarray) -> np.ndarray:
    """For each of 2^b equal arcs (2^b >= 2 x points), the index of the first point at or after the arc's start.

    A key's successor is then found from its arc in about one step instead of a binary search over the ring.
    """
    if points.size == 0 or np.any(np.diff(points.astype(np.uint64)) < 0):
        raise ValueError("the ring directory needs a non-empty, sorted array of ring positions")
    bits = max(1, int(np.ceil(np.log2(points.size))) + 1)
    if bits > 32:
        raise ValueError("a ring directory covers at most 2^31 points")
    starts = np.arange(2**bits, dtype=np.uint64) << np.uint64(64 - bits)
    return np.searchsorted(points, starts, side="left").astype(np.int32)


@hot(inline=True)
def successor(position: np.uint64, points: np.ndarray, directory: np.ndarray) -> int:
    """Index of the first ring point clockwise from `position` (at or after it, else point 0), via the directory."""
    # the directory gives the first point of the position's arc (its top bits: the size is a power of two)
    i = directory[bucket(position, directory.size)]
    while i < points.size and points[i] < position:
        i += 1
    return i if i < points.size else 0
