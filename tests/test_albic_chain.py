"""ALBIC's operator chain: the controller places a downstream operator's key groups and collocates pairs that talk;
COLA's from-scratch partitioning; a chain of several edges in the collocation heuristic."""

from __future__ import annotations

import numpy as np
import pytest

import groupings
from groupings.chain import OperatorChain
from groupings.collocation import cola, collocation_factor, score_pairs
from groupings.feedback import WorkerReport

BASE = np.random.default_rng(11).integers(0, 2**63, 4000, dtype=np.int64).astype(np.uint64)
KEYS = np.concatenate([BASE, np.repeat(BASE[:24], 300)])  # 24 hot keys: hot (k, j) pairs on the chain


def step(ctl, sources, keys, now):
    parts = np.array_split(keys, len(sources))
    routed = np.concatenate([s.route(p) for s, p in zip(sources, parts, strict=True)])
    tuples = np.bincount(routed, minlength=ctl.workers)
    report = WorkerReport(tuples=tuples, busy_s=tuples / 1000.0, queue_len=np.zeros(ctl.workers),
                          active=np.ones(ctl.workers, bool), period_s=1.0, now=now)
    return ctl.step(report)


def test_measured_chain_raises_collocation_within_the_budget():
    ctl = groupings.make_controller("albic", 4, seed=1, groups=16, chain_groups=16, max_migrations=4)
    sources = [groupings.make("albic", 4, seed=s, controller=ctl, groups=16, chain_groups=16) for s in range(2)]
    assert ctl.chain is not None and ctl.chain.measured and ctl.chain.placement.shape == (16,)
    first = None
    for t in range(4):
        placed = ctl._placed().copy()
        step(ctl, sources, KEYS, t + 1.0)
        assert np.count_nonzero(ctl._placed() != placed) <= 4  # both operators' moves count against the budget
        first = ctl.last["collocation_before"] if first is None else first
    assert ctl.last["collocation"] > first + 0.02
    assert ctl.stats()["collocation"] == ctl.last["collocation"] and ctl.stats()["chain_groups"] == 16
    assert ctl.last["load_distance"] <= 0.2  # maxLD, as a share of the mean node load


def test_given_traffic_pins_the_hot_pair_and_keeps_the_edge_routing_valid():
    ctl = groupings.make_controller("albic", 3, seed=2, groups=6, max_migrations=3)
    sources = [groupings.make("albic", 3, seed=0, controller=ctl, groups=6)]
    out = np.ones((6, 4))
    out[0, 3] = 40.0  # upstream key group 0 talks to downstream key group 3
    ctl.set_chain(OperatorChain(4, traffic=out, placement=np.array([1, 1, 2, 2])))
    with pytest.raises(ValueError):
        OperatorChain(4, traffic=np.ones((5, 4))).bind(6, 3)
    apart = ctl.assignment[0] != ctl.chain.placement[3]
    step(ctl, sources, BASE, 1.0)
    assert apart and ctl.last["pair"] == (0, 9)  # vertex 6 + 3
    assert ctl.assignment[0] == ctl.chain.placement[3]
    assert ctl.last["collocation"] > ctl.last["collocation_before"]
    assert sources[0].route(BASE).max() < 3


def test_chain_drains_downstream_key_groups_from_a_removed_node():
    ctl = groupings.make_controller("albic", 3, seed=3, groups=6, max_migrations=6)
    sources = [groupings.make("albic", 3, seed=0, controller=ctl, groups=6)]
    ctl.set_chain(OperatorChain(3, traffic=np.ones((6, 3))))
    ctl.resize(2)
    for t in range(4):
        step(ctl, sources, BASE, t + 1.0)
    assert ctl.draining == [] and ctl.chain.placement.max() < 2 and ctl.assignment.max() < 2


def test_without_a_chain_the_controller_has_none():
    ctl = groupings.make_controller("albic", 4, seed=1)
    assert ctl.chain is None and "collocation" not in ctl.stats()


def test_chain_of_two_edges_scores_across_stages():
    e1 = np.array([[9.0, 1.0], [1.0, 1.0]])
    e2 = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 12.0]])
    assert score_pairs([e1, e2]).tolist() == [[0, 2], [3, 6]]
    assignment = np.array([0, 1, 0, 1, 1, 1, 1])
    total = e1.sum() + e2.sum()
    assert collocation_factor([e1, e2], assignment) == pytest.approx((9 + 1 + 1 + 1 + 12) / total)
    with pytest.raises(ValueError):
        score_pairs([e1, np.ones((3, 3))])  # the second edge must start where the first ends


def test_cola_keeps_one_to_one_pairs_and_balances():
    rng = np.random.default_rng(4)
    per_op, nodes = 24, 4
    out = np.zeros((per_op, per_op))
    out[np.arange(per_op), rng.permutation(per_op)] = 1.0  # every pair one-to-one: a disconnected graph
    loads = 1.0 + rng.uniform(-0.05, 0.05, 2 * per_op)
    start = rng.permutation(2 * per_op) % nodes
    new, info = cola(out, start, loads, np.ones(nodes, bool), np.zeros(nodes, bool))
    assert collocation_factor(out, start) < 0.5 and info["collocation"] == pytest.approx(1.0)
    assert np.bincount(new, minlength=nodes).tolist() == [12] * 4
    assert info["migrations"] == np.count_nonzero(new != start) > 0
