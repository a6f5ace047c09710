"""Storm's max spout pending (`--max-spout-pending`): a source has at most that many tuples routed and not yet
acked, whatever channel they took, on both engines; with saturating input the run is then a closed loop whose
mean latency is its population over its throughput (Little's law)."""

from __future__ import annotations

import pytest

from topo.data.dataset import load_stream
from topo.sim import simulate
from topo.spec import RAY_TRANSIT_MS, SpecError, TopologySpec

STREAM = "zipf:z=1.4,keys=1000,messages=20000,seed=3"
PENDING = 60


def spec(grouping: str, engine: str = "sim", **kw) -> TopologySpec:
    return TopologySpec(grouping=grouping, engine=engine, workers=4, sources=2, cost_ms=0.5, stream=STREAM,
                        batch_size=10, max_pending=8, linger_ms=1.0, max_spout_pending=PENDING, **kw)


@pytest.mark.parametrize("grouping", ["kg", "sg"])
def test_a_closed_loop_keeps_its_population_and_obeys_littles_law(grouping):
    summary = simulate(spec(grouping), load_stream(STREAM)).summary
    assert summary["exact"] and summary["tuples_processed"] == 20000
    assert all(0 < s["max_pending_tuples"] <= PENDING for s in summary["source_stats"])
    assert summary["config"]["max_spout_pending"] == PENDING
    population = 2 * PENDING  # two sources, each always refilled at once (saturating input)
    little = population / summary["throughput_tps"] * 1e3
    assert summary["latency_ms"]["mean"] == pytest.approx(little, rel=0.15)


def test_the_hot_key_holds_the_population_under_key_grouping():
    # the same population waits behind kg's hottest worker: a longer mean latency than sg's at a lower throughput
    kg, sg = (simulate(spec(g), load_stream(STREAM)).summary for g in ("kg", "sg"))
    assert kg["throughput_tps"] < sg["throughput_tps"] / 1.5
    assert kg["latency_ms"]["mean"] > 1.5 * sg["latency_ms"]["mean"]


def test_without_it_credits_alone_bound_what_is_in_flight():
    summary = simulate(spec("sg").with_(max_spout_pending=None), load_stream(STREAM)).summary
    assert max(s["max_pending_tuples"] for s in summary["source_stats"]) > PENDING
    with pytest.raises(SpecError, match="--max-spout-pending"):
        spec("sg").with_(max_spout_pending=0)


@pytest.mark.slow  # one Ray run, about 6 s
def test_the_ray_engine_keeps_the_same_limit(ray_session):
    from topo.ray_engine import run_ray

    stream = load_stream(STREAM)
    summary = run_ray(spec("kg", engine="ray"), stream).summary
    assert summary["exact"] and summary["tuples_processed"] == 20000
    assert all(0 < s["max_pending_tuples"] <= PENDING for s in summary["source_stats"])
    # a closed loop's throughput depends on each round trip: the simulator adds Ray's own transit to predict it
    sim = simulate(spec("kg", transit_ms=RAY_TRANSIT_MS), stream).summary
    assert summary["throughput_tps"] == pytest.approx(sim["throughput_tps"], rel=0.15)
