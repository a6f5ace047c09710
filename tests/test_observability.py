"""`--metrics-port`: a real run on Ray, scraped by a real Prometheus, queried through its HTTP API.

The topology runs in a subprocess (one pytest process holds one Ray, and the metrics export port is chosen when
Ray starts); Prometheus scrapes it every second. Every metric of `topo.results.metric_names.METRICS` must have data with
its labels, the latency percentiles must agree with summary.json within the histogram's bucket resolution, and
every dashboard query (`topo.results.dashboards.all_queries`, when that module exists) must return data. While the run
lasts, its processes must listen on loopback only (nothing unauthenticated open beyond it on a local run).
"""

from __future__ import annotations

import bisect
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import MISSING_TOOL
from sockets import READABLE, is_loopback, listening, tree

from topo.results.metric_names import HISTOGRAM, LATENCY_BUCKETS_MS, METRICS

ROOT = Path(__file__).resolve().parents[1]
RUN = "obs-run"
WORKERS, SOURCES = 4, 2
PROMETHEUS = shutil.which("prometheus")
LISTENED: set[tuple[str, int]] = set()  # (address, port) the run's processes listened on while it ran


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return json.loads(answer.read())


class Prom:
    """A Prometheus server's HTTP API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expr: str, at: float) -> list[dict]:
        """An instant query evaluated at `at` (unix seconds)."""
        params = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        body = _get(f"{self.url}/api/v1/query?{params}")
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[dict]:
        """A range query over [start, end]."""
        params = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step})
        body = _get(f"{self.url}/api/v1/query_range?{params}")
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]


class ObservedRun:
    """Prometheus on loopback scraping 127.0.0.1:`metrics_port` every second, and a short cg run with two slow
    workers exporting metrics to it, in a thread (the run is mostly waiting: `begin` starts it early, so that its
    seconds overlap other files). `wait()` gives (Prom, summary, start, end) once the run is over."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="observability-"))
        self.metrics_port = _free_port()
        self.proc: subprocess.Popen | None = None  # Prometheus
        self.result: tuple | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._observe, name="observability-run", daemon=True)
        self.thread.start()

    def _observe(self) -> None:
        try:
            prom = self._prometheus()
            self.result = (prom, *self._run())
        except BaseException as exc:  # noqa: BLE001 - re-raised by `wait`, in the test that needs the run
            self.error = exc

    def _prometheus(self) -> Prom:
        config = self.tmp / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: topo\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{self.metrics_port}']\n"
        )
        port = _free_port()
        with (self.tmp / "prometheus.log").open("w") as log:
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.tmp / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=1).read()
                return Prom(url)
            except (urllib.error.URLError, OSError):
                if self.proc.poll() is not None or time.time() > deadline:
                    log = (self.tmp / "prometheus.log").read_text()[-2000:]
                    raise RuntimeError(f"Prometheus did not start: {log}") from None
                time.sleep(0.2)

    def _run(self) -> tuple[dict, float, float]:
        out = self.tmp / RUN
        cmd = [sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", "ray",
               "--metrics-port", str(self.metrics_port), "--grouping", "cg", "--workers", str(WORKERS),
               "--sources", str(SOURCES), "--capacities", "1,1,0.3,0.3", "--cost-ms", "1", "--duration", "10",
               "--batch-size", "100", "--max-pending", "4", "--stream", "zipf:z=1.2,keys=20000,messages=200000,seed=7",
               "--out", str(out), "--json", "--no-plots", "--quiet"]
        start = time.time()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # while it runs, every socket the run's processes listen on (Ray's and the exporter)
            deadline = time.monotonic() + 180
            while proc.poll() is None and time.monotonic() < deadline:
                if READABLE:
                    LISTENED.update(listening(tree(proc.pid)))
                time.sleep(0.2)
            stdout, stderr = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"the observed run failed: {stderr[-3000:]}")
        time.sleep(2.5)  # Prometheus stores its last scrapes
        summary = json.loads((out / "summary.json").read_text())
        assert json.loads(stdout.strip().splitlines()[-1])["tuples_in"] == summary["tuples_in"]
        return summary, start, time.time()

    def wait(self) -> tuple:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result

    def close(self) -> None:
        self.thread.join()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)


_BEGUN: list[ObservedRun] = []


def begin() -> None:
    """Start the observed run (tests/conftest.py calls this when the files that run late begin)."""
    if PROMETHEUS is not None and not _BEGUN:
        _BEGUN.append(ObservedRun())


@pytest.fixture(scope="module")
def observed():
    if PROMETHEUS is None:
        pytest.skip(f"{MISSING_TOOL}: Prometheus is not installed")
    begin()  # unless it has begun
    yield _BEGUN[0]
    _BEGUN.pop().close()


@pytest.fixture(scope="module")
def metrics_port(observed) -> int:
    return observed.metrics_port


@pytest.fixture(scope="module")
def prometheus(observed) -> Prom:
    return observed.wait()[0]


@pytest.fixture(scope="module")
def run(observed) -> tuple[dict, float, float]:
    """The observed run, once it is over: (summary, start, end)."""
    return observed.wait()[1:]


def test_a_local_ray_run_listens_on_loopback_only(run, metrics_port):
    """Nothing open beyond loopback: the run listened on 127.0.0.1 only, Ray's own ports included (GCS, raylet,
    object manager, agents, workers), and the metrics endpoint was up there."""
    if not READABLE:
        pytest.skip("reads sockets from Linux's /proc")
    seen = LISTENED
    assert ("127.0.0.1", metrics_port) in seen, sorted(seen)
    assert {ip for ip, p in seen if p == metrics_port} == {"127.0.0.1"}
    assert len(seen) >= 5, sorted(seen)  # GCS, raylet, agents and workers were seen, not just the exporter
    exposed = sorted((ip, p) for ip, p in seen if not is_loopback(ip))
    assert not exposed, f"listening beyond loopback: {exposed}"


def _bucket(value: float) -> int:
    """Index of the histogram bucket holding `value` (bucket i is (bound[i-1], bound[i]])."""
    return bisect.bisect_left(LATENCY_BUCKETS_MS, value)


def test_every_metric_has_data_with_its_labels(prometheus, run):
    summary, start, end = run
    window = f"{int(end - start) + 5}s"
    for m in METRICS.values():
        series = m.prom + ("_count" if m.kind == HISTOGRAM else "")
        result = prometheus.query(f'last_over_time({series}{{run="{RUN}"}}[{window}])', end)
        assert result, f"{series}: no data"
        for row in result:
            labels = row["metric"]
            assert labels["run"] == RUN and labels["grouping"] == "cg", labels
            assert all(labels.get(k) for k in m.labels), (series, labels)
        if "worker" in m.labels:
            assert {r["metric"]["worker"] for r in result} == {str(w) for w in range(WORKERS)}, series
        if "source" in m.labels:
            assert {r["metric"]["source"] for r in result} == {str(s) for s in range(SOURCES)}, series
    # the counters add up to what the run did (the last second before Ray shut down may not have been exported)
    processed = prometheus.query(f'sum(max_over_time(ray_topo_tuples_processed_total{{run="{RUN}"}}[{window}]))', end)
    emitted = prometheus.query(f'sum(max_over_time(ray_topo_tuples_emitted_total{{run="{RUN}"}}[{window}]))', end)
    assert 0.8 * summary["tuples_in"] <= float(processed[0]["value"][1]) <= summary["tuples_in"]
    assert 0.8 * summary["tuples_in"] <= float(emitted[0]["value"][1]) <= summary["tuples_in"]
    kinds = prometheus.query(f'sum by (kind) (max_over_time(ray_topo_signals_total{{run="{RUN}"}}[{window}]))', end)
    assert {r["metric"]["kind"] for r in kinds} == {"increase", "decrease"}
    imbalance = prometheus.query(f'max_over_time(ray_topo_imbalance{{run="{RUN}"}}[{window}])', end)
    assert float(imbalance[0]["value"][1]) > 0  # two workers at 0.3 of the others' capacity


def test_latency_percentiles_agree_with_the_summary(prometheus, run):
    summary, start, end = run
    window = f"{int(end - start) + 5}s"
    # the buckets' last values, not increase(): a bucket series appears with its first observations already in it,
    # and increase() drops them (the first second, where cg is still learning its slow workers, holds the tail)
    for q, key in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
        expr = (f'histogram_quantile({q}, sum by (le) '
                f'(max_over_time(ray_topo_latency_ms_bucket{{run="{RUN}"}}[{window}])))')
        result = prometheus.query(expr, end)
        assert result, expr
        estimate, true = float(result[0]["value"][1]), summary["latency_ms"][key]
        assert abs(_bucket(estimate) - _bucket(true)) <= 1, (key, estimate, true)


def test_dashboard_queries_have_data(prometheus, run):
    from topo.results import grafana

    _, start, end = run
    empty = [q for q in grafana.all_queries(RUN) if not prometheus.query_range(q, start, end)]
    assert not empty, f"dashboard queries without data: {empty}"
