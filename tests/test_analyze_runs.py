"""analyze_runs.py: Spark analytics over run directories (three small simulator runs of one stream)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark.analyze_inputs import AnalysisError, load_runs

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "analyze_runs.py"
STREAM = "zipf:z=1.2,keys=5000,messages=20000,seed=7"
GROUPINGS = ("kg", "pkg", "cg")


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory) -> list[Path]:
    """Three simulator runs (kg, pkg, cg) of the same stream on heterogeneous workers."""
    from topo.cli.run import main

    root = tmp_path_factory.mktemp("runs")
    for grouping in GROUPINGS:
        status = main(["--engine", "sim", "--grouping", grouping, "--stream", STREAM, "--workers", "4",
                       "--capacities", "1,1,0.5,0.5", "--cost-ms", "0.1", "--out", str(root / grouping),
                       "--no-plots", "--quiet", "--json"])
        assert status == 0
    return [root / g for g in GROUPINGS]


@pytest.fixture(scope="module")
def analysis(spark, run_dirs):
    from spark.analyze import analyze

    return analyze(spark, load_runs(run_dirs))


@pytest.fixture(scope="module")
def report_dir(analysis, tmp_path_factory) -> Path:
    from spark.analyze_report import write_analysis

    out = tmp_path_factory.mktemp("report")
    write_analysis(analysis, out)
    return out


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def latencies(run_dir: Path) -> pd.DataFrame:
    return pq.read_table(run_dir / "latency.parquet").to_pandas()


# --- what the analysis computes ------------------------------------------------------------------------------------


def test_overall_percentiles_match_the_summary(analysis, run_dirs):
    for run_dir, row in zip(run_dirs, analysis.runs.itertuples(index=False), strict=True):
        given = summary(run_dir)["latency_ms"]
        for key in ("p50", "p95", "p99"):
            assert getattr(row, f"{key}_ms") == pytest.approx(given[key], rel=0.01)
    assert analysis.notes == []  # nothing disagrees with summary.json


def test_percentiles_are_exact_like_numpy(analysis, run_dirs):
    """Overall, per-worker and per-window percentiles equal np.percentile of the same latencies."""
    percents = [50, 95, 99, 99.9]
    run_dir, name = run_dirs[2], "cg"
    log = latencies(run_dir)
    overall = analysis.runs.set_index("run").loc[name, ["p50_ms", "p95_ms", "p99_ms", "p999_ms"]].to_numpy(float)
    np.testing.assert_allclose(overall, np.percentile(log["latency_ms"], percents), rtol=1e-12)
    workers = analysis.workers[analysis.workers["run"] == name]
    for w in workers.itertuples(index=False):
        expected = np.percentile(log.loc[log["worker"] == w.worker, "latency_ms"], percents)
        np.testing.assert_allclose([w.p50_ms, w.p95_ms, w.p99_ms, w.p999_ms], expected, rtol=1e-12)
    windows = analysis.windows[analysis.windows["run"] == name]
    width = analysis.window_s[name]
    index = np.minimum(np.floor((log["finish_s"] - log["arrival_s"].min()) / width), len(windows) - 1)
    for w in windows[windows["tuples"] > 0].head(5).itertuples(index=False):
        expected = np.percentile(log.loc[index == w.window, "latency_ms"], percents)
        np.testing.assert_allclose([w.p50_ms, w.p95_ms, w.p99_ms, w.p999_ms], expected, rtol=1e-12)


def test_comparison_table_has_one_row_per_run(analysis, run_dirs):
    table = analysis.runs
    assert list(table["run"]) == list(GROUPINGS)
    assert list(table["grouping"]) == list(GROUPINGS)
    for run_dir, row in zip(run_dirs, table.itertuples(index=False), strict=True):
        s = summary(run_dir)
        assert row.engine == "sim" and row.workers == 4 and row.tuples == s["tuples_processed"]
        assert row.throughput_tps == pytest.approx(s["throughput_tps"], rel=1e-9)
        assert row.imbalance == pytest.approx(s["imbalance"], rel=1e-9)
        assert row.replication == s["replication"] and row.exact == s["exact"]


def test_per_worker_counts_sum_to_tuples(analysis, run_dirs):
    for run_dir, name in zip(run_dirs, GROUPINGS, strict=True):
        s = summary(run_dir)
        workers = analysis.workers[analysis.workers["run"] == name]
        assert workers["tuples"].sum() == s["tuples_processed"]
        assert list(workers["tuples"]) == [w["tuples"] for w in s["per_worker"]]
        assert workers["relative_load"].mean() == pytest.approx(1.0)


def test_windows_cover_every_tuple(analysis, run_dirs):
    for run_dir, name in zip(run_dirs, GROUPINGS, strict=True):
        windows = analysis.windows[analysis.windows["run"] == name]
        load = analysis.window_load[analysis.window_load["run"] == name]
        tuples = summary(run_dir)["tuples_processed"]
        assert 25 <= len(windows) <= 100  # about 50 by default
        assert windows["tuples"].sum() == tuples == load["tuples"].sum()
        assert len(load) == 4 * len(windows)  # every worker in every window, zeros included
        busy = windows[windows["tuples"] > 0]
        assert (busy["imbalance"] >= 0).all() and busy["throughput_tps"].gt(0).all()


def test_window_option_sets_the_window_length(spark, run_dirs):
    from spark.analyze import window_plan

    plan = window_plan(load_runs(run_dirs[:1]), window_s=0.05)
    assert plan.at[0, "window_s"] == 0.05
    assert plan.at[0, "windows"] == int(np.ceil(plan.at[0, "duration_s"] / 0.05 - 1e-9))


def test_utilization_and_cdf(analysis):
    u = analysis.utilization
    assert set(u["run"]) == set(GROUPINGS)
    assert ((u["util_spread"] >= 0) & (u["util_spread"] <= 1 + 1e-9)).all()
    assert (u["t_s"] > 0).all()  # measured from the run's first arrival
    for _, cdf in analysis.cdf.groupby("run"):
        assert cdf["fraction"].is_monotonic_increasing and cdf["fraction"].iloc[-1] == pytest.approx(1.0)


def test_report_directory(report_dir, analysis):
    for name in ("report.md", "runs.csv", "runs.md", "workers.csv", "windows.csv", "window_load.csv",
                 "utilization.csv", "latency_cdf.csv", "analysis.json", "latency_cdf.png", "throughput.png",
                 "utilization_spread.png", "worker_load.png", "imbalance.png", "latency_windows.png"):
        assert (report_dir / name).stat().st_size > 0, name
    report = (report_dir / "report.md").read_text()
    assert "![" in report and "(latency_cdf.png)" in report and "(worker_load.png)" in report
    for grouping in GROUPINGS:
        assert f"### {grouping}" in report  # one per-worker table each
    assert len(pd.read_csv(report_dir / "runs.csv")) == 3
    assert (report_dir / "runs.md").read_text().count("\n") == 2 + 3  # heading, rule, one line per run


def test_exact_quantiles_on_awkward_values(spark, monkeypatch):
    """Negative, zero, repeated and spread values, with buckets too full to fetch (split path)."""
    from pyspark.sql import functions as F

    import spark.analyze_quantiles as q

    rng = np.random.default_rng(1)
    n = 6000
    values = np.concatenate([rng.lognormal(0, 2, n // 2), np.round(rng.uniform(0, 3, n // 4), 1),
                             np.zeros(n // 8), -rng.exponential(1, n - n // 2 - n // 4 - n // 8)])
    frame = pd.DataFrame({"run": np.zeros(n, np.int32), "worker": rng.integers(0, 3, n).astype(np.int32),
                          "latency_ms": rng.permutation(values)})
    data = spark.createDataFrame(frame)
    hist = (data.groupBy("run", "worker", q.log_bucket(F.col("latency_ms")).alias("bucket"))
            .agg(F.count("*").alias("n"), F.min("latency_ms").alias("lo"), F.max("latency_ms").alias("hi"))
            .toPandas().rename(columns={"worker": "key"}).assign(kind="worker"))
    whole = hist.groupby(["run", "bucket"], as_index=False).agg(n=("n", "sum"), lo=("lo", "min"), hi=("hi", "max"))
    hist = pd.concat([hist, whole.assign(kind=q.RUN, key=q.ALL)], ignore_index=True)
    monkeypatch.setattr(q, "FETCH_LIMIT", 50)  # most buckets must be split before their values are fetched
    percents = [0, 1, 50, 95, 99, 99.9, 100]
    got = q.exact_quantiles(data, hist, percents)
    for (kind, key), part in got.groupby(["kind", "key"]):
        chosen = frame if kind == q.RUN else frame[frame["worker"] == key]
        np.testing.assert_array_equal(part["value"], np.percentile(chosen["latency_ms"], percents))


def test_nice_window():
    from spark.analyze import nice_window

    assert nice_window(12.85 / 50) == 0.2
    assert nice_window(0.0138) == 0.01
    assert nice_window(3.4) == 5.0 or nice_window(3.4) == 2.0
    assert nice_window(0.0) == 1.0


# --- the command line ----------------------------------------------------------------------------------------------


def test_cli_writes_the_report(spark, run_dirs, tmp_path, capsys):
    """In-process: the CLI finds the test session already running and reuses it."""
    from spark.analyze_cli import main

    out = tmp_path / "analysis"
    assert main([*map(str, run_dirs[:2]), "--out", str(out), "--window", "0.1"]) == 0
    printed = capsys.readouterr().out
    assert "kg" in printed and "pkg" in printed and "report.md" in printed
    assert (out / "report.md").exists()
    assert json.loads((out / "analysis.json").read_text())["window_s"] == {"kg": 0.1, "pkg": 0.1}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary directory left
    assert main([str(run_dirs[0]), "--out", str(out)]) == 2  # not empty, no --overwrite
    assert "--overwrite" in capsys.readouterr().err


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_cli_bad_run_dir_is_one_line_and_writes_nothing(tmp_path):
    """Input problems are found before Spark starts: fast, one line on stderr, exit 2, nothing written."""
    out = tmp_path / "out"
    result = run_cli(str(tmp_path / "missing"), "--out", str(out))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "missing" in result.stderr and "no such directory" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_cli_usage_errors(tmp_path, run_dirs):
    for args in (["--window", "0", str(run_dirs[0])], ["--window", "soon", str(run_dirs[0])], []):
        result = run_cli(*args, "--out", str(tmp_path / "out"))
        assert result.returncode == 2, args
        assert result.stderr.strip().count("\n") == 0 and result.stderr.startswith("analyze_runs.py: error:")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_end_to_end_in_a_fresh_process(run_dirs, tmp_path):
    out = tmp_path / "analysis"
    result = run_cli(*map(str, run_dirs), "--out", str(out), "--master", "local[2]")
    assert result.returncode == 0, result.stderr
    assert "report.md" in result.stdout and (out / "report.md").exists()


@pytest.mark.slow
def test_ray_run_is_analyzed_like_a_simulator_run(spark, tmp_path):
    from spark.analyze import analyze

    run_dir = tmp_path / "cg-ray"
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", "ray",
                           "--grouping", "cg", "--stream", STREAM, "--workers", "4", "--capacities", "1,1,0.5,0.5",
                           "--out", str(run_dir), "--no-plots", "--quiet", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    result = analyze(spark, load_runs([run_dir]))
    given = summary(run_dir)
    assert result.runs.at[0, "engine"] == "ray"
    assert result.runs.at[0, "p99_ms"] == pytest.approx(given["latency_ms"]["p99"], rel=0.01)
    assert result.workers["tuples"].sum() == given["tuples_processed"]


# --- bad input: one line naming the file and the problem ---------------------------------------------------------


def clone(run_dir: Path, tmp_path: Path, name: str = "bad") -> Path:
    target = tmp_path / name
    shutil.copytree(run_dir, target)
    return target


def rewrite_log(run_dir: Path, change) -> None:
    path = run_dir / "latency.parquet"
    pq.write_table(change(pq.read_table(path)), path)


def expect_error(paths, *words: str) -> str:
    with pytest.raises(AnalysisError) as caught:
        load_runs(paths)
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message
    return message


def test_missing_directory(tmp_path):
    expect_error([tmp_path / "nope"], "nope", "no such directory")


def test_not_a_directory(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    expect_error([tmp_path / "file.txt"], "file.txt", "not a directory")


def test_crashed_run_without_summary(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)
    (bad / "summary.json").unlink()
    expect_error([bad], str(bad), "summary.json", "did not finish")


def test_crashed_run_without_latency_log(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)
    (bad / "latency.parquet").unlink()
    expect_error([bad], str(bad), "latency.parquet")


def test_temporary_directory_of_a_crashed_run(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path, ".kg.x1y2z3.tmp")
    expect_error([bad], ".kg.x1y2z3.tmp", "temporary directory")


def test_folder_of_runs_skips_hidden_temporary_directories(run_dirs, tmp_path):
    for d in run_dirs[:2]:
        clone(d, tmp_path, d.name)
    clone(run_dirs[2], tmp_path, ".cg.abc.tmp")
    assert [r.name for r in load_runs([tmp_path])] == ["kg", "pkg"]


def test_same_name_in_two_folders_gets_unique_labels(run_dirs, tmp_path):
    a, b = clone(run_dirs[0], tmp_path / "a", "kg"), clone(run_dirs[1], tmp_path / "b", "kg")
    assert [r.name for r in load_runs([a, b, a])] == ["a/kg", "b/kg"]


def test_missing_column(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)
    rewrite_log(bad, lambda t: t.drop_columns(["worker"]))
    expect_error([bad], "latency.parquet", "no column 'worker'")


def test_mistyped_column(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)
    rewrite_log(bad, lambda t: t.set_column(t.schema.get_field_index("latency_ms"), "latency_ms",
                                            t.column("latency_ms").cast(pa.string())))
    expect_error([bad], "latency.parquet", "'latency_ms' is string")


def test_null_latencies(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)

    def nulls(t: pa.Table) -> pa.Table:
        values = t.column("latency_ms").to_pylist()
        values[3] = values[70] = None
        return t.set_column(t.schema.get_field_index("latency_ms"), "latency_ms", pa.array(values, pa.float64()))

    rewrite_log(bad, nulls)
    expect_error([bad], "latency.parquet", "'latency_ms' has 2 null values")


def test_nan_latencies(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)

    def nan(t: pa.Table) -> pa.Table:
        values = t.column("latency_ms").to_numpy().copy()
        values[10] = np.nan
        return t.set_column(t.schema.get_field_index("latency_ms"), "latency_ms", pa.array(values))

    rewrite_log(bad, nan)
    expect_error([bad], "latency.parquet", "NaN")


def test_empty_log(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)
    rewrite_log(bad, lambda t: t.slice(0, 0))
    expect_error([bad], "latency.parquet", "empty log")


def test_log_shorter_than_the_summary_says(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)
    rewrite_log(bad, lambda t: t.slice(0, 100))
    expect_error([bad], "latency.parquet", "100 rows", "tuples were processed")


def test_unknown_worker(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)

    def worker_nine(t: pa.Table) -> pa.Table:
        workers = t.column("worker").to_numpy().copy()
        workers[0] = 9
        return t.set_column(t.schema.get_field_index("worker"), "worker", pa.array(workers))

    rewrite_log(bad, worker_nine)
    expect_error([bad], "latency.parquet", "[9]", "per_worker")


def test_not_a_parquet_file(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)
    (bad / "latency.parquet").write_text("not parquet")
    expect_error([bad], "latency.parquet", "not a readable Parquet file")


@pytest.mark.parametrize("text, words", [
    ("{not json", ("not valid JSON", "line 1")),
    ("[1, 2]", ("expected a JSON object",)),
    ('{"grouping": "kg"}', ("missing key(s)", "per_worker")),
])
def test_malformed_summary(run_dirs, tmp_path, text, words):
    bad = clone(run_dirs[0], tmp_path)
    (bad / "summary.json").write_text(text)
    expect_error([bad], "summary.json", *words)


def test_summary_with_a_bad_capacity(run_dirs, tmp_path):
    bad = clone(run_dirs[0], tmp_path)
    s = summary(bad)
    s["per_worker"][1]["capacity"] = 0
    (bad / "summary.json").write_text(json.dumps(s))
    expect_error([bad], "summary.json", "per_worker[1].capacity")


def test_too_many_windows(run_dirs):
    from spark.analyze import window_plan

    with pytest.raises(AnalysisError, match="windows over run kg"):
        window_plan(load_runs(run_dirs[:1]), window_s=1e-7)
