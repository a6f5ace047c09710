"""Candidate sets: which bins a message may go to (Storm's AssignmentCreator), as compiled function pairs.

A candidate set is `locate(key, st) -> (origin, count)`, run once per message, plus a `choice(origin, i, st)`
giving candidate i < count; selectors walk the candidates lazily, so unbounded sets (salted rehash, ring walk)
cost only the probes actually made. Every hash that defines a key's candidates comes from one fixed family,
independent of the instance seed, so all sources agree on them.
"""

from __future__ import annotations

import numpy as np

from ..hashing import bucket, mix64
from ..jit import hot
from ..ring import RING_KEY_SALT, successor
from .state import MAX_PROBES, OFFSET, D

_RNG_STEP = np.uint64(0x9E3779B97F4A7C15)


# --- choice functions -------------------------------------------------------------------------------------


@hot
def hash_family(origin, i, st):
    """F_{i+1}(key): hash function number i+1 of the fixed family (F_1 is the principal choice)."""
    return np.int64(bucket(mix64(origin, np.uint64(i + 1)), st.loads.size))


@hot
def rotated(origin, i, st):
    """Bin (OFFSET + i) mod n: all bins, in an order that starts at this source's own offset."""
    j = st.counters[OFFSET] + i
    n = st.loads.size
    return j - n if j >= n else j


@hot
def picked(origin, i, st):
    """Candidate i as the locate function left it in the state's picks."""
    return st.picks[i]


@hot
def ring_successor(origin, i, st):
    """Owner of the i-th ring point clockwise from position `origin`."""
    j = origin + i
    size = st.ring_points.size
    return np.int64(st.ring_owner[j - size if j >= size else j])


# --- locate functions ------------------------------------------------------------------------------------


@hot
def one_hash(key, st):
    """Key grouping's single choice F_1(key)."""
    return key, 1


@hot
def two_hashes(key, st):
    """PKG's two choices F_1(key), F_2(key)."""
    return key, 2


@hot
def d_hashes(key, st):
    """Greedy-d's choices F_1(key) .. F_d(key), with the instance's current d."""
    return key, st.counters[D]


@hot
def distinct_hashes(key, st):
    """Storm's choices: F_1(key) .. F_d(key) (d at most n), each equal to an earlier one moved on to the next bin."""
    n = st.loads.size
    d = min(st.counters[D], n)
    picks = st.picks
    for i in range(d):
        b = np.int64(bucket(mix64(key, np.uint64(i + 1)), n))
        k = 0
        while k < i:  # i < d <= n earlier picks: some bin is still free, so this ends
            if picks[k] == b:
                b = b + 1 if b + 1 < n else 0
                k = 0
            else:
                k += 1
        picks[i] = b
    return key, d


@hot
def salted_rehash(key, st):
    """PoRC's H_1(key), H_2(key), ... (the same family), up to the probe budget."""
    return key, st.counters[MAX_PROBES]


@hot
def all_workers(key, st):
    """Every bin (W-Choices head, round robin, shuffle)."""
    return np.uint64(0), st.loads.size


@hot
def random_pair(key, st):
    """Two bins drawn uniformly at random per message (POTC), from this instance's seeded generator."""
    st.rng[0] += _RNG_STEP
    return mix64(st.rng[0], np.uint64(0)), 2


@hot
def ring_walk(key, st):
    """Ring points clockwise from the key's position; one full turn reaches every bin."""
    points = st.ring_points
    return np.uint64(successor(mix64(key, RING_KEY_SALT), points, st.ring_directory)), points.size
