"""Spark analytics over run directories: one DataFrame over the latency logs of all runs, reduced to small tables.

`analyze(spark, runs)` reads every run's latency.parquet and timeseries.parquet (checked beforehand by
`analyze_inputs.load_runs`) and returns an `Analysis`: a comparison table (one row per run), per-worker tables,
per-window tables (throughput, latency percentiles, load and imbalance over time), utilization over time and a
latency CDF per run.

Spark reads the logs twice. One scan reduces them, with grouping sets, to three small tables: a log-bucket
latency histogram per worker, one per time window, and tuples per window and worker. A second scan fetches the
few latencies that exact percentiles need (`analyze_quantiles`). Everything after that is pandas on tables of a
few rows per run, worker, window and bucket (`analyze_tables`).

Time is measured from each run's first arrival, the origin of the run summary (`topo.results.metrics.summarize`), and
percentiles (overall, per worker, per window) are exact, computed like the summary's (numpy's linear
interpolation).
"""

from __future__ import annotations

import math
import time
from functools import reduce

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark.analyze_inputs import AnalysisError, RunInput
from spark.analyze_quantiles import ALL, RUN, exact_quantiles, log_bucket
from spark.analyze_tables import PERCENTS, Analysis, assemble

WINDOWS_PER_RUN = 50  # default --window: about this many windows over each run
MAX_WINDOWS = 100_000  # per run: tables and plots of more would help nobody
_CUBE = ("run", "worker", "window", "bucket")
_SETS = {"worker": ("run", "worker", "bucket"), "window": ("run", "window", "bucket"),
         "cells": ("run", "window", "worker")}


def analyze(spark: SparkSession, runs: list[RunInput], window_s: float | None = None) -> Analysis:
    """Analyze checked runs; `window_s` is the window length in seconds (default: about 50 windows per run)."""
    plan = window_plan(runs, window_s)
    clock = _Clock()
    data = clock.step("open logs", framed_latency, spark, runs, plan)
    worker_hist, window_hist, cells = clock.step("scan", _reduce, data)
    _check_buckets(worker_hist, runs)
    hist = _groups(worker_hist, window_hist)
    quantiles = clock.step("exact percentiles", exact_quantiles, data, hist, (*PERCENTS, 100.0))  # 100: the max
    utilization = clock.step("utilization", _utilization, spark, runs, plan)
    return clock.step("tables", assemble, runs, plan, worker_hist, cells, hist, quantiles, utilization,
                      clock.seconds)


class _Clock:
    """Wall time of each named step."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def step(self, name: str, fn, *args):
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.seconds[name] = time.perf_counter() - start


def nice_window(seconds: float) -> float:
    """The 1-2-5 x 10^k length nearest to `seconds` (on a log scale), for round window boundaries."""
    if not seconds > 0:
        return 1.0
    exponent = math.floor(math.log10(seconds))
    candidates = [m * 10.0**e for e in (exponent - 1, exponent, exponent + 1) for m in (1, 2, 5)]
    return min(candidates, key=lambda c: abs(math.log(c / seconds)))


def window_plan(runs: list[RunInput], window_s: float | None = None) -> pd.DataFrame:
    """Per run (by index): time origin t0, duration, window length and number of windows."""
    if window_s is not None and not (math.isfinite(window_s) and window_s > 0):
        raise AnalysisError(f"--window {window_s}: must be a positive number of seconds")
    rows = []
    for i, r in enumerate(runs):
        duration = r.last_finish_s - r.first_arrival_s
        width = window_s or nice_window(duration / WINDOWS_PER_RUN)
        count = max(1, math.ceil(duration / width - 1e-9))
        if count > MAX_WINDOWS:
            raise AnalysisError(f"--window {width:g}: {count:,} windows over run {r.name} (at most {MAX_WINDOWS:,}; "
                                "a longer window gives fewer)")
        rows.append((i, r.first_arrival_s, duration, width, count))
    return pd.DataFrame(rows, columns=["run", "t0", "duration_s", "window_s", "windows"])


def latency_frame(spark: SparkSession, runs: list[RunInput]) -> DataFrame:
    """All runs' latency logs as one DataFrame (run index, worker, arrival_s, finish_s, latency_ms)."""
    frames = [
        spark.read.parquet(str(r.latency_path.resolve())).select(
            F.lit(i).cast("int").alias("run"), F.col("worker").cast("int"), F.col("arrival_s").cast("double"),
            F.col("finish_s").cast("double"), F.col("latency_ms").cast("double"))
        for i, r in enumerate(runs)
    ]
    return reduce(DataFrame.unionByName, frames)


def framed_latency(spark: SparkSession, runs: list[RunInput], plan: pd.DataFrame) -> DataFrame:
    """The latency logs with each tuple's time window (by finish time): run, worker, window, latency_ms."""
    frame = spark.createDataFrame(plan[["run", "t0", "window_s", "windows"]].astype(
        {"run": "int32", "t0": "float64", "window_s": "float64", "windows": "int32"}))
    # the last finish lies exactly on the end of the last window: count it in that window
    index = F.floor((F.col("finish_s") - F.col("t0")) / F.col("window_s"))
    window = F.greatest(F.lit(0), F.least(index, F.col("windows") - 1)).cast("int")
    return latency_frame(spark, runs).join(F.broadcast(frame), "run").select(
        "run", "worker", window.alias("window"), "latency_ms")


def _grouping_id(present: tuple[str, ...]) -> int:
    """Spark's grouping_id of a grouping set of _CUBE: a 1 bit (first column highest) per column left out."""
    return sum(1 << (len(_CUBE) - 1 - i) for i, c in enumerate(_CUBE) if c not in present)


def _reduce(data: DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One scan, three grouping sets: the latency histogram per (run, worker) and per (run, window) (count, min,
    max, sum per log bucket), and tuples per (run, window, worker)."""
    rows = (data.withColumn("bucket", log_bucket(F.col("latency_ms")))
            .groupingSets([list(s) for s in _SETS.values()], *_CUBE)
            .agg(F.count("*").alias("n"), F.min("latency_ms").alias("lo"), F.max("latency_ms").alias("hi"),
                 F.sum("latency_ms").alias("sum"), F.grouping_id().alias("set"))
            .toPandas())
    parts = [rows[rows["set"] == _grouping_id(cols)][[*cols, "n", "lo", "hi", "sum"]].reset_index(drop=True)
             for cols in _SETS.values()]
    return parts[0], parts[1], parts[2][["run", "window", "worker", "n"]]


def _check_buckets(worker_hist: pd.DataFrame, runs: list[RunInput]) -> None:
    """No latency fell outside every bucket (null or NaN): checked before Spark started, so only a file changed
    underneath gets here."""
    bad = worker_hist[worker_hist["bucket"].isna()]
    if len(bad):
        raise AnalysisError(f"{runs[int(bad['run'].iloc[0])].latency_path}: {int(bad['n'].sum()):,} null or NaN "
                            "latencies")


def _groups(worker_hist: pd.DataFrame, window_hist: pd.DataFrame) -> pd.DataFrame:
    """The histograms of every group percentiles are wanted for: whole runs, workers, windows."""
    runs = worker_hist.groupby(["run", "bucket"], as_index=False).agg(n=("n", "sum"), lo=("lo", "min"),
                                                                     hi=("hi", "max"))
    parts = [runs.assign(kind=RUN, key=ALL), worker_hist.rename(columns={"worker": "key"}).assign(kind="worker"),
             window_hist.rename(columns={"window": "key"}).assign(kind="window")]
    hist = pd.concat([p[["run", "kind", "key", "bucket", "n", "lo", "hi"]] for p in parts], ignore_index=True)
    return hist.astype({"run": "int32", "key": "int32", "bucket": "int64", "n": "int64"})


def _utilization(spark: SparkSession, runs: list[RunInput], plan: pd.DataFrame) -> pd.DataFrame:
    """Per time-series sample of each run: lowest, mean and highest worker utilization, their spread, queues."""
    frames = [
        spark.read.parquet(str(r.timeseries_path.resolve())).select(
            F.lit(i).cast("int").alias("run"), F.col("t_s").cast("double"), F.col("utilization").cast("double"),
            F.col("queue_len").cast("long"))
        for i, r in enumerate(runs)
    ]
    samples = (reduce(DataFrame.unionByName, frames).groupBy("run", "t_s")
               .agg(F.min("utilization").alias("util_min"), F.avg("utilization").alias("util_mean"),
                    F.max("utilization").alias("util_max"), F.max("queue_len").alias("queue_max"),
                    F.sum("queue_len").alias("queue_total"))
               .toPandas().sort_values(["run", "t_s"], ignore_index=True))
    samples["util_spread"] = samples["util_max"] - samples["util_min"]
    samples["t_s"] = samples["t_s"] - samples["run"].map(plan.set_index("run")["t0"])  # the runs' time origin
    samples["run"] = [runs[i].name for i in samples["run"]]
    return samples[["run", "t_s", "util_min", "util_mean", "util_max", "util_spread", "queue_max", "queue_total"]]
