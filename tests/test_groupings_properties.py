"""Property-based checks: any keys, any batch cuts, any worker count, any sequence of resizes."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import groupings
from groupings.reference import REFERENCE_NAMES

names = st.sampled_from(REFERENCE_NAMES)
key_arrays = st.lists(st.integers(0, 2**64 - 1), min_size=0, max_size=300).map(
    lambda xs: np.array(xs, dtype=np.uint64)
)
# a few distinct keys repeated, so that heads, capacities and probes come into play
skewed_arrays = st.lists(st.integers(0, 12), min_size=1, max_size=400).map(
    lambda xs: (np.array(xs, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
)


@settings(max_examples=60, deadline=None)
@given(name=names, n=st.integers(1, 40), seed=st.integers(0, 2**31), keys=key_arrays)
def test_any_keys_route_into_range(name, n, seed, keys):
    out = groupings.make(name, n, seed=seed).route(keys)
    assert out.dtype == np.int32 and out.shape == keys.shape
    assert np.all((out >= 0) & (out < n))


@settings(max_examples=60, deadline=None)
@given(
    name=names,
    n=st.integers(1, 12),
    keys=skewed_arrays,
    cuts=st.lists(st.integers(0, 400), max_size=6),
    now=st.floats(0, 1e4),
)
def test_any_batch_split_gives_the_same_routing(name, n, keys, cuts, now):
    whole = groupings.make(name, n, seed=3).route(keys, now)
    g = groupings.make(name, n, seed=3)
    bounds = [0, *sorted(c for c in cuts if c <= keys.size), keys.size]
    pieces = np.concatenate([g.route(keys[a:b], now) for a, b in pairwise(bounds)])
    assert np.array_equal(pieces, whole)


@settings(max_examples=60, deadline=None)
@given(
    name=names,
    steps=st.lists(st.tuples(st.integers(1, 30), st.integers(0, 300)), min_size=1, max_size=6),
    keys=skewed_arrays,
)
def test_any_resizes_keep_routing_in_range(name, steps, keys):
    g = groupings.make(name, 4, seed=1)
    for t, (n, count) in enumerate(steps):
        g.resize(n)
        out = g.route(np.resize(keys, count) if count else keys[:0], now=0.7 * t)
        assert g.workers == n and np.all((out >= 0) & (out < n))


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["porc", "chbl"]),
    n=st.integers(1, 20),
    eps=st.floats(0.001, 2.0),
    keys=skewed_arrays,
)
def test_bounded_loads_hold_for_any_input(name, n, eps, keys):
    out = groupings.make(name, n, eps=eps).route(keys)
    loads = np.zeros(n, dtype=np.int64)
    for m, w in enumerate(out, start=1):
        loads[w] += 1
        assert loads.max() <= np.ceil((1.0 + eps) * m / n)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["kg", "pkg", "dc"]), n=st.integers(2, 30), keys=skewed_arrays)
def test_keys_reach_only_their_promised_workers(name, n, keys):
    out = groupings.make(name, n).route(keys)
    limit = {"kg": 1, "pkg": 2, "dc": n}[name]
    for key in np.unique(keys):
        assert np.unique(out[keys == key]).size <= limit
