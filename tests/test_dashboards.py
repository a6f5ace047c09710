"""Grafana dashboards: generated JSON matches the committed files, queries respect the metrics contract, the CLI."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from topo.results import dashboards as dash
from topo.results import grafana
from topo.results.metric_names import HISTOGRAM, METRICS

ROOT = Path(__file__).resolve().parents[1]
GRAFANA_DIR = ROOT / "clusters" / "grafana"
SCRIPT = ROOT / "scripts" / "dashboards.py"


def _allowed_series() -> set[str]:
    names = set()
    for m in METRICS.values():
        names |= {m.prom + s for s in ("_bucket", "_sum", "_count")} if m.kind == HISTOGRAM else {m.prom}
    return names


def _targets(model: dict) -> list[dict]:
    return [t for p in model["panels"] for t in p["targets"]]


def _run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)


def test_committed_files_equal_a_fresh_generation():
    files = grafana.generated_files()
    assert set(files) == {"dashboards/topo-overview.json", "dashboards/topo-latency.json",
                          "provisioning/datasources/prometheus.yml", "provisioning/dashboards/dashboards.yml"}
    for rel, text in files.items():
        assert (GRAFANA_DIR / rel).read_text() == text, f"{rel} is stale: run scripts/dashboards.py"
    assert grafana.stale_files(GRAFANA_DIR) == []


def test_generation_is_deterministic():
    assert grafana.generated_files() == grafana.generated_files()


def test_dashboard_json_is_valid_and_every_panel_queries():
    uids = set()
    for rel, text in grafana.generated_files().items():
        if not rel.endswith(".json"):
            continue
        model = json.loads(text)
        uids.add(model["uid"])
        assert model["title"] and model["panels"]
        names = {v["name"]: v for v in model["templating"]["list"]}
        assert names["run"]["multi"] is True and names["run"]["includeAll"] is True
        assert names["run"]["query"].startswith("label_values(") and ", run)" in names["run"]["query"]
        assert metric_in_contract(names["run"]["query"].removeprefix("label_values(").split(",")[0])
        assert names["datasource"]["type"] == "datasource" and names["datasource"]["query"] == "prometheus"
        for panel in model["panels"]:
            assert panel["targets"], f"panel {panel['title']} has no target"
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            for t in panel["targets"]:
                assert t["expr"]
                assert "{{run}}" in t["legendFormat"] or t["format"] == "heatmap", t["legendFormat"]
        ids = [p["id"] for p in model["panels"]]
        assert len(ids) == len(set(ids))
    assert uids == {"topo-overview", "topo-latency"}


def metric_in_contract(name: str) -> bool:
    return name.strip() in _allowed_series()


def test_every_query_uses_only_contract_metrics_and_the_run_selector():
    allowed = _allowed_series()
    wanted = {"topo_latency_ms", "topo_tuples_processed", "topo_queue_length", "topo_utilization",
              "topo_virtual_workers", "topo_signals", "topo_migrations", "topo_migrated_keys"}
    used = set()
    for spec in grafana.DASHBOARDS:
        for t in _targets(grafana.dashboard_json(spec)):
            expr = t["expr"]
            names = grafana.metric_names_in(expr)
            assert names and names <= allowed, expr
            used |= names
            # every selector filters on the run variable; no bare metric outside a selector
            selectors = re.findall(r"\{([^}]*)\}", expr)
            assert all('run=~"$run"' in s for s in selectors), expr
            assert expr.count("ray_") == len(selectors), expr
            assert expr.count("(") == expr.count(")"), expr
    assert {m.prom for k, m in METRICS.items() if k in wanted} <= {n.removesuffix("_bucket") for n in used}


def test_latency_quantiles_and_overlay_labels():
    quantiles = [q for q in grafana.LATENCY.panels[0].queries]
    assert [q.expr.split(",")[0] for q in quantiles] == [f"histogram_quantile({q}" for q in (0.5, 0.95, 0.99)]
    for q in quantiles:
        assert "sum by (le, grouping, run)" in q.expr and "rate(ray_topo_latency_ms_bucket" in q.expr
        assert "{{run}}" in q.legend and "{{grouping}}" in q.legend
    spread = next(p for p in grafana.PANELS if p.key == "utilization_spread").queries[0].expr
    assert spread.startswith("max by (run, grouping)") and " - min by (run, grouping)" in spread


def test_all_queries_are_concrete():
    queries = grafana.all_queries("cg-ray-1|lag-ray-2")
    assert len(queries) == sum(len(p.queries) for p in grafana.PANELS)
    for q in queries:
        assert "$" not in q, q
        assert 'run=~"cg-ray-1|lag-ray-2"' in q
    assert any("[30s]" in q for q in queries)
    assert all("[1m]" in q for q in grafana.all_queries(".*", rate_interval="1m") if "rate(" in q or "increase(" in q)


def test_provisioning_yaml_parses():
    yaml = pytest.importorskip("yaml")
    ds = yaml.safe_load((GRAFANA_DIR / "provisioning/datasources/prometheus.yml").read_text())
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["uid"] == grafana.DATASOURCE_UID and source["url"]
    prov = yaml.safe_load((GRAFANA_DIR / "provisioning/dashboards/dashboards.yml").read_text())
    assert prov["providers"][0]["options"]["path"] == grafana.DASHBOARD_PATH
    prom = yaml.safe_load((ROOT / "clusters/prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    assert jobs["topo-local"]["static_configs"][0]["targets"] == [f"127.0.0.1:{grafana.DEFAULT_METRICS_PORT}"]
    assert jobs["ray"]["file_sd_configs"][0]["files"] == ["/tmp/ray/prom_metrics_service_discovery.json"]


def test_cli_writes_and_checks(tmp_path):
    out = tmp_path / "grafana"
    assert dash.main(["--out", str(out)]) == 0
    assert grafana.stale_files(out) == []
    assert dash.main(["--check", "--out", str(out)]) == 0
    (out / "dashboards/topo-latency.json").write_text("{}\n")
    assert dash.main(["--check", "--out", str(out)]) == 1
    assert dash.main(["--out", str(out)]) == 0  # regenerating replaces its own files
    assert dash.main(["--check", "--out", str(out)]) == 0


def test_cli_refuses_foreign_directory(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert dash.main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.txt" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("args", [
    ["--push", "http://localhost:3000"],  # no token
    ["--push", "localhost:3000"],
    ["--push", "http://localhost:3000", "--out", "x"],
    ["--check", "--push", "http://localhost:3000"],
    ["--render"],
    ["--render", "/nonexistent/run"],
    ["--timeout", "0"],
    ["--bogus"],
])
def test_cli_bad_input_is_one_line_exit_2(args, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != dash.TOKEN_ENV}
    proc = _run_cli(*args, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("dashboards.py: error:"), proc.stderr
    assert proc.stdout == ""


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests.append((self.path, dict(self.headers), json.loads(body)))
        uid = json.loads(body)["dashboard"]["uid"]
        answer = json.dumps({"status": "success", "uid": uid, "url": f"/d/{uid}/x", "version": 1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def test_push_uploads_with_token(monkeypatch, capsys):
    _Recorder.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv(dash.TOKEN_ENV, "secret-token")
        assert dash.main(["--push", f"http://127.0.0.1:{server.server_address[1]}"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert [r[0] for r in _Recorder.requests] == ["/api/dashboards/db"] * len(grafana.DASHBOARDS)
    for _, headers, body in _Recorder.requests:
        assert {k.lower(): v for k, v in headers.items()}["authorization"] == "Bearer secret-token"
        assert body["overwrite"] is True and body["dashboard"]["panels"]
    assert {b["dashboard"]["uid"] for _, _, b in _Recorder.requests} == {d.uid for d in grafana.DASHBOARDS}
    assert "uploaded /d/topo-overview/x" in capsys.readouterr().out


def test_push_to_unreachable_server_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv(dash.TOKEN_ENV, "t")
    with socket_closed_port() as port:
        assert dash.main(["--push", f"http://127.0.0.1:{port}", "--timeout", "2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "upload" in err


class socket_closed_port:  # noqa: N801 - used as a context manager
    """A local port nobody listens on."""

    def __enter__(self) -> int:
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        return self.port

    def __exit__(self, *exc):
        return False


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from topo.cli.run import main as run_topology

    out = tmp_path_factory.mktemp("runs") / "cg-sim"
    assert run_topology(["--engine", "sim", "--grouping", "cg", "--stream",
                         "zipf:z=1.2,keys=2000,messages=20000,seed=7", "--out", str(out), "--quiet",
                         "--no-plots", "--json"]) == 0
    return out


def test_render_writes_one_png_per_panel(run_dir, tmp_path):
    out = tmp_path / "png"
    assert dash.main(["--render", str(run_dir), str(run_dir), "--out", str(out)]) == 0
    pngs = sorted(p.name for p in out.iterdir())
    assert pngs == sorted(f"{p.key}.png" for p in grafana.PANELS)
    for name in pngs:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert dash.main(["--render", str(run_dir), "--out", str(out)]) == 0  # replaces its own PNGs


def test_render_rejects_non_run_dir(tmp_path, capsys):
    assert dash.main(["--render", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
