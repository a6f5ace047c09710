"""Gedik's partitioning function p = <H_p, H_c>: an explicit hash over a consistent hash, and LOOKUP.

H_p maps the tracked keys D_p to their channels (through a `keytable` index, O(1)); H_c is a ring of `replicas`
points per channel, found through a directory of equal arcs so a lookup takes about one step (the paper's
bucketing).
The ring of N channels holds the points of the ring of N - 1 plus the new channel's, so growing N moves only
the keys the new channel takes. LOOKUP (Algorithm 1) asks H_p first and falls back to H_c.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .. import keytable
from ..checks import as_key_hashes
from ..hashing import mix64
from ..jit import hot
from ..ring import RING_KEY_SALT, build_ring, ring_directory, successor

_RING = 2.0**64


# --- the partitioning function and LOOKUP -----------------------------------------------------------------------


class Tables(NamedTuple):
    """What LOOKUP reads: the explicit hash (an index over D_p) and the consistent-hash ring with its directory."""

    index: np.ndarray  # int32[2^b >= 2R]: key -> its position in `keys` (groupings.keytable), -1 when empty
    keys: np.ndarray  # uint64[R]: D_p
    channels: np.ndarray  # int32[R]: H_p of each
    points: np.ndarray  # uint64[P]: sorted ring positions of the channels' replicas
    owners: np.ndarray  # int32[P]: channel of each ring point
    directory: np.ndarray  # int32[2^c]: first ring point at or after the start of each of 2^c equal arcs


@hot(inline=True)
def consistent_channel(key, points, owners, directory):
    """H_c(key): the owner of the first ring point clockwise from the key's ring position."""
    return owners[successor(mix64(key, RING_KEY_SALT), points, directory)]


@hot(inline=True)
def lookup_channel(key, t):
    """LOOKUP (Algorithm 1): H_p(key) if the explicit hash holds the key, else H_c(key)."""
    i = keytable.find(t.index, t.keys, key)
    if i >= 0:
        return t.channels[i]
    return consistent_channel(key, t.points, t.owners, t.directory)


@hot
def _lookup_all(keys, out, t):
    for j in range(keys.size):
        out[j] = lookup_channel(keys[j], t)


@hot
def _ring_all(keys, out, points, owners, directory):
    for j in range(keys.size):
        out[j] = consistent_channel(keys[j], points, owners, directory)


class Ring(NamedTuple):
    """A consistent hash over `channels` channels: sorted replica points, their owners, and the arc directory."""

    channels: int
    points: np.ndarray
    owners: np.ndarray
    directory: np.ndarray
    share: np.ndarray  # fraction of the ring each channel owns (`shares`), kept: a controller asks every period

    def shares(self) -> np.ndarray:
        """Fraction of the ring (hence of uniformly hashed keys) each channel owns."""
        return self.share.copy()

    def channel_of(self, keys: np.ndarray) -> np.ndarray:
        """H_c of each key."""
        keys = as_key_hashes(keys)
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            _ring_all(keys, out, self.points, self.owners, self.directory)
        return out


def make_ring(channels: int, replicas: int) -> Ring:
    """The consistent hash over `channels` channels with `replicas` points each (the same ring for every N)."""
    points, owners = build_ring(channels, replicas)
    arcs = np.diff(points, prepend=points[-1]).astype(np.float64)  # uint64 wraps the first arc
    if points.size == 1:
        arcs[:] = _RING
    return Ring(channels, points, owners, ring_directory(points), np.bincount(owners, weights=arcs,
                                                                              minlength=channels) / _RING)


def moved_share(a: Ring, b: Ring) -> float:
    """Fraction of the ring whose owner differs between two consistent hashes (keys that H_c moves)."""
    if np.array_equal(a.points, b.points) and np.array_equal(a.owners, b.owners):
        return 0.0  # the same ring (N unchanged): nothing moves, and merging 2 x 10^5 points costs milliseconds
    union = np.union1d(a.points, b.points)
    owner_a = a.owners[np.searchsorted(a.points, union) % a.points.size]
    owner_b = b.owners[np.searchsorted(b.points, union) % b.points.size]
    arcs = np.diff(union, prepend=union[-1]).astype(np.float64)
    if union.size == 1:
        arcs[:] = _RING
    return float(arcs[owner_a != owner_b].sum() / _RING)


@dataclass(frozen=True, eq=False)
class PartitioningFunction:
    """p = <H_p, H_c>: the explicit hash of the tracked keys D_p and the consistent hash over N channels."""

    version: int
    ring: Ring
    keys: np.ndarray  # uint64[R]: D_p, by decreasing frequency
    placed: np.ndarray  # int32[R]: H_p of each
    freqs: np.ndarray  # float64[R]: the frequencies it was built for
    delta: float  # the tracking threshold it was built with
    tables: Tables = field(init=False)

    def __post_init__(self) -> None:
        keys = np.ascontiguousarray(self.keys, dtype=np.uint64)
        placed = np.ascontiguousarray(self.placed, dtype=np.int32)
        ordered = np.sort(keys)
        if keys.shape != placed.shape or (ordered.size > 1 and not (ordered[1:] != ordered[:-1]).all()):
            raise ValueError("an explicit hash needs distinct keys, one channel each")
        if placed.size and (placed.min() < 0 or placed.max() >= self.ring.channels):
            raise ValueError(f"explicit channels must lie in [0, {self.ring.channels})")
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "placed", placed)
        object.__setattr__(self, "freqs", np.ascontiguousarray(self.freqs, dtype=np.float64))
        index = keytable.new_table(keys.size)
        keytable.rebuild(index, keys, keys.size)
        tables = Tables(index, keys, placed, self.ring.points, self.ring.owners, self.ring.directory)
        object.__setattr__(self, "tables", tables)

    @property
    def channels(self) -> int:
        """N, the channels it maps onto."""
        return self.ring.channels

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """p(d) of each key hash (int32)."""
        keys = as_key_hashes(keys)
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            _lookup_all(keys, out, self.tables)
        return out

    def explicit(self) -> dict[int, int]:
        """H_p as key -> channel."""
        return dict(zip(self.keys.tolist(), self.placed.tolist(), strict=True))


def consistent_only(version: int, ring: Ring) -> PartitioningFunction:
    """A partitioning function with an empty explicit hash: plain consistent hashing."""
    empty = np.zeros(0, dtype=np.uint64)
    return PartitioningFunction(version, ring, empty, np.zeros(0, np.int32), np.zeros(0), 1.0)
