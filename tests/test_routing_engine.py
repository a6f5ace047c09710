"""The routing-only engine of the experiments (experiments/routing.py): split, seeding, resize and metrics."""

from __future__ import annotations

import numpy as np
import pytest

import groupings
from experiments.common import stream
from experiments.routing import (
    SEED,
    excess_share,
    imbalance,
    loads,
    pairs,
    replication,
    route,
    route_stream,
)
from topo.model.inputs import source_seed
from topo.sim import simulate
from topo.spec import TopologySpec

SPEC = "zipf:z=1.3,keys=500,messages=6001,seed=11"  # not a multiple of the sources: shares differ in size


def _keys() -> np.ndarray:
    return stream(SPEC).key_hash


@pytest.mark.parametrize("sources", [1, 3, 7])
@pytest.mark.parametrize(("grouping", "params"), [("potc", {}), ("dc", {"theta": 0.02})])
def test_each_source_routes_its_share_with_its_own_seed(grouping, params, sources):
    keys, n = _keys(), 9
    got = route_stream(grouping, keys, n, sources, **params)
    expected = np.empty(keys.size, dtype=np.int64)
    stats = []
    for s in range(sources):
        g = groupings.make(grouping, workers=n, seed=source_seed(SEED, s), **params)
        expected[s::sources] = g.route(keys[s::sources])  # message i enters source i mod S
        stats.append(g.stats())
    assert np.array_equal(got.workers, expected)
    assert got.stats == stats
    if grouping == "dc":
        assert {"head_size", "d"} <= set(got.stats[0])  # what dchoices reads


def test_seed_is_the_run_seed_not_the_source_index():
    keys = _keys()
    by_index = np.empty(keys.size, dtype=np.int64)
    for s in range(3):
        by_index[s::3] = groupings.make("sg", workers=5, seed=s).route(keys[s::3])
    assert not np.array_equal(route("sg", keys, 5, 3), by_index)
    assert not np.array_equal(route("sg", keys, 5, 3, seed=1), route("sg", keys, 5, 3))


def test_agrees_with_the_simulator_on_where_messages_go():
    spec = TopologySpec(engine="sim", grouping="potc", workers=6, sources=3, stream=SPEC, seed=SEED,
                        operator="wordcount")
    per_worker = [w["tuples"] for w in simulate(spec, stream(SPEC)).summary["per_worker"]]
    assert loads(route("potc", _keys(), 6, 3), 6).tolist() == per_worker


@pytest.mark.parametrize(("at", "to"), [(3000, 10), (3001, 6), (0, 7), (6001, 9)])
def test_resize_before_message_i(at, to):
    keys, n, sources = _keys(), 8, 3
    got = route("fish", keys, n, sources, resize=(at, to))
    expected = np.empty(keys.size, dtype=np.int64)
    for s in range(sources):
        g = groupings.make("fish", workers=n, seed=source_seed(SEED, s))
        mine = np.arange(s, keys.size, sources)
        before = mine < at
        part = g.route(keys[mine[before]])
        g.resize(to)
        expected[mine] = np.concatenate([part, g.route(keys[mine[~before]])])
    assert np.array_equal(got, expected)
    assert got[at:].max(initial=0) < to and got[:at].max(initial=0) < n


def test_metrics_on_a_hand_made_case():
    workers = np.array([0, 0, 0, 1, 2, 0])
    assert loads(workers, 4).tolist() == [4, 1, 1, 0]
    assert imbalance(workers, 4) == pytest.approx(4 / 1.5 - 1)  # (max - mean) / mean, mean 6/4
    assert excess_share(workers, 4) == pytest.approx(4 / 6 - 1 / 4)  # max_w L_w - 1/n
    assert imbalance(workers, 4) == pytest.approx(4 * excess_share(workers, 4))
    keys = np.array([5, 5, 9, 9, 7, 5], dtype=np.uint64)  # pairs (5,0) (5,0) (9,0) (9,1) (7,2) (5,0)
    assert pairs(keys, workers, 4) == 4
    assert replication(keys, workers, 4) == pytest.approx(4 / 3)
    assert replication(keys, np.zeros(6, dtype=np.int64), 4) == 1.0  # key grouping keeps one copy
    assert imbalance(np.arange(8) % 4, 4) == 0.0 and excess_share(np.arange(8) % 4, 4) == 0.0
