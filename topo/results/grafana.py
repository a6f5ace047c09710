"""Grafana dashboards for a running topology, generated from Python (grafanalib).

The panels query only the series of `topo.results.metric_names.METRICS` (the exporter's contract), every one filtered by
the multi-select `run` variable, and aggregated by (run, grouping[, worker]) so that selecting two runs overlays
them with the run and grouping in the legend. The panel list is data (`DASHBOARDS`); three things are made from
it: the Grafana JSON (`dashboard_json`), the concrete PromQL a test can send to a real Prometheus (`all_queries`)
and offline PNGs drawn from a run directory's logs (`topo.results.render`), for users without Grafana.

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

from topo.results.metric_names import METRICS

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
TIME_SCALE = _prom("topo_time_scale")


def per_emulated_s(expr: str) -> str:
    """A per-run rate (per wall second) as a rate per emulated second: times the run's time scale K."""
    return f"{expr} * on (run, grouping) group_left max by (run, grouping) ({TIME_SCALE}{{{RUN}}})"
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
              "tuples per emulated second served by all workers (solid) and emitted by all sources, per run",
              (Query(per_emulated_s(f"sum by (run, grouping) (rate({PROCESSED}{{{RUN}}}[{RATE}]))"),
                     "{{run}} {{grouping}} processed"),
               Query(per_emulated_s(f"sum by (run, grouping) (rate({EMITTED}{{{RUN}}}[{RATE}]))"),
                     "{{run}} {{grouping}} emitted"))),
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
                     description="Generated by scripts/dashboards.py from topo/results/grafana.py; "
                                 "do not edit by hand.",
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
