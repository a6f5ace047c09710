"""The command line as a user meets it: real subprocesses, real run directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from contract import LATENCY_KEYS, SUMMARY_KEYS, WORKER_KEYS
from side_by_side import chosen, run_all, script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "run_topology.py"
SMALL = "zipf:z=1.2,keys=2000,messages=20000,seed=3"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


def test_json_summary_has_the_contract_keys(tmp_path):
    out = tmp_path / "run"
    r = run("--grouping", "pkg", "--engine", "sim", "--workers", "4", "--sources", "2",
            "--stream", SMALL, "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert list(summary)[: len(SUMMARY_KEYS)] == SUMMARY_KEYS
    assert set(summary["latency_ms"]) >= LATENCY_KEYS
    assert summary["tuples_in"] == summary["tuples_processed"] == 20000
    assert summary["exact"] is True
    assert summary["replication"] <= 2.0 + 1e-9  # pkg: at most two workers per key
    assert len(summary["per_worker"]) == 4
    assert WORKER_KEYS <= set(summary["per_worker"][0])
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["tuples_processed"] == 20000
    for name in ("timeseries.parquet", "latency.parquet", "spec.json", "latency_cdf.png", "workers.png",
                 "load.png"):
        assert (out / name).is_file(), name
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_table_output_is_readable(tmp_path):
    r = run("--grouping", "kg", "--engine", "sim", "--stream", SMALL, "--out", str(tmp_path / "r"), "--quiet")
    assert r.returncode == 0, r.stderr
    assert "throughput" in r.stdout and "per worker" in r.stdout


def test_same_seed_same_summary(tmp_path):
    a = run("--grouping", "potc", "--engine", "sim", "--stream", SMALL, "--seed", "5", "--json",
            "--out", str(tmp_path / "a"), "--no-plots")
    b = run("--grouping", "potc", "--engine", "sim", "--stream", SMALL, "--seed", "5", "--json",
            "--out", str(tmp_path / "b"), "--no-plots")
    sa, sb = (json.loads(x.stdout.strip().splitlines()[-1]) for x in (a, b))
    for s in (sa, sb):
        s.pop("run_dir")
        s.pop("wall_clock_s")  # how long the machine took is not part of the result
    assert sa == sb


# bad input on the sim engine: (arguments, what the one line says)
REFUSED = [
    (["--grouping", "nope"], "unknown grouping"),
    (["--workers", "3", "--capacities", "1,1"], "--capacities"),
    (["--capacities", "1,x,1,1"], "--capacities"),
    (["--workers", "4", "--capacities", "1,0,1,1"], "positive"),
    (["--workers", "0"], "--workers"),
    (["--stream", "zipf:z=abc,keys=10,messages=10"], "z"),
    (["--stream", "poisson:z=1,keys=10,messages=10"], "poisson"),
    (["--stream", "zipf:z=1.0,keys=10"], "messages"),
    (["--set", "eps"], "KEY=VALUE"),
    (["--grouping", "porc", "--set", "eps=-1"], "eps"),
    (["--grouping", "porc", "--set", "bogus=1"], "bogus"),
    (["--operator", "nope"], "operator"),
    (["--engine", "spark"], "engine"),
    (["--workers", "two"], "workers"),
    (["--rate", "-5"], "rate"),
    (["--stream", "/nonexistent/dataset"], "/nonexistent/dataset"),
    (["--capacity-schedule", "5000:1,1"], "--capacity-schedule"),
    (["--capacity-schedule", "soon:1,1,1,1"], "--capacity-schedule"),
    (["--scale-schedule", "2s:zero"], "--scale-schedule"),
    (["--migration-ms-per-key", "-1"], "--migration-ms-per-key"),
    (["--aggregate-every", "0"], "--aggregate-every"),
    (["--operator", "topk", "--operator-set", "kk=1"], "kk"),
    (["--operator", "topk", "--operator-set", "k=many"], "k"),
    (["--chaos", "boom"], "--chaos"),
    (["--chaos", "kill-worker:1@2"], "--engine ray"),
    (["--work", "fast"], "--work"),
    (["--placement", "a,b"], "--placement"),
]


@pytest.fixture(scope="module")
def refusals(request, tmp_path_factory) -> dict[int, tuple[Path, subprocess.CompletedProcess]]:
    """The selected bad inputs, run side by side, each with its own empty directory for --out."""
    base = tmp_path_factory.mktemp("refused")
    jobs, dirs = {}, {}
    for case in chosen(request, "case"):
        args = REFUSED[case][0]
        dirs[case] = base / f"case-{case}"
        dirs[case].mkdir()
        stream = [] if "--stream" in args else ["--stream", SMALL]
        jobs[case] = (script("run_topology", "--engine", "sim", *stream, *args, "--out", str(dirs[case] / "run")),
                      ROOT)
    return {case: (dirs[case], got) for case, got in run_all(jobs, timeout_s=300.0).items()}


@pytest.mark.parametrize("case", range(len(REFUSED)), ids=[says for _, says in REFUSED])
def test_bad_input_is_one_line_and_exit_2(refusals, case):
    fragment = REFUSED[case][1]
    directory, r = refusals[case]
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert fragment in lines[0]
    assert list(directory.iterdir()) == []


@pytest.mark.parametrize(
    "args, fragment",
    [(["--workers", "4", "--work", "cpu", "--capacities", "3,1,1,1"], "--core-share"),
     (["--workers", "4", "--chaos", "kill-worker:9@1"], "--chaos")],
)
def test_what_ray_cannot_run_is_refused_before_work_starts(tmp_path, args, fragment):
    out = tmp_path / "run"
    r = run("--engine", "ray", "--stream", SMALL, *args, "--out", str(out))
    assert r.returncode == 2 and fragment in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("engine", ["sim", "ray"])
def test_malformed_dataset_directory(tmp_path, engine):
    # on Ray the local Ray has begun starting when the stream's data turns out bad: it is stopped, no traceback
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "_meta.json").write_text("{not json")
    r = run("--engine", engine, "--stream", str(bad), "--out", str(tmp_path / "run"))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


def test_refuses_to_clobber_a_run(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    r = run("--engine", "sim", "--stream", SMALL, "--out", str(out))
    assert r.returncode == 2 and "--overwrite" in r.stderr
    assert (out / "summary.json").read_text() == "{}"


def test_help_documents_units_and_defaults():
    r = run("--help")
    assert r.returncode == 0
    for fragment in ("--cost-ms", "milliseconds", "tuples/s", "--capacities", "default"):
        assert fragment in r.stdout
