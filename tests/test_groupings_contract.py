"""The protocol every registered grouping honours, whichever module it comes from: engines rely on exactly this."""

from __future__ import annotations

import json
from itertools import pairwise

import numpy as np
import pytest

import groupings
from groupings.feedback import AckReport

NAMES = groupings.names()


@pytest.fixture(scope="module")
def keys() -> np.ndarray:
    ranks = np.minimum(np.random.default_rng(0).zipf(1.3, 6000), 500) - 1
    return groupings.hash_keys([f"key{i}" for i in range(500)])[ranks]


@pytest.mark.parametrize("name", NAMES)
def test_instance_attributes_and_params(name):
    g = groupings.make(name, 5, seed=7)
    assert (g.name, g.workers, g.seed) == (name, 5, 7)
    assert isinstance(g.params, dict)
    assert [p["name"] for p in groupings.describe(name)["params"]] == list(g.params)


@pytest.mark.parametrize("name", NAMES)
def test_route_gives_int32_workers_in_range(name, keys):
    g = groupings.make(name, 6, seed=1)
    out = g.route(keys, now=0.0)
    assert out.dtype == np.int32 and out.shape == keys.shape
    assert out.min() >= 0 and out.max() < 6
    assert g.route(np.empty(0, dtype=np.uint64), now=0.1).shape == (0,)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_routing_and_batches_equal_pieces(name, keys):
    def run(cuts):
        g = groupings.make(name, 5, seed=3)
        out = []
        for step in range(3):
            g.feedback(AckReport.of([step, 4], load=[0.9, 0.1], utilization=[0.95, 0.2], now=step + 0.2))
            part = keys[step * 2000 : (step + 1) * 2000]
            out += [g.route(part[a:b], now=step + 0.5) for a, b in pairwise(cuts)]
        return np.concatenate(out)

    whole = run([0, 2000])
    assert np.array_equal(whole, run([0, 2000]))
    assert np.array_equal(whole, run([0, 1, 2, 700, 1999, 2000]))


@pytest.mark.parametrize("name", NAMES)
def test_feedback_checks_worker_ids(name, keys):
    g = groupings.make(name, 4, seed=0)
    g.route(keys[:100], now=0.0)
    g.feedback(AckReport.empty(0.1))
    g.feedback(AckReport.of([0, 3], load=[0.5, 0.0], now=0.2))
    with pytest.raises(ValueError):
        g.feedback(AckReport.of([4], now=0.3))
    with pytest.raises(ValueError):
        g.feedback(AckReport.of([-1], now=0.3))


@pytest.mark.parametrize("name", NAMES)
def test_resize_routes_into_the_new_range(name, keys):
    controller = groupings.make_controller(name, 5, seed=2)
    g = groupings.make(name, 5, seed=2, controller=controller)
    g.route(keys[:1000], now=0.0)
    for t, n in enumerate((8, 3, 6), start=1):
        if controller is not None:
            controller.resize(n)  # engines resize the run's controller once, then every source's grouping
        g.resize(n)
        out = g.route(keys[1000 * t : 1000 * (t + 1)], now=float(t))
        # with a controller, keys follow the new count from its next step on (see groupings.control)
        assert controller is not None or (g.workers == n and out.min() >= 0 and out.max() < n)
        acked = np.unique(out)  # acks come back from the workers this source sent to
        g.feedback(AckReport.of(acked, load=np.zeros(acked.size), now=t + 0.5))


@pytest.mark.parametrize("name", NAMES)
def test_stats_are_a_json_able_dict(name, keys):
    g = groupings.make(name, 4, seed=0)
    g.route(keys[:500], now=0.0)
    assert isinstance(json.loads(json.dumps(g.stats())), dict)


@pytest.mark.parametrize("name", NAMES)
def test_a_strategy_with_a_controller_can_route_with_a_replica(name, keys):
    # every grouping is a Partitioner; one with a shared controller is Replicated, so that an engine keeping the
    # controller in another process needs nothing strategy-specific
    g = groupings.make(name, 4, seed=1)
    assert isinstance(g, groupings.Partitioner)
    if groupings.describe(name)["controller"]:
        assert isinstance(g, groupings.Replicated)
        g.route(keys, 0.0)
        master = groupings.make_controller(name, 4, seed=1)
        master.sources = [g.snapshot()]
        master.step(groupings.WorkerReport(tuples=np.full(4, 100), busy_s=np.full(4, 0.5), queue_len=np.zeros(4),
                                           active=np.ones(4, bool), period_s=1.0, now=1.0))
        adopted = g.adopt(master.replica())
        assert g.controller is adopted and adopted.sources == [g] and adopted.version == master.version
        assert np.array_equal(g.route(keys, 1.0), master.lookup(keys))
    else:
        assert not isinstance(g, groupings.Replicated)
