"""Time dilation (--time-scale K) and the guard that says what bounded a run (engine, host) and which K would help.

A spec at K runs K times slower on the actors and reports in emulated time: where both have headroom, K = 4 gives
the summary K = 1 gives. The cpu-mode guard: workers that serve below their capacity make the verdict `host`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from groupings.control import MigrationLog
from topo.ray_engine.dilation import shrink, stretch, stretch_events
from topo.ray_engine.outputs import Collected
from topo.ray_engine.work import CPU_BUDGET, MAX_CORE_SHARE, core_share
from topo.results.headroom import EMULATOR, HOST, headroom, suggest_time_scale
from topo.schedule import MESSAGES, SECONDS, Change
from topo.spec import SpecError, TopologySpec

ROOT = Path(__file__).resolve().parents[1]

# --- without Ray


def test_stretch_makes_every_duration_k_times_longer_and_rates_k_times_lower():
    spec = TopologySpec(grouping="cg", workers=4, cost_ms=1.0, rate=2000.0, duration=3.0, linger_ms=20.0,
                        net_delay_ms=2.0, aggregate_every_s=0.5, checkpoint_every_s=1.0, sample_interval_s=0.1,
                        capacity_schedule=(Change(2.0, SECONDS, (1.0, 1.0, 2.0, 2.0)),
                                           Change(500, MESSAGES, (1.0, 1.0, 1.0, 1.0))),
                        scale_schedule=(Change(1.5, SECONDS, 3),), time_scale=4.0)
    wall = stretch(spec)
    assert (wall.cost_ms, wall.rate, wall.duration, wall.linger_ms, wall.net_delay_ms) == (4.0, 500.0, 12.0, 80.0, 8.0)
    assert (wall.aggregate_every_s, wall.checkpoint_every_s, wall.sample_interval_s) == (2.0, 4.0, 0.4)
    # times stretch; message counts are the same messages whatever the clock
    assert [(c.at, c.unit) for c in wall.capacity_schedule] == [(8.0, SECONDS), (500, MESSAGES)]
    assert wall.scale_schedule[0].at == 6.0
    # the grouping's own spans of time stretch too, its defaults included (cg's time slot t0)
    import groupings

    t0 = next(p["default"] for p in groupings.describe("cg")["params"] if p["name"] == "t0")
    assert float(wall.params["t0"]) == pytest.approx(4.0 * float(t0))
    assert stretch(spec.with_(params={"t0": "0.5"})).params["t0"] == 2.0
    assert stretch(spec.with_(time_scale=1.0)) == spec.with_(time_scale=1.0)
    assert stretch_events([("kill-worker", 1, 2.5)], 4.0) == [("kill-worker", 1, 10.0)]


def test_shrink_puts_every_reported_time_back_in_emulated_time():
    t0 = 1000.0
    log = {"seq": np.arange(2), "source": np.zeros(2, np.int32), "worker": np.zeros(2, np.int32),
           "arrival_s": np.array([t0 + 4.0, t0 + 8.0]), "enqueue_s": np.array([t0 + 4.0, t0 + 8.0]),
           "start_s": np.array([t0 + 4.0, t0 + 8.0]), "finish_s": np.array([t0 + 8.0, t0 + 12.0])}
    moved = MigrationLog(pause_s=0.4, events=[{"at_s": 4.0, "version": 1, "keys": 3, "pause_s": 0.4}])
    got = Collected(
        t0=t0, state=None, log=log,
        aggregator={"registrations": [{"worker": 0, "at": t0 + 8.0}], "restored": None},
        sources=[{"index": 0, "batches": np.array([[1, 0, 2, 4.0, 8.0, 1]], np.float64), "resumed": None,
                  "node": {"blocked_s": 4.0, "input_lag_max_ms": 40.0, "input_lag_mean_ms": 4.0, "loop_s": 12.0,
                           "busy_fraction": 0.5, "routed": 2, "late": {"bins": [[40.0, 1]], "max_ms": 48.0}}}],
        workers=[{"transit_ms": {"p50": 4.0, "p99": 8.0, "max": 12.0, "count": 3}, "paused_s": 0.4,
                  "emulator": {"busy_s": 8.0, "lost_s": 0.4, "cost_ms": 4.0, "cpu_s": 1.0,
                               "late_ms": {"p50": 8.0, "p99": 16.0, "max": 20.0, "count": 3}}}],
        control={"migrations": moved}, chaos=[{"action": "kill-worker", "at_s": 8.0, "done_s": 8.4}],
        failures=[{"actor": "worker 0", "detected_s": 8.4, "back_s": 9.2}],
        capacity_history=[(0.0, (1.0,)), (8.0, (2.0,))], active_history=[(0.0, 1)],
        facts={"aggregate_every_s": 2.0, "checkpoint_every_s": 4.0, "cgroup_quotas": []},
    )
    out = shrink(got, 4.0)
    assert out.log["arrival_s"].tolist() == [t0 + 1.0, t0 + 2.0]
    assert out.log["finish_s"].tolist() == [t0 + 2.0, t0 + 3.0]
    assert out.aggregator["registrations"][0]["at"] == t0 + 2.0
    assert out.sources[0]["batches"][0].tolist() == [1, 0, 2, 1.0, 2.0, 1]
    node = out.sources[0]["node"]
    assert (node["blocked_s"], node["input_lag_max_ms"], node["loop_s"], node["busy_fraction"]) == (1.0, 10.0, 3.0, 0.5)
    assert node["late"] == {"bins": [[10.0, 1]], "max_ms": 12.0} and node["routed"] == 2
    worker = out.workers[0]
    assert worker["transit_ms"] == {"p50": 1.0, "p99": 2.0, "max": 3.0, "count": 3}
    assert worker["emulator"]["late_ms"] == {"p50": 2.0, "p99": 4.0, "max": 5.0, "count": 3}
    # spans of the emulated cluster shrink; CPU seconds are the host's and stay
    assert (worker["paused_s"], worker["emulator"]["busy_s"], worker["emulator"]["cpu_s"]) == (0.1, 2.0, 1.0)
    assert out.control["migrations"].pause_s == pytest.approx(0.1)
    assert out.control["migrations"].events[0]["at_s"] == 1.0
    assert (out.chaos[0]["at_s"], out.failures[0]["back_s"]) == (2.0, 2.3)
    assert out.capacity_history == [(0.0, (1.0,)), (2.0, (2.0,))]
    assert (out.facts["aggregate_every_s"], out.facts["checkpoint_every_s"]) == (0.5, 1.0)
    assert got.log["arrival_s"][0] == t0 + 4.0  # the actors' own record is left as it was


def test_time_scale_must_be_a_number_of_at_least_one():
    for bad in (0.5, 0, -2, float("inf"), float("nan"), "auto", True):
        with pytest.raises(SpecError, match="--time-scale"):
            TopologySpec(time_scale=bad)


def _room(**given) -> dict:
    base = {"engine": "ray", "rate": 1000.0, "throughput": 995.0, "worker_busy": [0.5, 0.6],
            "sources": [{"blocked_fraction": 0.0, "input_lag_max_ms": 1.0, "busy_fraction": 0.3}],
            "transit_p99_ms": 2.0, "latency_p99_ms": 30.0}
    return headroom(**{**base, **given})


def test_a_cpu_worker_below_its_capacity_makes_the_host_the_bottleneck():
    room = _room(served_share=[0.98, 0.8], work="cpu")
    assert room["bottleneck"] == HOST and "worker 1 served at 80%" in room["note"]
    assert room["served_share_min"] == 0.8
    # in sleep mode a lightly loaded worker's small batches oversleep a little: that bounds nothing
    assert _room(served_share=[0.98, 0.8], work="sleep")["bottleneck"] == "none"
    # within 10% of the configured capacity is what the host promised
    assert _room(served_share=[0.95, 0.92], work="cpu")["bottleneck"] == "none"
    # the simulator's workers serve at exactly their capacity
    assert _room(engine="sim", served_share=[0.5], work="cpu")["bottleneck"] != HOST


def test_a_run_bounded_by_the_emulator_suggests_a_time_scale():
    room = _room(throughput=400.0)  # 40% of the rate delivered by idle workers: the engine's limit
    assert room["bottleneck"] in EMULATOR
    # at least what it lacked (2.5x) with a margin, as a power of two
    assert room["suggested_time_scale"] == 4.0 and "--time-scale 4" in room["note"]
    assert _room(throughput=400.0, time_scale=4.0)["suggested_time_scale"] == 16.0
    assert _room()["suggested_time_scale"] is None  # a run with headroom needs no other K
    assert suggest_time_scale(1.0, 1.0) == 2.0 and suggest_time_scale(8.0, 3.0) == 32.0


def test_acks_that_leave_late_make_the_engine_the_bottleneck():
    # the rate was delivered, but the workers' acks left up to 40 ms after their batches were done, against a p99
    # latency of 60 ms: credits and feedback came back late, so the latency is partly the emulator's
    room = _room(ack_late_p99_ms=40.0, latency_p99_ms=60.0)
    assert room["bottleneck"] == "engine" and "acks left up to 40 ms" in room["note"]
    assert room["ack_late_p99_ms"] == 40.0 and room["suggested_time_scale"] == 4.0
    # a few milliseconds late, or small against the run's own latency, bounds nothing
    assert _room(ack_late_p99_ms=5.0, latency_p99_ms=60.0)["bottleneck"] == "none"
    assert _room(ack_late_p99_ms=40.0, latency_p99_ms=1000.0)["bottleneck"] == "none"


def test_a_scheduler_thread_with_no_time_to_spare_makes_the_engine_the_bottleneck():
    # every delay small, each source's own steps a few percent of the run, but the one thread stepping all of a
    # process's sources and serving its workers was on the CPU 96% of it: its flushes and commits fall behind
    room = _room(stepping_busy_max=0.96)
    assert room["bottleneck"] == "engine" and "on the CPU 96% of the run" in room["note"]
    assert room["stepping_busy_max"] == 0.96 and room["suggested_time_scale"] == 2.0
    assert _room(stepping_busy_max=0.75)["bottleneck"] == "none"
    assert _room(stepping_busy_max=None)["bottleneck"] == "none"  # cpu mode, or no thread clock on this platform
    # a saturated worker is the topology's limit, whatever the thread did
    assert _room(stepping_busy_max=0.96, throughput=900.0, worker_busy=[0.95, 0.6])["bottleneck"] == "topology"


def test_late_acks_outrank_a_worker_just_past_saturation():
    # 97.9% of the rate, a worker busy 92%, acks up to 57 ms late against a p99 of 78 ms: late credits bunch the
    # buffers and late feedback steers the grouping, so the engine, not the topology, fell short
    late = {"throughput": 979.0, "worker_busy": [0.92, 0.7], "ack_late_p99_ms": 57.0, "latency_p99_ms": 78.0}
    assert _room(**late)["bottleneck"] == "engine"
    # the same shortfall with acks on time is the topology's; so is a worker with no slack at all, late or not
    assert _room(**{**late, "ack_late_p99_ms": 3.0})["bottleneck"] == "topology"
    assert _room(**{**late, "worker_busy": [0.99, 0.7]})["bottleneck"] == "topology"
    assert _room(**{**late, "engine": "sim", "ack_late_p99_ms": None})["bottleneck"] == "topology"


def test_the_default_core_share_keeps_the_workers_within_the_cpu_budget():
    deployment = TopologySpec(workers=4, capacities=(1.0, 1.0, 0.3, 0.3))
    share, why = core_share(deployment, 2.0)
    assert share == pytest.approx(CPU_BUDGET * 2.0 / 2.6) and "2 cores" in why
    # a large machine: the old fixed share, at most; one core per worker, at most
    assert core_share(deployment, 64.0)[0] == MAX_CORE_SHARE
    assert core_share(TopologySpec(workers=2, capacities=(8.0, 0.1)), 64.0)[0] == pytest.approx(1 / 8.0)
    assert core_share(deployment.with_(core_share=0.3), 2.0) == (0.3, "--core-share")


# --- the command line


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "run_topology.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_the_simulator_divides_its_transit_by_k():
    from topo.data.streams import StreamArrays
    from topo.sim import simulate

    stream = StreamArrays(np.arange(2000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    spec = TopologySpec(grouping="sg", workers=2, sources=1, cost_ms=0.0, rate=1000.0, transit_ms=8.0,
                        batch_size=1, linger_ms=0.0)
    slow = simulate(spec, stream).summary["latency_ms"]["p50"]
    fast = simulate(spec.with_(time_scale=4.0), stream).summary["latency_ms"]["p50"]
    assert slow == pytest.approx(8.0, abs=0.5) and fast == pytest.approx(2.0, abs=0.5)


# --- with Ray


@pytest.mark.timing
def test_k_4_gives_the_emulated_time_summary_of_k_1(ray_session):
    from test_ray_engine import check_run, zipf_stream

    from topo.ray_engine import run_ray

    # 70% load: latency is mostly queueing and lingering, which both time scales must show alike; one source and
    # few buffers keep the engine's own transit at K = 1 far below what would bound the run
    spec = TopologySpec(grouping="pkg", engine="ray", workers=4, sources=1, cost_ms=2.0, rate=1400.0, batch_size=100,
                        linger_ms=40.0, seed=2)
    stream = zipf_stream(3000)
    one, four = (run_ray(spec.with_(time_scale=k), stream).summary for k in (1.0, 4.0))
    for summary in (one, four):
        check_run(summary, spec)
        assert summary["headroom"]["bottleneck"] == "none", summary["headroom"]["note"]
    assert (one["time_scale"], four["time_scale"]) == (1.0, 4.0)
    # the same emulated seconds, rate and load: K = 4 ran 4x longer on the wall clock, and reports it /4
    assert four["duration_s"] == pytest.approx(one["duration_s"], rel=0.05)
    assert four["throughput_tps"] == pytest.approx(one["throughput_tps"], rel=0.05)
    assert four["wall_clock_s"]["loop"] > 2.5 * one["wall_clock_s"]["loop"]
    for a, b in zip(one["per_worker"], four["per_worker"], strict=True):
        assert a["tuples"] == b["tuples"]  # pkg's routing does not depend on the clock here
        assert b["busy_fraction"] == pytest.approx(a["busy_fraction"], abs=0.05)
    # latency: the same queueing in emulated milliseconds, minus the engine's overhead that K spreads out
    assert four["latency_ms"]["p50"] == pytest.approx(one["latency_ms"]["p50"], rel=0.25)
    assert four["ray"]["transit_ms"]["p50"] < one["ray"]["transit_ms"]["p50"]


@pytest.mark.timing
def test_auto_takes_the_smallest_k_whose_pilot_had_headroom(ray_session):
    from test_ray_engine import zipf_stream

    from topo.ray_engine import run_ray
    from topo.ray_engine.dilation import choose_time_scale

    spec = TopologySpec(grouping="kg", engine="ray", workers=2, sources=1, cost_ms=1.0, rate=1000.0, batch_size=50,
                        linger_ms=20.0)
    said: list[str] = []
    k, choice = choose_time_scale(spec, zipf_stream(5000), lambda sp, st: run_ray(sp, st), said.append)
    # a small topology well within the host: the first pilot (K = 1), of the first 2 emulated seconds, had headroom
    assert k == choice["time_scale"] == 1.0 and choice["pilot_tuples"] == 2000
    assert [p["time_scale"] for p in choice["pilots"]] == [1.0] and choice["pilots"][0]["bottleneck"] == "none"
    assert "headroom" in choice["why"] and len(said) == 1 and said[0].startswith("time scale 1: none")


@pytest.mark.slow
def test_auto_on_the_command_line_records_its_choice(tmp_path):
    out = tmp_path / "run"
    r = _cli("--engine", "ray", "--grouping", "kg", "--workers", "2", "--sources", "1", "--cost-ms", "1",
             "--rate", "1000", "--stream", "zipf:z=1.2,keys=200,messages=2500,seed=1", "--time-scale", "auto",
             "--json", "--no-plots", "--out", str(out))
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    choice = summary["time_scale_choice"]
    assert choice["time_scale"] == summary["time_scale"] == 1.0 and choice["pilots"][0]["bottleneck"] == "none"
    assert json.loads((out / "summary.json").read_text())["time_scale_choice"] == choice
