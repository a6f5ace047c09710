"""ALBIC: the controller and its sources (versions, budgets, capacities, scaling) and the collocation heuristic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import groupings
from groupings.adaptive.albic import SKETCH_BITS, SKETCH_SALT, AlbicController, distinct_estimate, key_groups
from groupings.collocation import (
    albic,
    balanced_partition,
    collocation_factor,
    plan_collocation,
    score_pairs,
    traffic_graph,
)
from groupings.feedback import AckReport, WorkerReport
from groupings.hashing import seeded_hashes

RNG_KEYS = np.random.default_rng(11).integers(0, 2**63, 64_000, dtype=np.int64).astype(np.uint64)


def run(workers: int = 4, sources: int = 2, **params):
    """A controller and its sources as an engine builds them."""
    params.setdefault("time_limit", 1.0)
    ctl = groupings.make_controller("albic", workers, seed=1, **params)
    return ctl, [groupings.make("albic", workers, seed=s, controller=ctl, **params) for s in range(sources)]


def period(ctl, sources, keys, capacity, now: float = 1.0) -> bool:
    """Route `keys` through the sources, let workers of the given capacities process them, and step."""
    parts = np.array_split(keys, len(sources))
    routed = np.concatenate([s.route(part) for s, part in zip(sources, parts, strict=True)])
    capacity = np.asarray(capacity, dtype=float)
    tuples = np.bincount(routed, minlength=capacity.size)
    report = WorkerReport(
        tuples=tuples,
        busy_s=tuples / capacity,
        queue_len=np.zeros(capacity.size),
        active=np.arange(capacity.size) < ctl.workers,
        period_s=1.0,
        now=now,
    )
    return ctl.step(report)


def skewed_keys(ctl, hot_worker: int = 0, factor: int = 3) -> np.ndarray:
    """Uniform keys, with those whose key group sits on `hot_worker` repeated `factor` times."""
    on_hot = ctl.assignment[key_groups(RNG_KEYS, ctl.groups)] == hot_worker
    return np.concatenate([RNG_KEYS] + [RNG_KEYS[on_hot]] * (factor - 1))


def test_registered_with_a_shared_controller():
    assert "albic" in groupings.names()
    described = groupings.describe("albic", workers=4)
    assert {p["name"] for p in described["params"]} >= {"groups", "max_migrations", "max_migr_cost", "time_limit"}
    assert described["controller"] is True
    ctl, sources = run()
    assert isinstance(ctl, AlbicController) and ctl.sources == sources
    assert ctl.groups == 32 and ctl.params["max_migrations"] == 2
    alone = groupings.make("albic", workers=3)  # without a shared controller: a private one
    assert alone.controller is not ctl and alone.route(RNG_KEYS[:10]).max() < 3
    with pytest.raises(ValueError):
        groupings.make("albic", workers=4, groups=2)


def test_batch_routing_equals_one_at_a_time_and_lookup():
    a, b = run(sources=1)[1][0], run(sources=1)[1][0]
    keys = RNG_KEYS[:500]
    batch = a.route(keys)
    single = np.concatenate([b.route(keys[i : i + 1]) for i in range(keys.size)])
    assert batch.dtype == np.int32 and np.array_equal(batch, single)
    assert np.array_equal(batch, a.controller.lookup(keys))
    assert np.array_equal(a.take_counts(), np.bincount(key_groups(keys, 32), minlength=32))
    assert a.take_counts().sum() == 0  # counting starts again
    a.feedback(AckReport.empty())
    a.resize(2)  # the controller handles scaling; the source keeps routing with the placement
    assert a.stats()["messages"] == 500


def test_balanced_run_does_not_churn():
    ctl, sources = run()
    for t in range(3):
        assert not period(ctl, sources, RNG_KEYS, [1000.0] * 4, now=t + 1.0)
    assert ctl.version == 0 and ctl.solves == 0


def test_new_version_within_budget_and_previous_kept_for_lookup():
    ctl, sources = run()
    keys = skewed_keys(ctl)
    old = ctl.lookup(RNG_KEYS)
    assert period(ctl, sources, keys, [1000.0] * 4)
    assert ctl.version == 1
    assert np.array_equal(ctl.lookup(RNG_KEYS, version=0), old)
    assert np.array_equal(ctl.lookup(RNG_KEYS, version=1), sources[0].route(RNG_KEYS))
    moved = ctl.placement(0) != ctl.placement(1)
    assert 0 < moved.sum() <= 2 and np.all(ctl.placement(0)[moved] == 0)  # off the hot worker only
    event = ctl.events[-1]
    assert event["load_distance_after"] < event["load_distance_before"] - ctl.params["min_gain"]
    with pytest.raises(ValueError):
        ctl.lookup(RNG_KEYS, version=7)
    with pytest.raises(TypeError):
        ctl.step("not a report")


def test_slow_workers_lose_key_groups():
    ctl, sources = run(max_migrations=3)
    capacity = [1000.0, 1000.0, 500.0, 500.0]  # workers 2 and 3 at half speed

    def spread():
        per_node = np.bincount(ctl.assignment[key_groups(RNG_KEYS, ctl.groups)], minlength=4) / np.array(capacity)
        return per_node.max() / per_node.min()

    initial = spread()
    for t in range(5):
        period(ctl, sources, RNG_KEYS, capacity, now=t + 1.0)
    groups_per_node = np.bincount(ctl.assignment, minlength=4)
    assert groups_per_node[2:].sum() < 16 <= groups_per_node[:2].sum()
    assert np.allclose(ctl.capacity, capacity)
    assert spread() < 0.6 * initial


def test_scale_in_drains_gradually_and_nothing_moves_in():
    ctl, sources = run()
    ctl.resize(3)
    assert ctl.draining == [3] and sources[0].workers == 4
    on_node_3 = [int(np.count_nonzero(ctl.assignment == 3))]
    for t in range(8):
        before = ctl.assignment.copy()
        period(ctl, sources, RNG_KEYS, [1000.0] * 4, now=t + 1.0)
        moved = before != ctl.assignment
        assert not np.any(ctl.assignment[moved] == 3)
        assert moved.sum() <= 2
        on_node_3.append(int(np.count_nonzero(ctl.assignment == 3)))
        if not ctl.draining:
            break
    assert ctl.draining == [] and sources[0].route(RNG_KEYS).max() < 3
    assert len(on_node_3) >= 5 and on_node_3 == sorted(on_node_3, reverse=True)  # 8 key groups, 2 per period


def test_scale_out_fills_the_new_worker():
    ctl, sources = run()
    ctl.resize(5)
    for t in range(4):
        period(ctl, sources, RNG_KEYS, [1000.0] * 5, now=t + 1.0)
    assert np.count_nonzero(ctl.assignment == 4) >= 4  # 32 key groups over 5 workers
    assert sources[1].route(RNG_KEYS).max() == 4


def test_cost_form_budget_counts_state():
    ctl, sources = run(max_migr_cost=2.5)
    keys = skewed_keys(ctl)
    assert period(ctl, sources, keys, [1000.0] * 4)
    cost = ctl._migration_cost()
    assert cost.mean() == pytest.approx(1.0)
    moved = ctl.placement(0) != ctl.placement(1)
    assert cost[moved].sum() <= 2.5 + 1e-9
    assert ctl.events[-1]["migration_cost"] <= 2.5 + 1e-9


def test_distinct_estimate():
    keys = RNG_KEYS[:3000]
    sketch = np.zeros((1, SKETCH_BITS), dtype=bool)
    sketch[0, seeded_hashes(keys, SKETCH_SALT, SKETCH_BITS)] = True
    assert distinct_estimate(sketch)[0] == pytest.approx(3000, rel=0.05)


# --- the collocation heuristic ----------------------------------------------------------------------------------


def test_score_pairs_and_collocation_factor_by_hand():
    out = np.array([[9.0, 1.0, 2.0], [3.0, 3.0, 3.0]])
    # row 0: avg 4, 4 * 1.5 = 6 < 9 only for column 0; row 1: avg 3, nothing above 4.5
    assert score_pairs(out).tolist() == [[0, 2]]
    # vertices: upstream 0, 1; downstream 2, 3, 4. Nodes: 0 -> a, 1 -> b, 2 -> a, 3 -> b, 4 -> b
    assignment = np.array([0, 1, 0, 1, 1])
    assert collocation_factor(out, assignment) == pytest.approx((9 + 3 + 3) / 21)


def test_balanced_partition_cuts_the_weak_edge():
    clique = np.ones((4, 4)) - np.eye(4)
    graph = np.zeros((8, 8))
    graph[:4, :4] = clique
    graph[4:, 4:] = clique
    graph[3, 4] = graph[4, 3] = 0.1
    labels = balanced_partition(graph, np.ones(8), 2)
    assert len(set(labels[:4])) == 1 and len(set(labels[4:])) == 1 and labels[0] != labels[7]
    three = balanced_partition(graph, np.ones(8), 3)
    assert sorted(np.bincount(three).tolist()) == [2, 3, 3]


def test_balanced_partition_is_the_same_every_call_where_the_fiedler_value_repeats():
    # 100 key groups talking one to one, the rest spread evenly: the Laplacian's second eigenvalue is repeated, so
    # any vector of its eigenspace is a Fiedler vector; the partition must still be one and the same every call
    # (ARPACK picked another each call from its hidden random state)
    upstream = 100
    out = np.full((upstream, upstream), 0.01)
    out[np.arange(50), np.arange(50)] = 1.0
    graph = traffic_graph(out)
    values = np.linalg.eigvalsh(np.diag(graph.sum(axis=1)) - graph)
    assert values[2] - values[1] < 1e-9 * values[-1]  # the case in question
    labels = [balanced_partition(graph, np.ones(2 * upstream), 10) for _ in range(4)]
    assert all((lab == labels[0]).all() for lab in labels)
    assert np.bincount(labels[0]).tolist() == [20] * 10


def _one_to_one_graph(upstream: int = 100) -> np.ndarray:
    out = np.full((upstream, upstream), 0.01)
    out[np.arange(upstream // 2), np.arange(upstream // 2)] = 1.0
    return traffic_graph(out)


def test_balanced_partition_does_not_depend_on_the_eigenbasis_lapack_returns(monkeypatch):
    # another OpenBLAS kernel (another machine) returns another basis of the repeated Fiedler eigenspace, and other
    # signs: the partition must not change. Rotate the basis within that eigenspace and flip every sign.
    graph = _one_to_one_graph()
    first = balanced_partition(graph, np.ones(graph.shape[0]), 10)
    eigh = np.linalg.eigh
    rng = np.random.default_rng(5)

    def other_kernel(matrix):
        values, vectors = eigh(matrix)
        vectors = -vectors
        space = 1 + np.flatnonzero(np.abs(values[1:] - values[1]) < 1e-9 * values[-1])  # never the constant one
        if space.size > 1:
            rotation = np.linalg.qr(rng.standard_normal((space.size, space.size)))[0]
            vectors[:, space] = vectors[:, space] @ rotation
        return values, vectors

    monkeypatch.setattr(np.linalg, "eigh", other_kernel)
    assert (balanced_partition(graph, np.ones(graph.shape[0]), 10) == first).all()


ROOT = Path(__file__).resolve().parents[1]
COLA_BY_KERNEL = """
import hashlib, numpy as np
from experiments.albic.chain import MEAN_NODE, one_to_one, spread
from groupings import collocation
rng = np.random.default_rng(3)
out = one_to_one(200, 0.5, rng)
loads = MEAN_NODE * 20 / 400 * (1.0 + rng.uniform(-0.05, 0.05, 400))
plan, _ = collocation.cola(out, spread(400, 20, rng), loads, np.ones(20, bool), np.zeros(20, bool))
print(hashlib.sha256(plan.tobytes()).hexdigest())
"""


def test_cola_gives_the_same_plan_on_every_openblas_kernel():
    # OpenBLAS picks its kernel by CPU; OPENBLAS_CORETYPE picks one by hand, so one machine stands in for others
    # (Prescott runs on every x86-64 CPU; elsewhere the variable is ignored and the two runs agree trivially)
    if os.environ.get("OPENBLAS_CORETYPE"):
        pytest.skip("this machine chooses its OpenBLAS kernel itself (OPENBLAS_CORETYPE is set)")
    plans = set()
    for kernel in ("", "Prescott"):
        env = dict(os.environ, **({"OPENBLAS_CORETYPE": kernel} if kernel else {}))
        done = subprocess.run([sys.executable, "-c", COLA_BY_KERNEL], env=env, capture_output=True, text=True,
                              timeout=300, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        plans.add(done.stdout.strip())
    assert len(plans) == 1


def test_collocated_set_over_max_pl_is_split_into_parts():
    # upstream key group 0 sends 10 to each of downstream 1-4 and 0.1 to 5-8: avg 5.05, only 1-4 score (> 7.6)
    out = np.array([[10.0] * 4 + [0.1] * 4])
    assert traffic_graph(out).shape == (9, 9)
    assignment = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1])  # the scored pairs are all collocated: one set
    loads = np.full(9, 10.0)
    plan = plan_collocation(out, assignment, loads, np.ones(9), 8, max_pl=25.0)
    assert plan.pair is None and plan.pinned == {}
    members = np.concatenate(plan.units)
    assert np.unique(members).size == members.size and set(members) <= {0, 1, 2, 3, 4}
    assert all(1 < p.size and loads[p].sum() <= 25.0 for p in plan.units)  # set load 50 > maxPL 25: split
    whole = plan_collocation(out, assignment, loads, np.ones(9), 8, max_pl=60.0)
    assert [sorted(p.tolist()) for p in whole.units] == [[0, 1, 2, 3, 4]]
    assert plan_collocation(out, assignment, loads, np.ones(9), 8, max_pl=0.0).units == []  # the plain MILP
    by_cost = plan_collocation(out, assignment, loads, np.ones(9), 2, max_pl=60.0)  # maxMigrCost 2
    assert all(p.size <= 2 for p in by_cost.units)


def test_albic_raises_collocation_one_pair_at_a_time():
    rng = np.random.default_rng(1)
    u = d = 16
    nodes = 4
    out = rng.uniform(0, 1, (u, d))
    out[np.arange(u), np.arange(d)] += 50  # one-to-one traffic
    assignment = np.arange(u + d) % nodes
    assignment[u:] = (assignment[u:] + 1) % nodes  # every communicating pair starts apart
    loads = 50 / 8 * (1 + rng.uniform(-0.05, 0.05, u + d))
    active, kill = np.ones(nodes, bool), np.zeros(nodes, bool)
    start = collocation_factor(out, assignment)
    pick = np.random.default_rng(0)
    for _ in range(6):
        new, info = albic(out, assignment, loads, None, 4, active, kill, time_limit=1.0, rng=pick)
        assert np.count_nonzero(new != assignment) <= 4
        assert info["load_distance"] <= 10.0
        if info["pair"] is not None:
            a, b = info["pair"]
            assert new[a] == new[b]
        assignment = new
    assert collocation_factor(out, assignment) >= start + 0.15


def test_improve_step_pins_the_busiest_pair_on_the_less_loaded_node():
    # vertices: upstream 0, 1; downstream 2, 3. Pairs (0, 2) (20 > 1.5 * 10.5) and (1, 3) (5 > 1.5 * 3) score
    out = np.array([[20.0, 1.0], [1.0, 5.0]])
    assignment = np.array([0, 1, 1, 1])  # (1, 3) collocated on node 1; (0, 2) apart
    loads = np.array([5.0, 5.0, 5.0, 5.0])  # node 0 carries 5, node 1 carries 15
    plan = plan_collocation(out, assignment, loads, np.ones(4), 4, max_pl=25.0)
    assert plan.pair == (0, 2) and plan.pinned == {0: 0}
    assert sorted(sorted(p.tolist()) for p in plan.units) == [[0, 2], [1, 3]]
    # never onto a node being removed: node 0 marked, so the pair goes to node 1
    marked = plan_collocation(out, assignment, loads, np.ones(4), 4, max_pl=25.0, kill_mask=np.array([True, False]))
    assert marked.pinned == {0: 1}
    # the pair's move must fit the budget, or no pair is added this time
    assert plan_collocation(out, assignment, loads, np.ones(4), 0.5, max_pl=25.0).pair is None
