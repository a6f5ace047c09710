"""How fast the Spark run analysis is on a large log, next to the same core work done by pandas and by DuckDB.

Builds a synthetic run directory (10M latency records by default: Poisson-like arrivals over ~100 s, skewed
workers, log-normal latencies with distinct values, the worst case for exact percentiles) with a summary.json
computed from it by numpy, or uses an existing run directory. Then times
  (a) Spark: session start + input checks + `spark.analyze.analyze` + writing the report directory, as one
      analyze_runs.py invocation does (and the checks and analysis once more in the warm session);
  (b) the core work (overall and per-worker exact percentiles, throughput per window, per-window percentiles,
      tuples per worker per window) in pandas and in DuckDB, each in one process reading the same Parquet file;
and prints the times, their ratios and whether the overall percentiles agree.

python benchmarks/bench_analyze.py                          # 10M synthetic records
python benchmarks/bench_analyze.py --rows 1000000 --workers 32
python benchmarks/bench_analyze.py --run-dir runs/cg-sim-...  # an existing run (e.g. a 10M-message sim run)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from experiments.provenance import add_numbers_option  # noqa: E402
from spark.analyze import PERCENTS, WINDOWS_PER_RUN, nice_window  # noqa: E402
from topo.results.rundir import LATENCY_FILE, SUMMARY_FILE, TIMESERIES_FILE  # noqa: E402

QS = [p / 100 for p in PERCENTS]


def synthesize(directory: Path, rows: int, workers: int, seed: int = 7) -> None:
    """A run directory with `rows` latency records and a summary.json consistent with them."""
    rng = np.random.default_rng(seed)
    capacities = np.where(np.arange(workers) < workers // 2, 1.0, 0.5)
    share = rng.zipf(2.0, workers).astype(float) * capacities  # uneven load, as a skewed grouping gives
    worker = rng.choice(workers, size=rows, p=share / share.sum()).astype(np.int32)
    arrival = np.sort(rng.uniform(0.0, rows / 100_000, rows))  # 100k tuples/s
    latency = rng.lognormal(mean=0.5, sigma=1.2, size=rows) / capacities[worker]
    finish = arrival + latency / 1e3
    latency_ms = (finish - arrival) * 1e3  # exactly as topo.results.metrics computes it
    pq.write_table(pa.table({
        "seq": pa.array(np.arange(rows), pa.int64()), "source": pa.array(np.arange(rows) % 2, pa.int32()),
        "worker": pa.array(worker), "arrival_s": pa.array(arrival), "finish_s": pa.array(finish),
        "latency_ms": pa.array(latency_ms)}), directory / LATENCY_FILE)
    t0, t1 = float(arrival.min()), float(finish.max())
    samples = t0 + (t1 - t0) / 200 * np.arange(1, 201)
    pq.write_table(pa.table({
        "t_s": pa.array(np.repeat(samples, workers)), "worker": pa.array(np.tile(np.arange(workers, dtype=np.int32),
                                                                                  200)),
        "queue_len": pa.array(rng.integers(0, 100, 200 * workers)), "utilization": pa.array(rng.uniform(0, 1, 200 *
                                                                                                       workers)),
        "processed": pa.array(np.zeros(200 * workers, np.int64))}), directory / TIMESERIES_FILE)
    tuples = np.bincount(worker, minlength=workers)
    p50, p95, p99 = np.percentile(latency_ms, [50, 95, 99])
    relative = tuples / capacities
    summary = {
        "grouping": "synthetic", "engine": "none", "workers": workers, "sources": 2, "tuples_in": rows,
        "tuples_processed": rows, "duration_s": t1 - t0, "throughput_tps": rows / (t1 - t0),
        "latency_ms": {"mean": float(latency_ms.mean()), "p50": p50, "p95": p95, "p99": p99,
                       "max": float(latency_ms.max())},
        "imbalance": float(relative.max() / relative.mean() - 1), "replication": 1.0,
        "per_worker": [{"id": w, "capacity": float(capacities[w]), "tuples": int(tuples[w]), "distinct_keys": 0,
                        "busy_fraction": 0.0} for w in range(workers)],
        "exact": True,
    }
    (directory / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")


def time_spark(run_dir: Path, master: str | None) -> tuple[float, dict, float, float]:
    """Wall seconds of the whole Spark analysis (session start included), its steps, the overall p99, and the wall
    seconds of the same analysis again in the now warm session (JIT-compiled, code generated)."""
    clock = time.perf_counter()
    from spark.session import get_session

    spark = get_session(master, app="bench-analyze")
    steps = {"spark start": time.perf_counter() - clock}
    from spark.analyze import analyze
    from spark.analyze_inputs import load_runs
    from spark.analyze_report import write_analysis

    mark = time.perf_counter()
    runs = load_runs([run_dir])
    steps["input checks"] = time.perf_counter() - mark
    analysis = analyze(spark, runs)
    steps.update(analysis.timings)
    mark = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        write_analysis(analysis, Path(out))
    steps["write report"] = time.perf_counter() - mark
    total = time.perf_counter() - clock
    mark = time.perf_counter()
    analyze(spark, load_runs([run_dir]))
    return total, steps, float(analysis.runs["p99_ms"].iloc[0]), time.perf_counter() - mark


def time_pandas(run_dir: Path) -> tuple[float, float]:
    """The core work in pandas: wall seconds and the overall p99."""
    import pandas as pd

    clock = time.perf_counter()
    df = pq.read_table(run_dir / LATENCY_FILE, columns=["worker", "arrival_s", "finish_s", "latency_ms"]
                       ).to_pandas()
    overall = np.percentile(df["latency_ms"].to_numpy(), PERCENTS)
    df.groupby("worker")["latency_ms"].quantile(QS)
    t0 = df["arrival_s"].min()
    width = nice_window((df["finish_s"].max() - t0) / WINDOWS_PER_RUN)
    df["window"] = ((df["finish_s"] - t0) // width).astype(np.int64)
    df.groupby("window").size() / width  # throughput per window
    df.groupby("window")["latency_ms"].quantile(QS)
    df.groupby(["window", "worker"]).size()
    _ = pd  # pandas does the work above through the DataFrame
    return time.perf_counter() - clock, float(overall[2])


def time_duckdb(run_dir: Path) -> tuple[float, float]:
    """The core work in DuckDB (all cores), straight from the Parquet file: wall seconds and the overall p99."""
    import duckdb

    clock = time.perf_counter()
    con = duckdb.connect()
    path = str(run_dir / LATENCY_FILE).replace("'", "''")
    con.execute(f"CREATE TEMP VIEW lat AS SELECT worker, arrival_s, finish_s, latency_ms FROM read_parquet('{path}')")
    qs = ", ".join(str(q) for q in QS)
    overall = con.execute(f"SELECT quantile_cont(latency_ms, [{qs}]) FROM lat").fetchone()[0]
    con.execute(f"SELECT worker, quantile_cont(latency_ms, [{qs}]) FROM lat GROUP BY worker").fetchall()
    t0, t1 = con.execute("SELECT min(arrival_s), max(finish_s) FROM lat").fetchone()
    width = nice_window((t1 - t0) / WINDOWS_PER_RUN)
    con.execute(f"CREATE TEMP VIEW win AS SELECT *, floor((finish_s - {t0!r}) / {width!r})::BIGINT AS w FROM lat")
    con.execute(f"SELECT w, count(*) / {width!r}, quantile_cont(latency_ms, [{qs}]) FROM win GROUP BY w"
                ).fetchall()
    con.execute("SELECT w, worker, count(*) FROM win GROUP BY w, worker").fetchall()
    con.close()
    return time.perf_counter() - clock, float(overall[2])


def main(argv: list[str] | None = None) -> int:
    """Build (or take) a run directory and time the three ways of analyzing it."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--rows", type=int, default=10_000_000, help="latency records of the synthetic run")
    p.add_argument("--workers", type=int, default=8, help="workers of the synthetic run")
    p.add_argument("--run-dir", type=Path, default=None, help="time this run directory instead of a synthetic one")
    p.add_argument("--keep", type=Path, default=None, metavar="DIR",
                   help="write the synthetic run here and keep it (default: a temporary directory)")
    p.add_argument("--master", default=None, help="Spark master (default local[*])")
    add_numbers_option(p, "the times")
    args = p.parse_args(argv)

    tmp = None
    if args.run_dir is None:
        run_dir = args.keep or Path(tmp := tempfile.mkdtemp(prefix="bench-analyze-"))
        run_dir.mkdir(parents=True, exist_ok=True)
        clock = time.perf_counter()
        synthesize(run_dir, args.rows, args.workers)
        print(f"synthetic run: {args.rows:,} records, {args.workers} workers, built in "
              f"{time.perf_counter() - clock:.1f} s")
    else:
        run_dir = args.run_dir
    try:
        rows = pq.ParquetFile(run_dir / LATENCY_FILE).metadata.num_rows
        p99_summary = json.loads((run_dir / SUMMARY_FILE).read_text())["latency_ms"]["p99"]
        spark_s, steps, p99_spark, warm_s = time_spark(run_dir, args.master)
        pandas_s, p99_pandas = time_pandas(run_dir)
        duck_s, p99_duck = time_duckdb(run_dir)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{rows:,} latency records")
    print(f"  spark   {spark_s:7.1f} s  (" + ", ".join(f"{k} {v:.1f}" for k, v in steps.items()) + ")")
    print(f"  pandas  {pandas_s:7.1f} s  spark/pandas = {spark_s / pandas_s:.1f}x")
    print(f"  duckdb  {duck_s:7.1f} s  spark/duckdb = {spark_s / duck_s:.1f}x")
    print(f"  spark without session start: {spark_s - steps['spark start']:.1f} s; checks + analysis again in the "
          f"warm session: {warm_s:.1f} s (spark/pandas {warm_s / pandas_s:.1f}x, spark/duckdb {warm_s / duck_s:.1f}x)")
    print(f"  overall p99 ms: summary {p99_summary:.6f}, spark {p99_spark:.6f}, pandas {p99_pandas:.6f}, "
          f"duckdb {p99_duck:.6f}")
    if args.json:
        print(json.dumps({"rows": rows, "spark_s": spark_s, "spark_steps": steps, "spark_warm_s": warm_s,
                          "pandas_s": pandas_s, "duckdb_s": duck_s,
                          "p99_ms": {"summary": p99_summary, "spark": p99_spark, "pandas": p99_pandas,
                                     "duckdb": p99_duck}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
