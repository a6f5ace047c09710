"""The dashboards' offline twin: every Grafana panel drawn as a PNG from run directories' logs, for users without
Grafana (`scripts/dashboards.py --render RUN_DIR ...`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from topo.results.grafana import PANELS
from topo.results.metric_names import LATENCY_BUCKETS_MS
from topo.results.rundir import LATENCY_FILE, SUMMARY_FILE, TIMESERIES_FILE


class RunDirError(ValueError):
    """A run directory that cannot be rendered (missing or unreadable logs)."""


@dataclass
class _Run:
    name: str
    grouping: str
    summary: dict
    latency: object  # pandas DataFrame
    timeseries: object  # pandas DataFrame


def load_run(path: Path) -> _Run:
    """Read the logs of one run directory (summary.json, latency.parquet, timeseries.parquet)."""
    import pyarrow.parquet as pq

    path = Path(path)
    missing = [f for f in (SUMMARY_FILE, LATENCY_FILE, TIMESERIES_FILE) if not (path / f).is_file()]
    if missing:
        raise RunDirError(f"{path}: not a run directory (missing {', '.join(missing)})")
    try:
        summary = json.loads((path / SUMMARY_FILE).read_text())
        # pyarrow's reader, not pandas': pandas' sometimes left a thread that aborted the process at exit
        columns = ["worker", "finish_s", "arrival_s", "latency_ms"]
        latency = pq.read_table(path / LATENCY_FILE, columns=columns).to_pandas()
        timeseries = pq.read_table(path / TIMESERIES_FILE).to_pandas()
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user-facing problem
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise RunDirError(f"{path}: cannot read run logs ({type(exc).__name__}: {detail})") from None
    _check_logs(path, summary, latency, timeseries)
    return _Run(path.resolve().name, str(summary.get("grouping", "?")), summary, latency, timeseries)


def _check_logs(path: Path, summary: object, latency, timeseries) -> None:
    """RunDirError for logs no engine writes: a summary that is no object, no tuples, times NaN or negative."""
    import numpy as np

    if not isinstance(summary, dict):
        raise RunDirError(f"{path / SUMMARY_FILE}: expected a JSON object, found {type(summary).__name__}")
    if not len(latency):
        raise RunDirError(f"{path / LATENCY_FILE}: no rows (the run processed no tuples)")
    for name, table, columns in ((LATENCY_FILE, latency, ("arrival_s", "finish_s", "latency_ms")),
                                 (TIMESERIES_FILE, timeseries, ("t_s",))):
        for col in columns:
            if col not in table:
                raise RunDirError(f"{path / name}: no column '{col}'")
            try:
                values = np.asarray(table[col], dtype=float)
            except (TypeError, ValueError):
                raise RunDirError(f"{path / name}: column '{col}' is not numeric") from None
            if not np.all(np.isfinite(values)) or np.any(values < 0):
                raise RunDirError(f"{path / name}: column '{col}' holds NaN, infinite or negative values")


def _bins(run: _Run, n: int = 100):
    import numpy as np

    end = max(float(run.latency["finish_s"].max()) if len(run.latency) else 0.0, 1e-9)
    return np.linspace(0.0, end, n + 1)


def _draw_latency_quantiles(ax, runs):
    import pandas as pd

    for run in runs:
        edges = _bins(run)
        b = pd.cut(run.latency["finish_s"], edges, include_lowest=True, labels=False)
        mids = (edges[:-1] + edges[1:]) / 2
        for q in (0.5, 0.95, 0.99):
            vals = run.latency["latency_ms"].groupby(b).quantile(q).reindex(range(len(mids)))
            ax.plot(mids, vals.to_numpy(dtype=float), label=f"{run.name} {run.grouping} p{round(q * 100)}")
    ax.set_ylabel("latency (ms)")


def _draw_worker_heatmap(fig, runs):
    import numpy as np
    import pandas as pd

    axes = fig.subplots(len(runs), 1, squeeze=False)[:, 0]
    for ax, run in zip(axes, runs, strict=True):
        edges = _bins(run)
        b = pd.cut(run.latency["finish_s"], edges, include_lowest=True, labels=False)
        grid = run.latency["latency_ms"].groupby([run.latency["worker"], b]).quantile(0.95).unstack()
        grid = grid.reindex(columns=range(len(edges) - 1))
        workers = grid.index.to_numpy()
        mesh = ax.pcolormesh(edges, np.arange(len(workers) + 1) - 0.5, grid.to_numpy(dtype=float), cmap="Oranges",
                             shading="flat")
        ax.set_yticks(range(len(workers)), [f"w{w}" for w in workers])
        ax.set_title(f"{run.name} {run.grouping}", fontsize=9)
        fig.colorbar(mesh, ax=ax, label="p95 latency (ms)")
    axes[-1].set_xlabel("time (s)")


def _draw_latency_distribution(fig, runs):
    import numpy as np
    from matplotlib.colors import LogNorm

    ax = fig.subplots()
    edges = _bins(runs[0]) if len(runs) == 1 else np.linspace(0, max(_bins(r)[-1] for r in runs), 101)
    ybounds = np.array((0.0,) + tuple(float(b) for b in LATENCY_BUCKETS_MS))
    lat = np.concatenate([r.latency["latency_ms"].to_numpy() for r in runs])
    fin = np.concatenate([r.latency["finish_s"].to_numpy() for r in runs])
    # Prometheus buckets are upper bounds (le); the last row gathers everything beyond the largest bound
    ybin = np.searchsorted(ybounds[1:], lat, side="left")
    counts, _, _ = np.histogram2d(fin, ybin, bins=[edges, np.arange(len(ybounds) + 1) - 0.5])
    counts[counts == 0] = np.nan
    mesh = ax.pcolormesh(edges, np.arange(len(ybounds) + 1), counts.T, cmap="Oranges", norm=LogNorm(), shading="flat")
    ax.set_yticks(np.arange(len(ybounds)) + 0.5, [f"≤{b:g}" for b in ybounds[1:]] + ["+Inf"], fontsize=7)
    ax.set_ylabel("latency bucket (ms)")
    ax.set_xlabel("time (s)")
    fig.colorbar(mesh, ax=ax, label="tuples")


def _draw_throughput(ax, runs):
    import numpy as np

    for run in runs:
        edges = _bins(run)
        width = edges[1] - edges[0]
        mids = (edges[:-1] + edges[1:]) / 2
        done, _ = np.histogram(run.latency["finish_s"], edges)
        sent, _ = np.histogram(run.latency["arrival_s"], edges)
        ax.plot(mids, done / width, label=f"{run.name} {run.grouping} processed")
        ax.plot(mids, sent / width, "--", label=f"{run.name} {run.grouping} emitted")
    ax.set_ylabel("tuples/s")


def _draw_per_worker(column: str, ylabel: str):
    def draw(ax, runs):
        for run in runs:
            ts = run.timeseries
            if column not in ts:
                continue
            for worker, part in ts.groupby("worker"):
                ax.plot(part["t_s"], part[column], label=f"{run.name} {run.grouping} w{worker}")
        ax.set_ylabel(ylabel)
    return draw


def _draw_spread(ax, runs):
    for run in runs:
        ts = run.timeseries
        if "utilization" in ts:
            g = ts.groupby("t_s")["utilization"]
            spread = g.max() - g.min()
            ax.plot(spread.index, spread.to_numpy(), label=f"{run.name} {run.grouping}")
    ax.set_ylabel("max - min utilization")


def _draw_imbalance(ax, runs):
    for run in runs:
        ts = run.timeseries
        if "processed" in ts:  # cumulative tuples per worker: imbalance of the load so far
            g = ts.groupby("t_s")["processed"]
            mean = g.mean()
            imb = (g.max() / mean.where(mean > 0)) - 1
            ax.plot(imb.index, imb.to_numpy(), label=f"{run.name} {run.grouping}")
    ax.set_ylabel("max/mean - 1")


def _bars(ax, groups: dict[str, dict[str, float]], ylabel: str) -> None:
    """Grouped bars: one group per run, one bar per item (the run logs hold totals, not time series)."""
    import numpy as np

    items = sorted({k for g in groups.values() for k in g}, key=str)
    width = 0.8 / max(len(groups), 1)
    for i, (label, values) in enumerate(groups.items()):
        ax.bar(np.arange(len(items)) + i * width, [values.get(k, 0) for k in items], width, label=label)
    ax.set_xticks(np.arange(len(items)) + width * (len(groups) - 1) / 2, items)
    ax.set_ylabel(ylabel)


def _draw_virtual_workers(ax, runs):
    groups = {}
    for run in runs:
        stats = [s for s in run.summary.get("grouping_stats") or [] if isinstance(s, dict) and "virtual_workers" in s]
        if stats:
            total: dict[str, float] = {}
            for s in stats:
                for w, v in enumerate(s["virtual_workers"]):
                    total[f"w{w}"] = total.get(f"w{w}", 0) + v
            groups[f"{run.name} {run.grouping}"] = total
    _bars(ax, groups, "virtual workers at the end (summed over sources)")


def _draw_signals(ax, runs):
    groups = {f"{r.name} {r.grouping}": dict(r.summary.get("signals") or {}) for r in runs}
    _bars(ax, groups, "signals sent in the run")


def _draw_migrations(ax, runs):
    groups = {f"{r.name} {r.grouping}": {"migrations": r.summary.get("migrations", 0),
                                         "migrated keys": r.summary.get("migrated_keys", 0)} for r in runs}
    _bars(ax, groups, "total in the run")
    ax.set_yscale("symlog")


# panel key -> (draws on one Axes?, drawing function)
_RENDERERS = {
    "latency_quantiles": (True, _draw_latency_quantiles),
    "latency_worker_heatmap": (False, _draw_worker_heatmap),
    "latency_distribution": (False, _draw_latency_distribution),
    "throughput": (True, _draw_throughput),
    "queue_per_worker": (True, _draw_per_worker("queue_len", "tuples queued")),
    "utilization_spread": (True, _draw_spread),
    "imbalance": (True, _draw_imbalance),
    "virtual_workers": (True, _draw_virtual_workers),
    "signals": (True, _draw_signals),
    "migrations": (True, _draw_migrations),
}


def render_runs(runs: list[_Run], out: Path) -> list[Path]:
    """Write `<panel key>.png` for every panel into `out` (an existing directory); returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for spec in PANELS:
        one_axes, draw = _RENDERERS[spec.key]
        fig = plt.figure(figsize=(10, 4.5 if one_axes else 2.2 + 2.3 * len(runs)), layout="constrained")
        if one_axes:
            ax = fig.subplots()
            draw(ax, runs)
            if ax.has_data():
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=7, ncol=2)
            else:
                ax.text(0.5, 0.5, "not recorded in this run directory", ha="center", va="center",
                        transform=ax.transAxes)
            if spec.key not in ("virtual_workers", "signals", "migrations"):
                ax.set_xlabel("time (s)")
            ax.grid(alpha=0.3)
        else:
            draw(fig, runs)
        fig.suptitle(spec.title)
        path = Path(out) / f"{spec.key}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
