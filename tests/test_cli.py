"""The command line as a user meets it: real subprocesses, real run directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from contract import LATENCY_KEYS, SUMMARY_KEYS, WORKER_KEYS
from side_by_side import run_all, script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "run_topology.py"
SMALL = "zipf:z=1.2,keys=2000,messages=20000,seed=3"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


SEEDED = ["--grouping", "potc", "--engine", "sim", "--stream", SMALL, "--seed", "5", "--json", "--no-plots"]


@pytest.fixture(scope="module")
def good_runs(tmp_path_factory) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    """The good runs of this file, side by side: json output, the table, and one seed twice."""
    base = tmp_path_factory.mktemp("runs")
    jobs = {
        "json": ["--grouping", "pkg", "--engine", "sim", "--workers", "4", "--sources", "2", "--stream", SMALL,
                 "--out", str(base / "json" / "run"), "--json"],
        "table": ["--grouping", "kg", "--engine", "sim", "--stream", SMALL, "--out", str(base / "r"), "--quiet"],
        "seed-a": [*SEEDED, "--out", str(base / "a")],
        "seed-b": [*SEEDED, "--out", str(base / "b")],
    }
    (base / "json").mkdir()
    return base, run_all({key: (script("run_topology", *args), ROOT) for key, args in jobs.items()}, 300.0)


def test_json_summary_has_the_contract_keys(good_runs):
    base, runs = good_runs
    out, r = base / "json" / "run", runs["json"]
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
    assert [p.name for p in out.parent.iterdir()] == ["run"]  # no temporary left behind


def test_table_output_is_readable(good_runs):
    r = good_runs[1]["table"]
    assert r.returncode == 0, r.stderr
    assert "throughput" in r.stdout and "per worker" in r.stdout


def test_same_seed_same_summary(good_runs):
    runs = good_runs[1]
    sa, sb = (json.loads(runs[key].stdout.strip().splitlines()[-1]) for key in ("seed-a", "seed-b"))
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
    (["--time-scale", "0.5"], "--time-scale"),
    (["--time-scale", "fast"], "--time-scale"),
    (["--time-scale", "auto"], "--time-scale auto"),
    (["--processes", "2"], "--engine ray"),
]


@pytest.mark.parametrize("case", range(len(REFUSED)), ids=[says for _, says in REFUSED])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case):
    """In process, through run_topology.py's own entry point (tests/test_bad_inputs.py starts the script itself
    for the inputs only a process shows)."""
    from topo.cli.run import main

    args, fragment = REFUSED[case]
    out = tmp_path / "run"
    stream = [] if "--stream" in args else ["--stream", SMALL]
    try:
        status = main(["--engine", "sim", *stream, *args, "--out", str(out)])
    except SystemExit as exc:  # argparse's own refusals
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, fragment",
    [(["--workers", "4", "--work", "cpu", "--capacities", "3,1,1,1", "--core-share", "0.4"], "--core-share"),
     (["--workers", "4", "--chaos", "kill-worker:9@1"], "--chaos")],
)
def test_what_ray_cannot_run_is_refused_before_work_starts(tmp_path, args, fragment):
    out = tmp_path / "run"
    r = run("--engine", "ray", "--stream", SMALL, *args, "--out", str(out))
    assert r.returncode == 2 and fragment in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("engine", ["sim", "ray"])
def test_malformed_dataset_directory(tmp_path, engine):
    # a broken _meta.json is found before anything starts, on Ray too
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "_meta.json").write_text("{not json")
    r = run("--engine", engine, "--stream", str(bad), "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "_meta.json" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_data_found_bad_while_ray_starts_is_refused_in_one_line(tmp_path):
    # a part that is not Parquet is found only when the data loads, while a local Ray has begun starting: it is
    # stopped, and the refusal is one line (about 9 s: Ray's start and stop)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "_meta.json").write_text("{}")
    (bad / "part-00000.parquet").write_bytes(b"PAR1 not really")
    r = run("--engine", "ray", "--stream", str(bad), "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "part-00000.parquet" in r.stderr
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
