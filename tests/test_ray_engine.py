"""The Ray engine: exactness, the simulator's summary keys, acks to their sender only, flow control, measured
capacity, a worker killed mid-run, controller strategies, and clear errors. Runs are small (one shared Ray)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from groupings.hashing import hash_keys
from topo.data.streams import StreamArrays
from topo.model import WindowMeter
from topo.ray_engine import run_ray, work_cgroup
from topo.ray_engine.aggregator import Aggregator
from topo.ray_engine.driver import check_supported, parse_chaos
from topo.ray_engine.protocol import WIRE, Flush, batch_log, concat_logs, concat_records
from topo.ray_engine.work_cgroup import cgroup_quota_possible
from topo.results.metrics import RunResult
from topo.schedule import Change
from topo.sim import simulate
from topo.spec import SpecError, TopologySpec

# its Ray runs are held to the simulator's throughput and to their configured capacities
pytestmark = pytest.mark.timing

STARVED = 0.7  # a cpu worker that got less than this share of a core while burning did not get its CPU


def zipf_stream(messages: int, keys: int = 2000, z: float = 1.2, seed: int = 3) -> StreamArrays:
    """A skewed stream of `messages` over at most `keys` distinct keys."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(z, messages), keys) - 1
    return StreamArrays(hash_keys(np.array([f"k{i}" for i in range(keys)], dtype=object))[ranks])


def check_run(summary: dict, spec: TopologySpec) -> None:
    """What every Ray run must show: exact, nothing lost or doubled, windows never over max_pending."""
    assert summary["engine"] == "ray"
    assert summary["exact"] is True
    assert summary["tuples_processed"] == summary["tuples_in"]
    facts = summary["ray"]
    assert facts["max_in_flight"] <= spec.max_pending
    assert facts["foreign_acks"] == 0
    # every call answered once, to its sender: an ack, or an actor error that made the source replay
    assert facts["acks"] + facts["failures"] == facts["sub_batches"] + facts["replays"]
    if not facts["chaos"]:
        assert facts["acks_per_source"] == facts["sub_batches_per_source"]
    assert facts["flushes"]["duplicate"] == 0
    # in sleep mode each process's scheduler thread says how much of the run it was on the CPU (Linux)
    if facts["work"] == "sleep" and hasattr(time, "pthread_getcpuclockid"):
        busy = [p["stepping_busy"] for p in facts["recovery"]["processes"] if p["workers"]]
        assert busy and all(b is None or 0.0 < b < 1.05 for b in busy), busy
        assert summary["headroom"]["stepping_busy_max"] == max((b for b in busy if b is not None), default=None)


# --- without Ray


def test_aggregator_merges_each_batch_once_and_fences_old_incarnations():
    agg = Aggregator("wordcount", workers=1, sources=2, shares=[3, 3], checkpoint_dir=None, checkpoint_every_s=None)
    first, _ = agg.register(0, pid=1, node={})
    log = batch_log(np.arange(3), 0, np.zeros(3), 0.0, 0.0, np.ones(3))

    def flush(incarnation, pairs, keys):
        state = agg.op.update(agg.op.empty(), np.asarray(keys, np.uint64))
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        return agg.flush(Flush(0, incarnation, pairs[:, 0].astype(np.int32), pairs[:, 1], state, log))[0]

    assert flush(first, [(0, 0), (1, 0)], [5, 5])
    second, _ = agg.register(0, pid=2, node={})
    assert not flush(first, [(0, 1)], [7])  # a late flush of the crashed incarnation
    assert not flush(second, [(0, 0), (0, 2)], [5])  # batch (0, 0) is merged already: nothing of it is taken
    assert flush(second, [(0, 2)], [9])
    assert agg.committed(0, [0, 1, 2]) == [0, 2]
    state, merged_log, stats = agg.result()
    assert agg.op.count_of(state, np.array([5, 7, 9], np.uint64)).tolist() == [2, 0, 1]
    assert stats["stale"] == 1 and stats["duplicate"] == 1 and stats["flushes"] == 2
    assert len(merged_log["seq"]) == 6 and set(merged_log["worker"].tolist()) == {0}


def test_batch_log_serves_tuples_one_after_another():
    log = batch_log(np.array([4, 9]), 1, np.array([0.5, 0.6]), 1.0, 2.0, np.array([2.5, 3.0]))
    assert log["start_s"].tolist() == [2.0, 2.5]
    assert log["source"].tolist() == [1, 1] and log["enqueue_s"].tolist() == [1.0, 1.0]
    assert len(concat_logs([])["seq"]) == 0


def test_records_are_joined_whole_and_in_order_whatever_their_layout():
    records = np.zeros(12, WIRE)
    records["seq"], records["key"], records["arrival"] = np.arange(12), np.arange(12) * 7, np.arange(12) / 4
    # slices of one step's records, as a flush gathers them, and a strided one, which no data path makes
    parts = [records[0:3], records[5:6], records[::4], records[3:3]]
    joined = concat_records(parts)
    assert joined.dtype == WIRE and joined.flags.writeable
    assert joined.tolist() == [r for p in parts for r in p.tolist()]
    assert len(concat_records([])) == 0


def test_window_meter_counts_the_last_window():
    meter = WindowMeter(0.1, now=0.0, min_marks=2)
    meter.mark(0.05, arrived=10, busy_s=0.01, served=5)
    meter.mark(0.20, arrived=30, busy_s=0.05, served=20)
    span, arrived, busy, served = meter.since(0.25, 40, 0.08, 30)
    assert (span, arrived, served) == pytest.approx((0.2, 30, 25))
    assert busy == pytest.approx(0.07)


def test_window_meter_reaches_back_over_sparse_arrivals():
    # a saturated slow worker: a batch of 12 arrives 2 ms after each 40 ms service ends, a window is 20 ms
    meter, now, arrived, served = WindowMeter(0.02, now=0.0), 0.0, 12, 0
    meter.mark(0.0, arrived, 0.0, served)
    for _ in range(10):
        now += 0.04
        served += 12
        meter.mark(now, arrived, now, served)
        span, got, _, _ = meter.since(now, arrived, now, served)
        assert got > 0  # a one-slot window would hold no arrival here, and read the worker as idle
        arrived += 12
        meter.mark(now + 0.002, arrived, now, served)
    assert got / span == pytest.approx(12 / 0.04, rel=0.15)


def test_controller_replica_round_trip():
    import pickle

    import groupings

    for name in ("gedik", "albic"):
        master = groupings.make_controller(name, 3, seed=0)
        source_side = groupings.make(name, workers=3, seed=1, controller=groupings.make_controller(name, 3, seed=0))
        source_side.route(np.arange(1, 5000, dtype=np.uint64) * np.uint64(2654435761), 0.0)
        assert isinstance(source_side, groupings.Replicated)
        snap = pickle.loads(pickle.dumps(source_side.snapshot()))
        master.sources = [snap]
        new = source_side.adopt(pickle.loads(pickle.dumps(master.replica())))
        assert source_side.controller is new and new.sources == [source_side]
        assert master.sources == [snap]  # the copy shipped never carries the statistics


def test_bad_chaos_and_cpu_shares_are_one_line_errors():
    spec = TopologySpec(workers=2)
    assert parse_chaos(["kill-worker:1@2.5"], spec, False) == [("kill-worker", 1, 2.5)]
    for bad in (["kill-worker:5@1"], ["explode:0@1"], ["kill-worker:x"], ["kill-controller@1"]):
        with pytest.raises(SpecError):
            parse_chaos(bad, spec, False)
    with pytest.raises(SpecError, match="more than one core"):
        check_supported(TopologySpec(capacities=(1.0, 1.0, 1.0, 3.0), core_share=0.4), work="cpu")
    with pytest.raises(SpecError, match="--work"):
        check_supported(TopologySpec(), work="spin")


# --- with Ray


# kg and fish on Ray run in the slow suite (kg also in the chaos matrix); pkg and key_shared here
# key_shared by default; the compiled groupings' Ray runs are exact in the join/leave (pkg), credits and guard (sg)
# tests too
@pytest.mark.parametrize("grouping", [pytest.param(g, marks=pytest.mark.slow) for g in ("kg", "pkg", "fish")]
                         + ["key_shared"])
def test_small_runs_are_exact_with_the_simulators_keys(ray_session, grouping):
    spec = TopologySpec(grouping=grouping, workers=2, sources=2, cost_ms=0.0, batch_size=400, max_pending=4)
    stream = zipf_stream(8000)
    result = run_ray(spec, stream)
    summary = result.summary
    check_run(summary, spec)
    assert summary["tuples_in"] == 8000
    sim = simulate(spec, stream).summary
    assert set(summary) - {"ray"} == set(sim) - {"sim"}
    assert {k for row in sim["per_worker"] for k in row} <= {k for row in summary["per_worker"] for k in row}
    assert summary["distinct_keys"] == sim["distinct_keys"]
    assert len(result.latency) == 8000 and result.timeseries.num_rows > 0
    assert sorted(result.log.seq.tolist()) == list(range(8000))


def test_acks_tell_a_backlog_aware_grouping_every_tuple_it_sent(ray_session):
    # flink_adaptive's backlog is sent minus acked per channel: at the end of an exact run every tuple was acked
    spec = TopologySpec(grouping="flink_adaptive", workers=3, sources=2, capacities=(1.0, 1.0, 0.3), cost_ms=0.1,
                        batch_size=100, max_pending=4)
    summary = run_ray(spec, zipf_stream(6000)).summary
    check_run(summary, spec)
    stats = summary["grouping_stats"]
    assert len(stats) == 2 and sum(s["messages"] for s in stats) == 6000
    assert all(s["backlog"] == 0 for s in stats)


def test_cg_signals_reach_only_the_source_they_were_addressed_to(ray_session):
    # an uneven, loaded pair of workers makes CG's delegation talk; each source hears only its own acks
    spec = TopologySpec(grouping="cg", workers=2, sources=2, capacities=(1.0, 0.25), cost_ms=0.1, batch_size=100,
                        max_pending=4, params={"t0": 0.02})
    stream = zipf_stream(6000)
    summary = run_ray(spec, stream).summary
    check_run(summary, spec)
    facts = summary["ray"]
    received = [s["increase"] + s["decrease"] for s in summary["grouping_stats"]]
    assert sum(received) > 0
    assert facts["signals_sent_to_source"] == facts["signals_received_per_source"] == received
    assert sum(summary["signals"].values()) == sum(received)
    sim = simulate(spec, stream).summary
    assert set(summary) - {"ray"} == set(sim) - {"sim"}


# sleep mode is slow-only: flow control does not depend on how a worker spends its time, and sleep-mode capacity is
# checked against the simulator by test_credits_mean_the_same_on_both_engines
@pytest.fixture(scope="module", params=[pytest.param("sleep", marks=pytest.mark.slow), "cpu"])
def overload(request, ray_session):
    """Input at 3x the workers' capacity, windows of 2 batches, 2 ms per tuple at capacity 1 and 0.5."""
    # in cpu mode, where the machine allows it, the workers also run under a kernel CPU quota (--cgroup-quota)
    quota = request.param == "cpu" and cgroup_quota_possible()
    # one process per worker, so that each worker's quota is its own (a shared process gets the sum)
    spec = TopologySpec(grouping="sg", engine="ray", workers=2, sources=2, capacities=(1.0, 0.5), cost_ms=2.0,
                        rate=2250.0, batch_size=20, max_pending=2, cgroup_quota=quota, worker_processes=2)
    return spec, run_ray(spec, zipf_stream(600), work=request.param).summary


def test_flow_control_bounds_batches_in_flight_under_overload(overload):
    spec, summary = overload
    check_run(summary, spec)
    assert summary["ray"]["max_in_flight"] == spec.max_pending  # the window filled and held
    assert all(max(pair) <= spec.max_pending for pair in summary["ray"]["max_in_flight_per_pair"])
    # a worker never holds more than its sources may have in flight
    assert summary["queue_max"] <= spec.sources * spec.max_pending * spec.batch_size


def test_measured_capacity_matches_the_configured_one(overload):
    spec, summary = overload
    for row, emulator in zip(summary["per_worker"], summary["ray"]["emulators"], strict=True):
        # a cpu worker on a machine busy with other work may not get its share; then it must say so, and the run's
        # verdict names the host
        starved = emulator["cpu_availability"] < STARVED
        if row["measured_capacity"] < 0.9 * row["capacity"] and summary["ray"]["work"] == "cpu":
            assert summary["headroom"]["bottleneck"] == "host"
        assert (row["measured_capacity"] == pytest.approx(row["capacity"], rel=0.10) or starved
                or summary["headroom"]["bottleneck"] == "host")
        assert row["node"]["ip"] and row["node"]["node_id"]


def test_cgroup_quotas_are_set_per_worker_and_lifted_after(overload):
    spec, summary = overload
    quotas = summary["ray"]["cgroup_quotas"]
    if not spec.cgroup_quota:
        assert quotas == []
        return
    [start] = quotas
    assert [row["applied"] for row in start["workers"]] == [True, True]
    assert start["workers"][0]["cores"] > start["workers"][1]["cores"]  # the quota follows the capacity
    root = work_cgroup._v2_root() or work_cgroup._v1_cpu_root()
    assert not list(root.glob(f"{work_cgroup.GROUP_PREFIX}*"))  # no group is left behind


@pytest.mark.slow  # the default suite kills workers in tests/test_chaos.py
def test_a_worker_killed_mid_run_loses_nothing(ray_session):
    # the separate layout: worker 1's process dies alone, and the sources that survive it replay what it lost (in
    # Storm's model the sources would die with it; tests/test_chaos.py kills those processes)
    spec = TopologySpec(grouping="pkg", workers=2, sources=2, cost_ms=0.05, rate=10000.0, batch_size=200,
                        aggregate_every_s=0.3, engine="ray", worker_processes=2)
    summary = run_ray(spec, zipf_stream(20000), chaos=(("kill-worker", 1, 0.8),)).summary
    check_run(summary, spec)
    facts = summary["ray"]
    [event] = facts["chaos"]
    assert event["actor"] == "worker 1" and event["pid"] > 0 and "skipped" not in event
    assert facts["incarnations"][1] == 2
    assert facts["replays"] >= 1 and facts["recoveries"] >= 1
    assert summary["per_worker"][1]["incarnations"] == 2


# gedik's controller on Ray runs by default in tests/test_chaos.py's repeated-kill run (which also kills it)
@pytest.mark.parametrize("grouping", [pytest.param("gedik", marks=pytest.mark.slow), "albic"])
def test_controller_strategies_push_versions_to_every_source(ray_session, grouping):
    params = {"period": 0.25, **({"window": 2000} if grouping == "gedik" else {})}
    spec = TopologySpec(grouping=grouping, workers=2, sources=2, capacities=(1.0, 0.5), cost_ms=0.05, rate=15000.0,
                        batch_size=200, params=params)
    stream = zipf_stream(20000)
    summary = run_ray(spec, stream).summary
    check_run(summary, spec)
    assert set(summary) - {"ray"} == set(simulate(spec, stream).summary) - {"sim"}
    version = summary["controller"]["version"]
    assert version >= 1 and summary["ray"]["controller_pushes"] == version
    assert all(stats["version"] == version for stats in summary["grouping_stats"])
    assert "repartitions" in summary and summary["migrated_keys"] >= 0


@pytest.mark.parametrize("grouping", ["pkg", pytest.param("albic", marks=pytest.mark.slow)])
def test_workers_join_and_leave_by_time_and_by_messages(ray_session, grouping):
    # a third worker joins at 0.4 s; after 20000 messages (2 s) it leaves again, and capacities change at 5000
    # messages; albic needs a few of its 0.25 s periods after the join to hand the newcomer key groups
    schedule = (Change(0.4, "seconds", 3), Change(20000.0, "messages", 2))
    spec = TopologySpec(grouping=grouping, workers=2, sources=2, cost_ms=0.05, rate=10000.0, batch_size=200,
                        scale_schedule=schedule, capacities=(1.0, 1.0, 1.0),
                        capacity_schedule=(Change(5000.0, "messages", (1.0, 0.5, 1.0)),),
                        params={"period": 0.25} if grouping == "albic" else {})
    result = run_ray(spec, zipf_stream(25000))
    summary = result.summary
    check_run(summary, spec)
    joined, left = summary["active_workers"][1:]
    assert (joined["workers"], left["workers"]) == (3, 2)
    assert 0.4 <= joined["at_s"] < left["at_s"]
    [change] = summary["capacity_changes"]
    assert change["capacities"] == [1.0, 0.5, 1.0] and 0 < change["at_s"] < left["at_s"]
    # the third worker served tuples, only ones that reached the topology while it was part of it
    third = result.log.worker == 2
    assert third.any() and summary["per_worker"][2]["tuples"] == int(third.sum())
    assert result.log.enqueue_s[third].min() >= joined["at_s"]
    if grouping == "pkg":  # albic moves a leaving worker's keys off it over its next periods, within its budget
        assert result.log.arrival_s[third].max() <= left["at_s"] + 0.3
    assert summary["imbalance_active_time"] >= 0 and len(summary["active_seconds"]) == 3
    assert set(summary) - {"ray"} == set(simulate(spec, zipf_stream(25000)).summary) - {"sim"}


def test_network_delay_is_emulated_both_ways(ray_session):
    spec = TopologySpec(grouping="kg", workers=2, sources=1, cost_ms=0.0, rate=2000.0, batch_size=50,
                        max_pending=1, net_delay_ms=25.0)
    summary = run_ray(spec, zipf_stream(1000)).summary
    check_run(summary, spec)
    # every tuple spends one delay on the wire; with one buffer in flight per channel (two workers), the ack's
    # delay holds the next one back
    assert summary["latency_ms"]["p50"] >= 25.0
    assert summary["throughput_tps"] < 2 * 50 / 0.05 * 1.05


def test_a_placement_no_node_offers_fails_fast(ray_session):
    spec = TopologySpec(grouping="kg", workers=2, sources=1)
    started = time.perf_counter()
    with pytest.raises(SpecError, match="no_such_resource"):
        run_ray(spec, zipf_stream(100), placement=("no_such_resource", "no_such_resource"))
    assert time.perf_counter() - started < 30


@pytest.mark.slow
def test_a_minute_at_three_times_capacity_stays_bounded_and_finishes(ray_session):
    # two workers serve 2,000 tuples/s together; the input comes at 6,000/s for 60 s
    spec = TopologySpec(grouping="sg", workers=2, sources=2, cost_ms=1.0, rate=6000.0, duration=60.0,
                        batch_size=100, max_pending=4)
    summary = run_ray(spec, zipf_stream(360_000)).summary
    check_run(summary, spec)
    # backpressure held the input at the sources: what the workers hold never outgrew the windows
    assert summary["queue_max"] <= spec.sources * spec.max_pending * spec.batch_size
    assert summary["ray"]["max_in_flight"] <= spec.max_pending
    assert 0.9 * 2000 <= summary["throughput_tps"] <= 1.05 * 2000


# --- one model: the same spec means the same on both engines


def _both(spec: TopologySpec, stream) -> tuple[RunResult, RunResult]:
    return simulate(spec.with_(engine="sim"), stream), run_ray(spec.with_(engine="ray"), stream)


def test_credits_mean_the_same_on_both_engines(ray_session):
    # one slow worker, one fast, input at twice what they take: every channel's credits fill and hold
    spec = TopologySpec(grouping="sg", workers=2, sources=2, capacities=(1.0, 0.5), cost_ms=1.0, rate=3000.0,
                        batch_size=20, linger_ms=5.0, max_pending=3)
    results = _both(spec, zipf_stream(1500))
    sim, ray_summary = (r.summary for r in results)
    check_run(ray_summary, spec)
    for result in results:
        summary = result.summary
        # credits per (source, worker) channel: each pair reached max_pending, and none went past it
        pairs = [s["max_in_flight"] for s in summary["source_stats"]]
        assert all(max(pair) == spec.max_pending for pair in pairs)
        # a worker holds at most every source's credits of full buffers
        assert summary["queue_max"] <= spec.sources * spec.max_pending * spec.batch_size
        # the input outran the workers, so the sources waited for credits
        assert summary["headroom"]["source_blocked_max"] > 0.2
        # one batch table: the same first columns, every buffer within its capacity, every tuple in one
        batches = result.extras["batches"]
        assert batches.column_names[:6] == ["source", "worker", "batch_id", "size", "sent_s", "ack_s"]
        sizes = batches.column("size").to_numpy()
        assert sizes.max() <= spec.batch_size and sizes.sum() == summary["tuples_processed"]
    # shuffle into equal halves: the slow worker bounds both engines alike
    assert ray_summary["throughput_tps"] == pytest.approx(sim["throughput_tps"], rel=0.1)


def test_operator_parameters_take_effect_on_ray(ray_session):
    # top-k summaries of 20 counters: every flushed state holds at most 20 keys (the default holds 1,000)
    spec = TopologySpec(grouping="kg", workers=2, sources=1, cost_ms=0.0, batch_size=200, operator="topk",
                        operator_params={"k": 3, "counters": 20}, aggregate_every_s=0.05)
    summary = run_ray(spec, zipf_stream(3000)).summary
    check_run(summary, spec)
    flushes = summary["ray"]["flushes"]
    assert 0 < flushes["keys_flushed"] <= 20 * flushes["merged"]
    default = run_ray(spec.with_(operator_params={}), zipf_stream(3000)).summary
    assert default["ray"]["flushes"]["keys_flushed"] > 20 * default["ray"]["flushes"]["merged"]


def test_the_guard_says_when_the_engine_cannot_carry_the_rate(ray_session):
    # zero cost: no worker is ever busy, so a rate the sources cannot move is the engine's limit, not the grouping's
    spec = TopologySpec(grouping="sg", workers=2, sources=1, cost_ms=0.0, rate=2_000_000.0, batch_size=10,
                        linger_ms=0.0, max_pending=1)
    summary = run_ray(spec, zipf_stream(4_000)).summary
    check_run(summary, spec)
    room = summary["headroom"]
    assert room["bottleneck"] == "engine" and "engine" in room["note"]
    assert room["delivered_share"] < 0.98
    # the same spec in the simulator moves tuples in no time: it carries the rate
    sim = simulate(spec.with_(engine="sim"), zipf_stream(4_000)).summary
    assert sim["headroom"]["bottleneck"] == "none"


@pytest.mark.slow  # two Ray starts; the default suite's Ray runs share one
def test_runs_that_each_start_their_own_ray_in_one_process():
    """One driver process, two runs, each starting (and stopping) a local Ray, as `bench_processes.py` and a
    script that calls `run_ray` twice do: the second run gets a topic of its own Ray (in a subprocess, since this
    pytest process may hold a Ray)."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("from topo.data.streams import stream_from_spec\n"
            "from topo.ray_engine import run_ray\n"
            "from topo.spec import TopologySpec\n"
            "stream = stream_from_spec('zipf:z=1.0,keys=500,messages=2000,seed=3')\n"
            "spec = TopologySpec(engine='ray', grouping='pkg', stream='x', rate=8000.0, seed=1, workers=2, sources=1,"
            " capacities=(1.0, 1.0))\n"
            "print([run_ray(spec, stream).summary['exact'] for _ in range(2)])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[True, True]"
