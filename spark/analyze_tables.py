"""The tables of an analysis, assembled with pandas from the small aggregates Spark collected.

Per worker, per window and per run; every row keyed by the run's label, every time measured from the run's first
arrival, loads as tuples / capacity (capacities from summary.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from spark.analyze_inputs import RunInput
from spark.analyze_quantiles import ALL, RUN

PERCENTS = (50.0, 95.0, 99.0, 99.9)
PERCENT_COLUMNS = ("p50_ms", "p95_ms", "p99_ms", "p999_ms")
SUMMARY_TOLERANCE = 0.01  # a percentile further than this (relative) from summary.json's is reported


@dataclass
class Analysis:
    """The tables an analysis produced (pandas DataFrames, small) and what it was asked."""

    runs: pd.DataFrame  # one row per run: the comparison table
    workers: pd.DataFrame  # one row per run and worker
    windows: pd.DataFrame  # one row per run and time window: throughput, latency percentiles, imbalance
    window_load: pd.DataFrame  # one row per run, window and worker: tuples and tuples / capacity
    utilization: pd.DataFrame  # one row per run and time-series sample: spread of utilization over workers
    cdf: pd.DataFrame  # latency CDF per run: (run, latency_ms, fraction) at ~1% steps of latency
    window_s: dict[str, float]  # window length used for each run
    notes: list[str] = field(default_factory=list)  # disagreements with the summaries, worth a look
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds of each step, for benchmarks


def assemble(runs: list[RunInput], plan: pd.DataFrame, worker_hist: pd.DataFrame, cells: pd.DataFrame,
             hist: pd.DataFrame, quantiles: pd.DataFrame, utilization: pd.DataFrame,
             timings: dict[str, float]) -> Analysis:
    """The Analysis, from what Spark collected: `plan` per run (t0, duration_s, window_s, windows), the latency
    histogram per worker, tuples per (run, window, worker) `cells`, the histograms of all groups and their
    percentiles, utilization per sample."""
    workers = _workers_table(runs, quantiles, worker_hist)
    windows, window_load = _windows_tables(runs, plan, cells, quantiles)
    table = _runs_table(runs, plan, quantiles, worker_hist, workers)
    return Analysis(
        runs=table, workers=workers, windows=windows, window_load=window_load, utilization=utilization,
        cdf=_cdf(hist, runs), window_s={r.name: float(w) for r, w in zip(runs, plan["window_s"], strict=True)},
        notes=summary_disagreements(runs, table, workers), timings=timings,
    )


def _cdf(hist: pd.DataFrame, runs: list[RunInput]) -> pd.DataFrame:
    """Fraction of each run's tuples at or below the top of each log bucket (about 1% apart in latency)."""
    whole = hist[hist["kind"] == RUN].sort_values(["run", "bucket"], ignore_index=True)
    whole["fraction"] = whole.groupby("run")["n"].cumsum() / whole.groupby("run")["n"].transform("sum")
    whole["run"] = [runs[i].name for i in whole["run"]]
    return whole.rename(columns={"hi": "latency_ms"})[["run", "latency_ms", "fraction"]]


def _percentiles(quantiles: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Percentiles of one kind of group as a (run, key) x percent table."""
    return quantiles[quantiles["kind"] == kind].pivot_table(index=["run", "key"], columns="percent", values="value")


def _workers_table(runs: list[RunInput], quantiles: pd.DataFrame, worker_hist: pd.DataFrame) -> pd.DataFrame:
    """One row per run and worker: capacity, tuples, load relative to capacity, busy fraction, exact percentiles."""
    counts = worker_hist.groupby(["run", "worker"])["n"].sum()
    pct = _percentiles(quantiles, "worker")
    rows = []
    for i, r in enumerate(runs):
        per_worker = sorted(r.summary["per_worker"], key=lambda w: w["id"])
        loads = {w["id"]: counts.get((i, w["id"]), 0) / w["capacity"] for w in per_worker}
        mean_load = float(np.mean(list(loads.values())))
        for w in per_worker:
            row = {"run": r.name, "worker": int(w["id"]), "capacity": float(w["capacity"]),
                   "tuples": int(counts.get((i, w["id"]), 0)), "load": loads[w["id"]],
                   "relative_load": loads[w["id"]] / mean_load if mean_load else 0.0,
                   "busy_fraction": w.get("busy_fraction"), "distinct_keys": w.get("distinct_keys")}
            for q, col in zip(PERCENTS, PERCENT_COLUMNS, strict=True):
                row[col] = float(pct.loc[(i, w["id"]), q]) if (i, w["id"]) in pct.index else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def _windows_tables(runs: list[RunInput], plan: pd.DataFrame, cells: pd.DataFrame,
                    quantiles: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per window: throughput, exact latency percentiles and imbalance; per window and worker: tuples and load."""
    pct = _percentiles(quantiles, "window")
    windows, loads = [], []
    for i, r in enumerate(runs):
        width, count, duration = (float(plan.at[i, "window_s"]), int(plan.at[i, "windows"]),
                                  float(plan.at[i, "duration_s"]))
        caps = r.capacities
        ids = sorted(caps)
        # every (window, worker) cell, zero where the worker finished nothing in that window
        grid = (cells[cells["run"] == i].pivot_table(index="window", columns="worker", values="n", aggfunc="sum")
                .reindex(index=range(count), columns=ids).fillna(0).astype(np.int64))
        load = grid / np.array([caps[w] for w in ids])
        mean = load.mean(axis=1).to_numpy()
        starts = np.arange(count) * width
        ends = np.minimum(starts + width, duration)  # the last window ends with the run
        tuples = grid.sum(axis=1).to_numpy()
        table = pd.DataFrame({
            "run": r.name, "window": np.arange(count), "t_start_s": starts, "t_end_s": ends, "tuples": tuples,
            "throughput_tps": np.divide(tuples, ends - starts, out=np.full(count, np.nan), where=ends > starts),
            "imbalance": np.divide(load.max(axis=1).to_numpy(), mean, out=np.full(count, np.nan), where=mean > 0) - 1,
        })
        mine = pct.loc[i] if i in pct.index.get_level_values("run") else pd.DataFrame(columns=PERCENTS)
        for q, col in zip(PERCENTS, PERCENT_COLUMNS, strict=True):
            table[col] = mine[q].reindex(range(count)).to_numpy()
        windows.append(table)
        long = grid.stack().rename("tuples").reset_index()
        long["load"] = long["tuples"] / long["worker"].map(caps)
        long.insert(0, "run", r.name)
        long.insert(2, "t_start_s", long["window"] * width)
        loads.append(long)
    return pd.concat(windows, ignore_index=True), pd.concat(loads, ignore_index=True)


def _runs_table(runs: list[RunInput], plan: pd.DataFrame, quantiles: pd.DataFrame, worker_hist: pd.DataFrame,
                workers: pd.DataFrame) -> pd.DataFrame:
    """The comparison table: one row per run."""
    overall = _percentiles(quantiles, RUN)
    totals = worker_hist.groupby("run").agg(tuples=("n", "sum"), sum=("sum", "sum"))
    rows = []
    for i, r in enumerate(runs):
        s, duration = r.summary, float(plan.at[i, "duration_s"])
        tuples = int(totals.at[i, "tuples"])
        load = workers.loc[workers["run"] == r.name, "load"].to_numpy()
        row = {"run": r.name, "grouping": s["grouping"], "engine": s["engine"], "workers": len(s["per_worker"]),
               "sources": s.get("sources"), "tuples": tuples, "duration_s": duration,
               "throughput_tps": tuples / duration if duration > 0 else float("nan"),
               "mean_ms": float(totals.at[i, "sum"] / tuples)}
        for q, col in zip(PERCENTS, PERCENT_COLUMNS, strict=True):
            row[col] = float(overall.loc[(i, ALL), q])
        row["max_ms"] = float(overall.loc[(i, ALL), 100.0])
        row["imbalance"] = float(load.max() / load.mean() - 1) if load.mean() > 0 else 0.0
        row["replication"] = float(s["replication"])
        row["exact"] = bool(s["exact"])
        row["path"] = str(r.path)
        rows.append(row)
    return pd.DataFrame(rows)


def summary_disagreements(runs: list[RunInput], table: pd.DataFrame, workers: pd.DataFrame) -> list[str]:
    """Where the logs and summary.json disagree (percentiles by more than 1%, tuples per worker at all)."""
    notes = []
    for r, row in zip(runs, table.itertuples(index=False), strict=True):
        given = r.summary["latency_ms"]
        for key, col in (("p50", "p50_ms"), ("p95", "p95_ms"), ("p99", "p99_ms"), ("p999", "p999_ms")):
            ours, theirs = getattr(row, col), given.get(key)
            if isinstance(theirs, (int, float)) and abs(ours - theirs) > SUMMARY_TOLERANCE * max(abs(theirs), 1e-9):
                notes.append(f"{r.name}: {key} from the log is {ours:.4g} ms, summary.json says {theirs:.4g} ms")
        mine = workers[workers["run"] == r.name].set_index("worker")["tuples"]
        for w in r.summary["per_worker"]:
            if int(mine.get(w["id"], 0)) != w["tuples"]:
                notes.append(f"{r.name}: worker {w['id']} finished {int(mine.get(w['id'], 0)):,} tuples in the log, "
                             f"summary.json says {w['tuples']:,}")
    return notes
