"""Every registered experiment, in quick mode: it writes its files and the paper's qualitative result holds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from ahead import AHEAD
from conftest import experiment_params
from side_by_side import run_all, script

import experiments
from groupings.adaptive import gedik_build as gb

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", experiment_params(experiments.names()))
def test_every_experiment_writes_csv_png_and_markdown(outputs, name):
    out, numbers = outputs[name]
    assert list(out.glob("*.csv")) and list(out.glob("*.png")) and list(out.glob("*.md")), name
    assert numbers, name
    # the contract: our numbers next to the paper's
    assert any("paper" in md.read_text().lower() for md in out.glob("*.md")), name


@pytest.mark.slow
def test_heterogeneity_cg_beats_kg_and_sg(outputs):
    rows = outputs["cg-heterogeneity"][1]
    cg, kg, sg = rows["cg"], rows["kg"], rows["sg"]
    assert cg["p99_ms"] < kg["p99_ms"] / 2 and cg["p99_ms"] < sg["p99_ms"]
    assert cg["imbalance"] < 0.2
    # Fig. 8: kg's and sg's queues keep growing while the input lasts; cg's stay short
    for g in ("kg", "sg"):
        assert rows[g]["queue_end_input"] > 1.5 * rows[g]["queue_half_input"]
    assert cg["queue_end_input"] < 0.01 * kg["queue_end_input"]
    assert cg["max_queue_end"] < sg["max_queue_end"] / 10 and cg["max_queue_end"] < kg["max_queue_end"] / 10
    assert all(r["exact"] for r in rows.values())


@pytest.mark.slow
def test_capacity_change_cg_recovers(outputs):
    rows = outputs["cg-capacity-change"][1]
    cg = rows["cg"]
    recovered = cg["recovery_messages"]
    assert len(recovered) == 2 and all(0 < m < 100_000 for m in recovered)  # a third of the run is 100k messages
    assert cg["mean_spread"] < rows["sg"]["mean_spread"] / 2
    assert cg["imbalance"] < rows["sg"]["imbalance"]


@pytest.mark.slow
def test_drift_fish_beats_wc_and_dc_with_little_memory(outputs):
    rows = outputs["fish-drift"][1]
    fish = rows["fish"]
    assert fish["p99_ms"] < rows["wc"]["p99_ms"] and fish["p99_ms"] < rows["dc"]["p99_ms"]
    assert fish["replication"] < rows["sg"]["replication"] / 2


def test_gedik_balances_better_and_migrates_like_consistent_hashing(outputs):
    means = outputs["gedik-scaling"][1]
    assert means["gedik"]["b"] < means["uniform"]["b"] and means["gedik"]["b"] < means["consistent"]["b"]
    assert means["gedik"]["m"] < 1.5 * means["consistent"]["m"]
    assert means["uniform"]["m"] > 2 * means["gedik"]["m"]
    for build in gb.BUILDS:  # every build, not only the default, beats both hashes on balance
        assert means[build]["b"] < min(means["uniform"]["b"], means["consistent"]["b"])
    rows = means["rows"]
    # Fig. 6: uniform hashing migrates more as N grows, and consistent hashing loses balance
    assert rows[-1]["uniform_m"] > 2 * rows[0]["uniform_m"]
    assert rows[-1]["consistent_b"] > rows[0]["consistent_b"]


@pytest.mark.slow
def test_ray_deployment_cg_beats_kg_on_capped_workers(outputs):
    rows = outputs["ray-heterogeneous"][1]
    cg, kg = rows["cg"], rows["kg"]
    assert cg["exact"] and kg["exact"]
    assert cg["throughput_tps"] >= 1.5 * kg["throughput_tps"]
    assert cg["p99_ms"] < kg["p99_ms"]


def test_reproduce_lists_and_rejects_unknown_names(tmp_path):
    got = run_all({
        "listed": (script("reproduce", "--list"), tmp_path),
        "bad": (script("reproduce", "nope", "--out", str(tmp_path / "out")), tmp_path),
        # a typo among several names: checked before anything runs, so nothing is written
        "mixed": (script("reproduce", "cg-sources", "nope", "--out", str(tmp_path / "out")), tmp_path),
        "both": (script("reproduce", "--all", "cg-sources"), tmp_path),
    })
    listed, bad, mixed, both = got["listed"], got["bad"], got["mixed"], got["both"]
    assert listed.returncode == 0
    for name in ("cg-heterogeneity", "cg-capacity-change", "fish-drift", "gedik-scaling", "ray-heterogeneous"):
        assert name in listed.stdout
    assert bad.returncode == 2 and "unknown experiment" in bad.stderr and "Traceback" not in bad.stderr
    assert mixed.returncode == 2 and "'nope'" in mixed.stderr
    assert both.returncode == 2 and "not both" in both.stderr
    assert list(tmp_path.iterdir()) == []


SEVERAL = ("cg-sources", "gedik-scaling")


def reproduce_several(out: str) -> tuple[str, subprocess.CompletedProcess]:
    """reproduce.py's quick run of SEVERAL into `out`."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), *SEVERAL, "--quick", "--out", out],
                          capture_output=True, text=True, timeout=300)
    return out, done


def ahead(items) -> list:
    """reproduce.py's run, made in the background while the other files run (tests/ahead.py)."""
    if any(item.originalname == "test_reproduce_runs_several_and_summarises" for item in items):
        return [(("reproduce", SEVERAL), reproduce_several, (tempfile.mkdtemp(prefix="reproduce-"),))]
    return []


def test_reproduce_runs_several_and_summarises(tmp_path):
    out, done = AHEAD.take(("reproduce", SEVERAL)) or reproduce_several(str(tmp_path))
    out = Path(out)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(SEVERAL)  # no temporary left
    for name in SEVERAL:
        assert name in done.stdout and json.loads((out / name / "numbers.json").read_text())
    if out != tmp_path:
        shutil.rmtree(out)


def test_table1_kg_grows_with_bins_and_the_bounded_strategies_stay_bounded(outputs):
    rows = outputs["cg-table1"][1]
    for trace in ("wp", "tw"):
        kg, pkg = rows[f"{trace}:kg"], rows[f"{trace}:pkg"]
        assert kg["10"] < kg["100"] < kg["1000"]
        assert pkg["1000"] < kg["1000"] / 1.5  # two choices split the hot key, one does not
        assert max(rows[f"{trace}:sg"].values()) < 1e-3 and max(rows[f"{trace}:potc"].values()) < 0.05
        for bounded in ("porc", "chbl"):
            assert max(rows[f"{trace}:{bounded}"].values()) <= 0.3 + 1e-3  # eps = 0.3 bounds it (up to rounding)
