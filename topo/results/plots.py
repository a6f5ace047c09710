"""PNG plots of one run: what a person would rather look at than read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    return plt


def _title(summary: dict[str, Any]) -> str:
    return f"{summary['grouping']} ({summary['engine']}), {summary['sources']} sources -> {summary['workers']} workers"


CDF_SAMPLE = 2_000_000  # tuples a run's latency CDF is drawn from at most (an evenly strided sample beyond)


def latency_cdf(path: Path, latency_ms: np.ndarray, worker: np.ndarray, summary: dict[str, Any]) -> None:
    """Empirical CDF of end-to-end latency, overall and for the slowest and fastest workers."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sample = _thin(latency_ms, 200_000)
    ax.plot(np.sort(sample), np.linspace(0, 1, sample.size), color="black", lw=2, label="all tuples")
    if worker.size:
        # each worker's median, its tuples grouped in one sort (a mask per worker took minutes at 1,000 workers)
        order, counts = np.argsort(worker, kind="stable"), np.bincount(worker, minlength=summary["workers"])
        runs = np.split(np.asarray(latency_ms)[order], np.cumsum(counts)[:-1])
        med = np.array([np.median(run) if run.size else np.nan for run in runs])
        picks = [int(np.nanargmax(med)), int(np.nanargmin(med))] if np.isfinite(med).any() else []
        for w, style in zip(dict.fromkeys(picks), ("--", ":")[: len(set(picks))], strict=True):
            lat_w = _thin(latency_ms[worker == w], 50_000)
            ax.plot(np.sort(lat_w), np.linspace(0, 1, lat_w.size), ls=style, label=f"worker {w}")
    ax.set_xscale("symlog", linthresh=max(1e-3, float(np.percentile(sample, 1)) if sample.size else 1.0))
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of tuples")
    ax.set_title(_title(summary))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


LINES_UP_TO = 8  # workers drawn as one line each; past this a line per worker is a tangle, so a heatmap


def worker_series(path: Path, ts: dict[str, np.ndarray], summary: dict[str, Any]) -> None:
    """Queue length and utilization of every worker over time: a line each for a few workers, a workers x time
    heatmap for more (as Flink's and Grafana's own views show many subtasks)."""
    plt = _pyplot()
    fig = worker_series_figure(plt, ts, summary)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def worker_series_figure(plt: Any, ts: dict[str, np.ndarray], summary: dict[str, Any]) -> Any:
    """The figure `worker_series` saves."""
    n = summary["workers"]
    heat = n > LINES_UP_TO
    fig, (ax_q, ax_u) = plt.subplots(2, 1, figsize=(9 if heat else 8, 6 if n <= 32 else 8), sharex=True)
    t = np.unique(ts["t_s"])
    for name, ax, label in (("queue_len", ax_q, "queue length (tuples)"), ("utilization", ax_u, "utilization")):
        grid = _grid(ts, name, n)
        if heat:
            step = float(np.median(np.diff(t))) if t.size > 1 else 1.0
            extent = (float(t[0]) if t.size else 0.0, float(t[-1]) + step if t.size else 1.0, n - 0.5, -0.5)
            image = ax.imshow(grid, aspect="auto", interpolation="nearest", extent=extent, cmap="viridis",
                              vmin=0.0, vmax=1.0 if name == "utilization" else None)
            fig.colorbar(image, ax=ax, label=label, pad=0.01)
            ax.set_ylabel("worker")
        else:
            for w in range(n):
                ax.plot(t, grid[w], lw=1, label=f"w{w}")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
    ax_u.set_xlabel("time (s)")
    if not heat:
        ax_q.legend(fontsize=7, ncol=min(6, n))
    ax_q.set_title(_title(summary))
    fig.tight_layout()
    return fig


def worker_load(path: Path, summary: dict[str, Any]) -> None:
    """Tuples per worker divided by its capacity: equal bars mean a balanced topology."""
    plt = _pyplot()
    rows = summary["per_worker"]
    norm = np.array([w["tuples"] / w["capacity"] for w in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(max(5, min(14, 0.25 * len(rows) + 3)), 4))
    ax.bar([w["id"] for w in rows], norm, color="tab:blue")
    ax.axhline(norm.mean() if norm.size else 0, color="black", ls="--", lw=1, label="mean")
    ax.set_xlabel("worker")
    ax.set_ylabel("tuples / capacity")
    ax.set_title(f"{_title(summary)}\nimbalance {summary['imbalance']:.3f}, replication {summary['replication']:.2f}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _grid(ts: dict[str, np.ndarray], column: str, n: int) -> np.ndarray:
    t_values, t_index = np.unique(ts["t_s"], return_inverse=True)
    grid = np.zeros((n, t_values.size))
    grid[ts["worker"].astype(int), t_index] = ts[column]
    return grid


def _thin(a: np.ndarray, most: int) -> np.ndarray:
    """An evenly strided subsample: a CDF of millions of points draws the same with fewer."""
    a = np.asarray(a, dtype=float)
    return a if a.size <= most else a[:: int(np.ceil(a.size / most))]
