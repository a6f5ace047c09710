"""Grafana dashboards for a running topology, generated from Python (grafanalib), and their offline PNG twin.

The panels query only the series of `topo.metric_names.METRICS` (the exporter's contract), every one filtered by
the multi-select `run` variable, and aggregated by (run, grouping[, worker]) so that selecting two runs overlays
them with the run and grouping in the legend. The panel list is data (`DASHBOARDS`); three things are made from
it: the Grafana JSON (`dashboard_json`), the concrete PromQL a test can send to a real Prometheus (`all_queries`)
and offline PNGs drawn from a run directory's logs (`render_run`), for users without Grafana.

Files written by `generated_files()` (and `scripts/dashboards.py --out clusters/grafana`):
    dashboards/topo-latency.json, dashboards/topo-overview.json   the dashboards
    provisioning/datasources/prometheus.yml                       a Prometheus datasource (uid `topo-prometheus`)
    provisioning/dashboards/dashboards.yml                        loads the JSON from /var/lib/grafana/dashboards
Mount `clusters/grafana/provisioning` as /etc/grafana/provisioning and `clusters/grafana/dashboards` as
/var/lib/grafana/dashboards; `clusters/prometheus.yml` scrapes a local run's metrics port (`DEFAULT_METRICS_PORT`)
and a Ray cluster through Ray's service-discovery file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from topo.metric_names import LATENCY_BUCKETS_MS, METRICS
from topo.rundir import LATENCY_FILE, SUMMARY_FILE, TIMESERIES_FILE

DEFAULT_METRICS_PORT = 8080  # `ray start --metrics-export-port=8080`; clusters/prometheus.yml scrapes it
PROMETHEUS_URL = "http://localhost:9090"  # where the provisioned datasource points
DATASOURCE_UID = "topo-prometheus"
DATASOURCE_NAME = "Prometheus"
DASHBOARD_PATH = "/var/lib/grafana/dashboards"  # inside the Grafana container
RATE = "$__rate_interval"
RUN = 'run=~"$run"'  # the run selector every series carries
DS = {"type": "prometheus", "uid": "${datasource}"}


def _prom(name: str, suffix: str = "") -> str:
    """The Prometheus series name of a METRICS entry (KeyError for a name outside the contract)."""
    return METRICS[name].prom + suffix


LAT_BUCKET = _prom("topo_latency_ms", "_bucket")
PROCESSED = _prom("topo_tuples_processed")
EMITTED = _prom("topo_tuples_emitted")
QUEUE = _prom("topo_queue_length")
UTIL = _prom("topo_utilization")
VW = _prom("topo_virtual_workers")
SIGNALS = _prom("topo_signals")
MIGRATIONS = _prom("topo_migrations")
MIGRATED_KEYS = _prom("topo_migrated_keys")
IMBALANCE = _prom("topo_imbalance")


@dataclass(frozen=True)
class Query:
    """One PromQL expression of a panel and its legend (Grafana `{{label}}` syntax)."""

    expr: str
    legend: str
    format: str = "time_series"  # "heatmap" for bucket counts


@dataclass(frozen=True)
class PanelSpec:
    """One panel: `key` names its PNG; kind is 'timeseries' or 'heatmap'; unit is a Grafana unit id."""

    key: str
    title: str
    kind: str
    unit: str
    description: str
    queries: tuple[Query, ...]


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    title: str
    panels: tuple[PanelSpec, ...]


def _quantile(q: float) -> Query:
    return Query(f"histogram_quantile({q}, sum by (le, grouping, run) (rate({LAT_BUCKET}{{{RUN}}}[{RATE}])))",
                 f"{{{{run}}}} {{{{grouping}}}} p{round(q * 100)}")


LATENCY = DashboardSpec("topo-latency", "Topology latency", (
    PanelSpec("latency_quantiles", "Latency p50 / p95 / p99 by grouping", "timeseries", "ms",
              "end-to-end tuple latency quantiles from the latency histogram, per run and grouping",
              tuple(_quantile(q) for q in (0.5, 0.95, 0.99))),
    PanelSpec("latency_worker_heatmap", "p95 latency per worker", "heatmap", "ms",
              "one row per (run, worker); colour = p95 latency of the tuples that worker served",
              (Query(f"histogram_quantile(0.95, sum by (le, run, grouping, worker) "
                     f"(rate({LAT_BUCKET}{{{RUN}}}[{RATE}])))", "{{run}} {{grouping}} w{{worker}}"),)),
    PanelSpec("latency_distribution", "Latency distribution (selected runs)", "heatmap", "ms",
              "tuples per latency bucket over time, all selected runs and workers together",
              (Query(f"sum by (le) (increase({LAT_BUCKET}{{{RUN}}}[{RATE}]))", "{{le}}", "heatmap"),)),
))

OVERVIEW = DashboardSpec("topo-overview", "Topology overview", (
    PanelSpec("throughput", "Throughput", "timeseries", "ops",
              "tuples per second served by all workers (solid) and emitted by all sources, per run",
              (Query(f"sum by (run, grouping) (rate({PROCESSED}{{{RUN}}}[{RATE}]))",
                     "{{run}} {{grouping}} processed"),
               Query(f"sum by (run, grouping) (rate({EMITTED}{{{RUN}}}[{RATE}]))", "{{run}} {{grouping}} emitted"))),
    PanelSpec("queue_per_worker", "Queue length per worker", "timeseries", "short",
              "tuples waiting in each worker's input queue",
              (Query(f"max by (run, grouping, worker) ({QUEUE}{{{RUN}}})", "{{run}} {{grouping}} w{{worker}}"),)),
    PanelSpec("utilization_spread", "Utilization spread (max - min over workers)", "timeseries", "percentunit",
              "difference between the busiest and the idlest worker's busy fraction, per run",
              (Query(f"max by (run, grouping) ({UTIL}{{{RUN}}}) - min by (run, grouping) ({UTIL}{{{RUN}}})",
                     "{{run}} {{grouping}}"),)),
    PanelSpec("imbalance", "Load imbalance (max/mean - 1)", "timeseries", "percentunit",
              "load imbalance over the active workers as the runtime reports it",
              (Query(f"max by (run, grouping) ({IMBALANCE}{{{RUN}}})", "{{run}} {{grouping}}"),)),
    PanelSpec("virtual_workers", "Virtual workers per worker (cg)", "timeseries", "short",
              "cg: virtual workers mapped to each worker, summed over sources",
              (Query(f"sum by (run, grouping, worker) ({VW}{{{RUN}}})", "{{run}} {{grouping}} w{{worker}}"),)),
    PanelSpec("signals", "Signals (increase / decrease)", "timeseries", "ops",
              "increase/decrease signals per second the workers send, per run and kind",
              (Query(f"sum by (run, grouping, kind) (rate({SIGNALS}{{{RUN}}}[{RATE}]))",
                     "{{run}} {{grouping}} {{kind}}"),)),
    PanelSpec("migrations", "Migrations and migrated keys", "timeseries", "ops",
              "repartitions that moved state, and keys whose state moved, per second",
              (Query(f"sum by (run, grouping) (rate({MIGRATIONS}{{{RUN}}}[{RATE}]))",
                     "{{run}} {{grouping}} migrations"),
               Query(f"sum by (run, grouping) (rate({MIGRATED_KEYS}{{{RUN}}}[{RATE}]))",
                     "{{run}} {{grouping}} migrated keys"))),
))

DASHBOARDS = (OVERVIEW, LATENCY)
PANELS = tuple(p for d in DASHBOARDS for p in d.panels)
RUN_VALUES_QUERY = f"label_values({PROCESSED}, run)"


def all_queries(run: str, rate_interval: str = "30s") -> list[str]:
    """Every panel's PromQL with `$run` replaced by `run` (a regex, used with =~) and `$__rate_interval`."""
    return [q.expr.replace("$__rate_interval", rate_interval).replace("$run", run)
            for p in PANELS for q in p.queries]


# ---------------------------------------------------------------------------------------------------- Grafana JSON
def _templating():
    from grafanalib.core import Template, Templating

    datasource = Template(name="datasource", label="Datasource", type="datasource", query="prometheus",
                          default=DATASOURCE_NAME)
    run = Template(name="run", label="Run", query=RUN_VALUES_QUERY, dataSource=DS, multi=True, includeAll=True,
                   allValue=".*", refresh=2, sort=1)
    return Templating(list=[datasource, run])


def _panel(spec: PanelSpec, x: int, y: int):
    from grafanalib.core import GridPos, Heatmap, Target, TimeSeries, YAxis

    targets = [Target(expr=q.expr, legendFormat=q.legend, format=q.format, refId=chr(ord("A") + i), datasource=DS)
               for i, q in enumerate(spec.queries)]
    grid = GridPos(h=9, w=12, x=x, y=y)
    if spec.kind == "heatmap":
        bucket_data = spec.queries[0].format == "heatmap"
        return Heatmap(title=spec.title, description=spec.description, dataSource=DS, targets=targets,
                       gridPos=grid, dataFormat="tsbuckets" if bucket_data else "timeseries",
                       yAxis=YAxis(format=spec.unit),
                       extraJson={"options": {"calculate": False, "yAxis": {"unit": spec.unit},
                                              "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential",
                                                        "exponent": 0.5},
                                              "rowsFrame": {"layout": "auto"},
                                              "cellGap": 1, "tooltip": {"show": True, "yHistogram": False}}})
    return TimeSeries(title=spec.title, description=spec.description, dataSource=DS, targets=targets, gridPos=grid,
                      unit=spec.unit, legendDisplayMode="table", legendCalcs=["lastNotNull", "max"],
                      tooltipMode="multi")


def build_dashboard(spec: DashboardSpec):
    """The grafanalib Dashboard of one spec, panels two per row."""
    from grafanalib.core import Dashboard, Time

    panels = [_panel(p, x=12 * (i % 2), y=9 * (i // 2)) for i, p in enumerate(spec.panels)]
    return Dashboard(title=spec.title, uid=spec.uid, tags=["topo"],
                     description="Generated by scripts/dashboards.py from topo/dashboards.py; do not edit by hand.",
                     templating=_templating(), panels=panels, time=Time("now-30m", "now"), refresh="10s",
                     timezone="utc").auto_panel_ids()


def dashboard_json(spec: DashboardSpec) -> dict:
    """The dashboard model Grafana stores (what the JSON files hold and what --push uploads)."""
    from grafanalib._gen import DashboardEncoder

    return json.loads(json.dumps(build_dashboard(spec).to_json_data(), cls=DashboardEncoder))


def _dump(obj: dict) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


DATASOURCE_YAML = f"""\
# Generated by scripts/dashboards.py; do not edit. Grafana provisioning: the Prometheus the dashboards query.
apiVersion: 1
datasources:
  - name: {DATASOURCE_NAME}
    uid: {DATASOURCE_UID}
    type: prometheus
    access: proxy
    url: {PROMETHEUS_URL}
    isDefault: true
    editable: true
    jsonData:
      timeInterval: 5s
"""

DASHBOARDS_YAML = f"""\
# Generated by scripts/dashboards.py; do not edit. Grafana provisioning: load the topo dashboards JSON from
# {DASHBOARD_PATH} (mount clusters/grafana/dashboards there).
apiVersion: 1
providers:
  - name: topo
    orgId: 1
    folder: Topology
    type: file
    disableDeletion: false
    allowUiUpdates: true
    updateIntervalSeconds: 30
    options:
      path: {DASHBOARD_PATH}
      foldersFromFilesStructure: false
"""


def generated_files() -> dict[str, str]:
    """Relative path -> text of every file under clusters/grafana."""
    files = {f"dashboards/{d.uid}.json": _dump(dashboard_json(d)) for d in DASHBOARDS}
    files["provisioning/datasources/prometheus.yml"] = DATASOURCE_YAML
    files["provisioning/dashboards/dashboards.yml"] = DASHBOARDS_YAML
    return files


def stale_files(directory: Path) -> list[str]:
    """The generated files missing from `directory` or different from a fresh generation."""
    directory = Path(directory)
    return [rel for rel, text in generated_files().items()
            if not (directory / rel).is_file() or (directory / rel).read_text() != text]


def write_files(directory: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = Path(directory) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def metric_names_in(expr: str) -> set[str]:
    """The series names an expression selects (identifiers directly followed by a `{` selector)."""
    return set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", expr))


# ------------------------------------------------------------------------------------------------- offline render
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
    import pandas as pd

    path = Path(path)
    missing = [f for f in (SUMMARY_FILE, LATENCY_FILE, TIMESERIES_FILE) if not (path / f).is_file()]
    if missing:
        raise RunDirError(f"{path}: not a run directory (missing {', '.join(missing)})")
    try:
        summary = json.loads((path / SUMMARY_FILE).read_text())
        latency = pd.read_parquet(path / LATENCY_FILE, columns=["worker", "finish_s", "arrival_s", "latency_ms"])
        timeseries = pd.read_parquet(path / TIMESERIES_FILE)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user-facing problem
        raise RunDirError(f"{path}: cannot read run logs ({type(exc).__name__}: {exc})") from None
    return _Run(path.resolve().name, str(summary.get("grouping", "?")), summary, latency, timeseries)


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


# ------------------------------------------------------------------------------------------------------------- CLI
EXIT_USAGE, EXIT_STALE = 2, 1
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "clusters" / "grafana"
TOKEN_ENV = "GRAFANA_TOKEN"


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


def build_parser():
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(message)

    p = Parser(
        prog="dashboards.py",
        description="Generate the Grafana dashboards of a running topology (grafanalib) with their provisioning "
                    "files, check that the committed ones are up to date, upload them to a Grafana server, or draw "
                    "the same panels as PNGs from run directories for users without Grafana.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog=f"panels: {'; '.join(f'{s.key} ({s.title})' for s in PANELS)}. Prometheus scrapes a local run on "
               f"127.0.0.1:{DEFAULT_METRICS_PORT} and a Ray cluster (clusters/prometheus.yml); the provisioned "
               f"datasource points at {PROMETHEUS_URL}.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 (listing the files) if the files under --out differ from a fresh "
                           "generation")
    mode.add_argument("--push", default=None, metavar="URL",
                      help=f"upload the dashboards to the Grafana server at URL (e.g. http://localhost:3000), "
                           f"overwriting ones with the same uid; the API token (service-account token) is read from "
                           f"the environment variable {TOKEN_ENV}; writes no files")
    mode.add_argument("--render", nargs="+", default=None, metavar="RUN_DIR",
                      help="draw every panel as <panel>.png into --out from these run directories' logs "
                           "(several run directories are overlaid, like selecting several runs in Grafana)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help=f"directory to write (replaced whole; refused if it holds files this script does not "
                        f"write); default: {DEFAULT_OUT.relative_to(DEFAULT_OUT.parents[1])} for the dashboards, "
                        f"<first RUN_DIR>/dashboard for --render")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="--push: HTTP timeout of each request to Grafana")
    return p


def _owned(out: Path, names: set[str]) -> None:
    """Refuse to replace a directory holding anything but files this script writes (`names`, relative)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    if out.is_dir():
        foreign = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file()
                         and str(f.relative_to(out)) not in names)
        if foreign:
            raise UsageError(f"--out {out}: holds files this script does not write ({foreign[0]}, ...); "
                             f"choose an empty or new directory")


def _write_dir(out: Path, files: dict[str, str] | None = None, runs: list | None = None) -> list[str]:
    from topo.rundir import atomic_run_dir

    names = set(files) if files is not None else {f"{p.key}.png" for p in PANELS}
    _owned(out, names)
    with atomic_run_dir(out, overwrite=True) as tmp:
        if files is not None:
            write_files(tmp, files)
        else:
            render_runs(runs, tmp)
        # mkdtemp makes the directory private; Grafana (often another user, in a container) must read it
        import os

        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)
    return sorted(names)


def push(url: str, token: str, timeout: float = 10.0) -> list[str]:
    """Upload every dashboard (overwrite by uid) with grafana-client; returns the URLs Grafana reports."""
    from grafana_client import GrafanaApi

    api = GrafanaApi.from_url(url, credential=token, timeout=timeout)
    urls = []
    for spec in DASHBOARDS:
        answer = api.dashboard.update_dashboard(
            {"dashboard": dashboard_json(spec), "overwrite": True, "message": "scripts/dashboards.py"})
        urls.append(str((answer or {}).get("url", spec.uid)) if isinstance(answer, dict) else spec.uid)
    return urls


def main(argv: list[str] | None = None) -> int:
    """Entry point of scripts/dashboards.py; returns the exit status."""
    import os
    import sys
    from urllib.parse import urlparse

    try:
        args = build_parser().parse_args(argv)
        if args.timeout <= 0:
            raise UsageError(f"--timeout {args.timeout:g}: must be positive")
        if args.push is not None:
            if args.out is not None:
                raise UsageError("--out: --push writes no files; drop --out")
            parsed = urlparse(args.push)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise UsageError(f"--push '{args.push}': expected a Grafana URL such as http://localhost:3000")
            token = os.environ.get(TOKEN_ENV, "").strip()
            if not token:
                raise UsageError(f"--push: set the environment variable {TOKEN_ENV} to a Grafana API token")
            try:
                urls = push(args.push, token, args.timeout)
            except Exception as exc:  # noqa: BLE001 - network/HTTP failures: one line, not a traceback
                detail = " ".join(str(exc).split())[:300]
                print(f"dashboards.py: error: upload to {args.push} failed: {type(exc).__name__}: {detail}",
                      file=sys.stderr)
                return EXIT_STALE
            for u in urls:
                print(f"uploaded {u}")
            return 0
        if args.render is not None:
            runs = [load_run(Path(d)) for d in args.render]
            out = Path(args.out) if args.out else Path(args.render[0]) / "dashboard"
            written = _write_dir(out, runs=runs)
            print(f"wrote {len(written)} panels to {out}")
            return 0
        out = Path(args.out) if args.out else DEFAULT_OUT
        if args.check:
            stale = stale_files(out)
            if stale:
                print(f"dashboards.py: {out}: out of date: {', '.join(stale)} "
                      f"(regenerate with scripts/dashboards.py --out {out})", file=sys.stderr)
                return EXIT_STALE
            print(f"{out}: up to date")
            return 0
        written = _write_dir(out, files=generated_files())
        print(f"wrote {len(written)} files to {out}")
        return 0
    except (UsageError, RunDirError) as exc:
        print(f"dashboards.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
