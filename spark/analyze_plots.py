"""PNG figures comparing runs, drawn from the small tables of an `Analysis` (one line or bar group per run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

DPI = 110


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    return plt


def draw_all(analysis, directory: Path) -> list[str]:
    """Every figure of the report into `directory`; returns their file names in report order."""
    figures = {
        "latency_cdf.png": latency_cdf,
        "throughput.png": throughput,
        "latency_windows.png": latency_over_time,
        "imbalance.png": imbalance_over_time,
        "utilization_spread.png": utilization_spread,
        "worker_load.png": worker_load,
    }
    for name, draw in figures.items():
        draw(analysis, directory / name)
    return list(figures)


def latency_cdf(analysis, path: Path) -> None:
    """Fraction of tuples at or below each latency, one line per run, latency on a log axis."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for run, cdf in _by_run(analysis.cdf):
        positive = cdf[cdf["latency_ms"] > 0]  # a log axis has no zero: those tuples still count in the fractions
        ax.step(positive["latency_ms"], positive["fraction"], where="post", lw=1.5, label=run)
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("fraction of tuples")
    ax.set_ylim(0, 1.01)
    _finish(fig, ax, path, "End-to-end latency CDF")


def throughput(analysis, path: Path) -> None:
    """Tuples finished per second in each window, over time."""
    _lines(analysis.windows, "throughput_tps", "throughput (tuples/s)", "Throughput over time", path, floor=0.0)


def latency_over_time(analysis, path: Path) -> None:
    """Median (dashed) and p99 (solid) latency per window, over time."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for color, (run, w) in zip(_colors(), _by_run(analysis.windows), strict=False):
        mid = (w["t_start_s"] + w["t_end_s"]) / 2
        ax.plot(mid, w["p99_ms"], color=color, lw=1.5, label=f"{run} p99")
        ax.plot(mid, w["p50_ms"], color=color, lw=1, ls="--", label=f"{run} p50")
    ax.set_yscale("symlog", linthresh=max(1e-3, float(np.nanmin(analysis.windows["p50_ms"].clip(lower=1e-3)))))
    ax.set_xlabel("time since the run's first arrival (s)")
    ax.set_ylabel("latency (ms)")
    _finish(fig, ax, path, "Latency per window (p50 dashed, p99 solid)")


def imbalance_over_time(analysis, path: Path) -> None:
    """Per window: max over workers of tuples / capacity, over their mean, minus one."""
    _lines(analysis.windows, "imbalance", "imbalance (max / mean load - 1)", "Load imbalance per window", path)


def utilization_spread(analysis, path: Path) -> None:
    """Highest minus lowest worker utilization at each time-series sample."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run, u in _by_run(analysis.utilization):
        ax.plot(u["t_s"], u["util_spread"], lw=1.2, label=run)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("time since the run's first arrival (s)")
    ax.set_ylabel("utilization max - min over workers")
    _finish(fig, ax, path, "Utilization spread over time")


def worker_load(analysis, path: Path) -> None:
    """Each worker's tuples / capacity over its run's mean: one group of bars per run; 1.0 is a fair share."""
    plt = _pyplot()
    runs = list(dict.fromkeys(analysis.workers["run"]))
    most = int(analysis.workers.groupby("run").size().max())
    fig, ax = plt.subplots(figsize=(min(16, max(6, 0.18 * most * len(runs) + 3)), 4.5))
    width = 0.8 / most
    for g, run in enumerate(runs):
        w = analysis.workers[analysis.workers["run"] == run].reset_index(drop=True)
        x = g - 0.4 + width * (np.arange(len(w)) + 0.5)
        labels = [f"worker {i}" if g == 0 and most <= 12 else None for i in w["worker"]]  # a key for few workers
        ax.bar(x, w["relative_load"], width=width * 0.9, color=plt.cm.viridis(w["worker"] / max(1, most - 1)),
               label=labels)
    ax.axhline(1.0, color="black", ls="--", lw=1, label="fair share (load proportional to capacity)")
    ax.set_xticks(range(len(runs)), runs, rotation=20 if len(runs) > 4 else 0)
    ax.set_ylabel("tuples / capacity, over the run's mean")
    ax.set_xlabel("run (bars: workers in id order)")
    _finish(fig, ax, path, "Per-worker load")


def _lines(table: pd.DataFrame, column: str, ylabel: str, title: str, path: Path, floor: float | None = None,
           ) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run, w in _by_run(table):
        ax.plot((w["t_start_s"] + w["t_end_s"]) / 2, w[column], lw=1.5, marker=".", ms=3, label=run)
    if floor is not None:
        ax.set_ylim(bottom=floor)
    ax.set_xlabel("time since the run's first arrival (s)")
    ax.set_ylabel(ylabel)
    _finish(fig, ax, path, title)


def _by_run(table: pd.DataFrame):
    """(run, rows) in the order runs were given."""
    for run in dict.fromkeys(table["run"]):
        yield run, table[table["run"] == run]


def _colors():
    import itertools

    return itertools.cycle(_pyplot().rcParams["axes.prop_cycle"].by_key()["color"])


def _finish(fig, ax, path: Path, title: str) -> None:
    ax.set_title(title)
    ax.grid(alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8, ncol=2 if len(handles) > 8 else 1)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    _pyplot().close(fig)
