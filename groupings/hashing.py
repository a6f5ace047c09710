"""Key hashing: strings to 64-bit Murmur3 hashes, and cheap seeded re-hashes of those for the groupings.

The papers hash keys with 64-bit Murmur; every grouping then derives its d (or infinitely many, salted)
hash functions from that one 64-bit value with a seeded finalizer, so strings are hashed once per run.
"""

from __future__ import annotations

from collections.abc import Iterable

import mmh3
import numba
import numpy as np
import pyarrow as pa

MURMUR_SEED = 105929  # any fixed seed works; this keeps key hashes stable across runs and machines
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def hash_keys(strings: Iterable[str] | np.ndarray) -> np.ndarray:
    """64-bit Murmur3 hash (low half of x64_128) of each key string, as np.uint64, in input order."""
    if isinstance(strings, np.ndarray) and strings.ndim != 1:
        raise ValueError("hash_keys takes a one-dimensional sequence of strings")
    arr = pa.array(strings if isinstance(strings, np.ndarray | pa.Array) else list(strings), type=pa.string())
    if len(arr) == 0:
        return np.empty(0, dtype=np.uint64)
    if arr.null_count:
        raise ValueError(f"hash_keys: {arr.null_count} null keys")
    # hash each distinct string once (streams repeat keys many times), without padding to the longest key
    encoded = arr.dictionary_encode()
    uniq = encoded.dictionary.to_pylist()
    hashed = np.fromiter(
        (mmh3.hash64(s, MURMUR_SEED, x64arch=True, signed=False)[0] for s in uniq), dtype=np.uint64, count=len(uniq)
    )
    return hashed[encoded.indices.to_numpy(zero_copy_only=False)]


@numba.njit(inline="always")
def mix64(h: np.uint64, salt: np.uint64) -> np.uint64:
    """A seeded re-hash of a 64-bit key hash (splitmix64 finalizer): one of infinitely many hash functions."""
    z = h ^ (salt * _GOLDEN + np.uint64(0x632BE59BD9B4E019))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(inline="always")
def bucket(h: np.uint64, n: int) -> int:
    """Map a 64-bit hash onto [0, n) without modulo bias for small n (Lemire's multiply-shift)."""
    return int((h >> np.uint64(32)) * np.uint64(n) >> np.uint64(32))


def seeded_hashes(keys: np.ndarray, salt: int, n: int) -> np.ndarray:
    """The worker [0, n) that hash function number `salt` gives each key (vectorized, for tests and tools)."""
    return _seeded_hashes(np.ascontiguousarray(keys, dtype=np.uint64), np.uint64(salt), n)


@numba.njit(cache=True)
def _seeded_hashes(keys, salt, n):
    out = np.empty(keys.size, dtype=np.int32)
    for i in range(keys.size):
        out[i] = bucket(mix64(keys[i], salt), n)
    return out
