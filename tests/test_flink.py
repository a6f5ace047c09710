"""The Flink engine: the same spec on a real Flink 2.3 job gives the emulator's routing, an exact state and a run
directory like the other engines'; what Flink cannot run is one line and exit status 2; Flink's settings map onto the
emulator's (`--style flink`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import MISSING_TOOL
from contract import SUMMARY_KEYS

from topo.cli.run import build_parser, main, spec_from_args
from topo.flink_engine.install import missing
from topo.flink_engine.settings import runnable
from topo.sim import simulate
from topo.spec import TopologySpec

ROOT = Path(__file__).resolve().parents[1]
WHY = missing()
needs_flink = pytest.mark.skipif(WHY is not None, reason=f"{MISSING_TOOL}: {WHY}")
# `make run`'s topology (three workers 5x faster), 0.6 s of input at 80% load
SMALL = ["--stream", "zipf:z=1.0224,keys=100000,messages=10000,seed=7", "--seed", "1"]
LONGER = "zipf:z=1.0224,keys=100000,messages=30000,seed=7"


def run_cli(tmp_path: Path, *args: str, name: str = "run") -> tuple[int, dict | None, Path]:
    out = tmp_path / name
    code = main(["--out", str(out), "--json", "--quiet", *SMALL, *args])
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else None
    return code, summary, out


@needs_flink
@pytest.mark.timing  # a JVM on two cores: the suite's background work pauses, so the verdict is the run's own
def test_flink_runs_the_emulators_routing_and_merges_an_exact_state(tmp_path):
    # 30k messages, about 3 s: where Flink's first flush falls against the model's is uncertain by up to one buffer
    # timeout (100 ms), which was 5% of a 10k-message run (Flink came out 5.0% and 5.4% ahead of it twice in 3 suites)
    code, flink, out = run_cli(tmp_path, "--engine", "flink", "--grouping", "pkg", "--stream", LONGER)
    assert code == 0 and flink["engine"] == "flink"
    assert set(SUMMARY_KEYS) <= set(flink)
    for name in ("latency.parquet", "timeseries.parquet", "spec.json", "latency_cdf.png", "workers.png"):
        assert (out / name).exists(), name
    from topo.data.dataset import load_stream

    fields = json.loads((out / "spec.json").read_text())
    del fields["environment"]
    spec = TopologySpec(**fields | {"capacities": tuple(fields["capacities"])}).with_(engine="sim")

    sim = simulate(spec, load_stream(spec.stream)).summary
    # the routing is the emulator's by construction: every worker got the same tuples
    assert [w["tuples"] for w in flink["per_worker"]] == [w["tuples"] for w in sim["per_worker"]]
    assert flink["tuples_processed"] == flink["tuples_in"] == 30_000
    assert flink["exact"] is True  # the word counts Flink's workers kept merge to the count of the input
    assert flink["flink"]["tuples_per_buffer"] == 1024 and flink["config"]["max_pending"] == 10
    # the runs agree where Flink had headroom (the full grid is the flink-check experiment)
    if flink["headroom"]["bottleneck"] in ("none", "topology"):
        assert abs(flink["throughput_tps"] / sim["throughput_tps"] - 1) < 0.05


@needs_flink
@pytest.mark.timing
def test_flink_rebalance_deals_round_robin_from_each_sources_own_start(tmp_path):
    code, flink, _ = run_cli(tmp_path, "--engine", "flink", "--grouping", "sg", "--flink-rebalance",
                             "--workers", "4", "--capacities", "1,1,1,1", "--rate", "3000")
    assert code == 0 and flink["flink"]["routing"] == "rebalance"
    counts = np.array([w["tuples"] for w in flink["per_worker"]])
    # each of the 2 sources deals its 5,000 tuples in turn: no worker is more than one tuple per source off
    assert counts.sum() == 10_000 and counts.max() - counts.min() <= 2


def test_what_flink_cannot_run_is_one_line_and_exit_2(tmp_path, capsys):
    for args, says in (
        (["--grouping", "cg"], "kg"),  # feedback-driven: names what Flink can run
        (["--grouping", "pkg", "--max-pending", "16"], "--max-pending must be 10"),
        (["--grouping", "pkg", "--linger-ms", "2.5"], "whole milliseconds"),
        (["--grouping", "pkg", "--batch-size", "1000"], "--batch-size"),
        (["--grouping", "pkg", "--operator", "topk"], "wordcount"),
        (["--grouping", "pkg", "--chaos", "kill-worker:1@1"], "--engine ray"),
    ):
        code, _, out = run_cli(tmp_path, "--engine", "flink", *args, name="bad")
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and says in err, (args, err)
        assert not out.exists()
    code, _, _ = run_cli(tmp_path, "--engine", "sim", "--grouping", "sg", "--flink-rebalance", name="bad")
    assert code == 2 and "--flink-rebalance" in capsys.readouterr().err


def test_flink_runs_every_grouping_without_feedback_and_its_own_adaptive_partitioner():
    names = runnable()
    assert {"kg", "sg", "pkg", "potc", "porc", "chbl", "dc", "wc", "rr", "flink_adaptive"} <= set(names)
    assert not {"cg", "fish", "lasg", "gedik", "albic", "key_shared", "kafka_adaptive"} & set(names)


def test_without_a_jdk_the_flink_engine_says_what_to_install(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "JAVA_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", "flink",
                           "--grouping", "kg", "--out", str(tmp_path / "r"), *SMALL], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "make" in done.stderr and not (tmp_path / "r").exists()


def test_the_flink_style_sets_flinks_defaults_and_the_flink_engine_takes_it():
    parse = build_parser().parse_args
    flink = spec_from_args(parse(["--engine", "flink"]))
    styled = spec_from_args(parse(["--engine", "sim", "--style", "flink"]))
    for spec in (flink, styled):
        assert (spec.batch_size, spec.linger_ms, spec.max_pending, spec.flush_phase, spec.transit_ms) == (
            1024, 100.0, 10, "spread", 0.0)
    own = spec_from_args(parse(["--engine", "sim"]))
    assert (own.batch_size, own.linger_ms, own.max_pending, own.flush_phase) == (1000, 20.0, 16, "aligned")
    assert own.transit_ms > 0
    given = spec_from_args(parse(["--engine", "sim", "--style", "flink", "--linger-ms", "20"]))
    assert given.linger_ms == 20.0 and given.batch_size == 1024  # what the user gives wins over the style


def test_spread_flushes_put_each_source_on_its_own_phase():
    """With a flusher per source, bursts from two sources do not line up: a homogeneous pkg run at a 100 ms timeout
    waits less than with every source flushing at the same ticks (Flink 70/103 ms p50/p99 here against 90/140)."""
    from topo.data.dataset import load_stream

    base = TopologySpec(grouping="pkg", workers=10, sources=2, cost_ms=1.0, rate=8000.0, batch_size=1024,
                        linger_ms=100.0, max_pending=10, stream="zipf:z=1.0224,keys=100000,messages=20000,seed=7")
    data = load_stream(base.stream)
    aligned = simulate(base, data).summary
    spread = simulate(base.with_(flush_phase="spread"), data).summary
    assert spread["latency_ms"]["p50"] < 0.85 * aligned["latency_ms"]["p50"]
    assert [w["tuples"] for w in spread["per_worker"]] == [w["tuples"] for w in aligned["per_worker"]]
