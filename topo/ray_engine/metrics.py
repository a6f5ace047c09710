"""Prometheus metrics of a running topology, through `ray.util.metrics` (the names are `topo.results.metric_names`).

Off unless the run has a metrics port: then the driver starts Ray with `_metrics_export_port` and hands every
actor a `MetricsContext` (the run id and grouping, the labels every series carries); each actor builds its own
recorder from it. With no context nothing here is created or called.

Hooks never call Ray per tuple, nor per buffer: a buffer's latencies are counted into histogram buckets in one
compiled call (`LatencyBuckets`), and the counts, gauges and counters are published per flush (a worker's at each of
its process's flushes, a source's at most every `PUBLISH_EVERY_S`). Every tuple served is in the histogram, not a
sample. Ray's Histogram takes one value per call, so the histogram is exported as what Prometheus stores of one:
cumulative `_bucket` series labelled `le` (the last `+Inf`), `_sum` and `_count`, as gauges holding running totals,
under the names a Ray Histogram would have; `histogram_quantile` and `rate` read them as they read any histogram.
Counters are exported at zero from the actor's start, so `rate()`/`increase()` see every increment (a series that
appears at its first increment loses that increment to them) and a run without migrations still has a migrations
series at zero.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import numpy as np

from topo.results.metric_names import COUNTER, GAUGE, LATENCY_BUCKETS_MS, METRICS

PUBLISH_EVERY_S = 0.5  # a source publishes its series at most this often (a worker's go out at its flushes)
VIRTUAL_EVERY_S = 0.5  # how often a source exports its grouping's virtual workers
IMBALANCE_WINDOW_S = 1.0  # the imbalance gauge compares the workers' tuples served over about this long
REPORT_INTERVAL_MS = 1000  # how often Ray's agents export application metrics (Ray's default: 10 s)


@dataclass(frozen=True)
class MetricsContext:
    """What every actor of a run needs to record metrics: the labels shared by all series."""

    run: str
    grouping: str
    time_scale: float = 1.0  # the run's K: latencies are observed in emulated time


def port_free(port: int) -> bool:
    """True if nothing listens on 127.0.0.1:`port` (checked before Ray is started on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ray_init_options(port: int) -> dict:
    """Extra `ray.init` arguments that export the metrics on `port`, every `REPORT_INTERVAL_MS`."""
    return {"_metrics_export_port": int(port), "_system_config": {"metrics_report_interval_ms": REPORT_INTERVAL_MS}}


def local_options(metrics_port: int | None) -> dict:
    """`ray.init` options of a local Ray that exports Prometheus metrics on 127.0.0.1:`metrics_port` if given."""
    return ray_init_options(metrics_port) if metrics_port is not None else {}


def _metric(name: str, ctx: MetricsContext, **tags: str):
    """The `ray.util.metrics` object of METRICS[name], with the run's labels (and `tags`) as default tags."""
    from ray.util import metrics as rm

    m = METRICS[name]
    if m.kind == COUNTER:
        obj = rm.Counter(m.name, description=m.help, tag_keys=m.tag_keys)
    elif m.kind == GAUGE:
        obj = rm.Gauge(m.name, description=m.help, tag_keys=m.tag_keys)
    else:
        obj = rm.Histogram(m.name, description=m.help, boundaries=list(LATENCY_BUCKETS_MS), tag_keys=m.tag_keys)
    obj.set_default_tags({"run": ctx.run, "grouping": ctx.grouping, "time_scale": f"{ctx.time_scale:g}",
                          **{k: str(v) for k, v in tags.items()}})
    return obj


def _counter(name: str, ctx: MetricsContext, **tags: str):
    """A counter exported at zero from now on (`Counter.inc` refuses 0, so the zero goes in as a raw record)."""
    obj = _metric(name, ctx, **tags)
    obj._record(0.0)
    return obj


class LatencyBuckets:
    """A histogram of latencies in `LATENCY_BUCKETS_MS`: counts per bucket (bucket i holds (bound[i-1], bound[i]],
    the last everything above the last bound), their sum, added a buffer at a time."""

    def __init__(self) -> None:
        self.bounds = np.asarray(LATENCY_BUCKETS_MS, np.float64)
        self.counts = np.zeros(len(self.bounds) + 1, np.int64)
        self.total_ms = 0.0
        from topo.ray_engine.buckets import bucket_latencies  # numba: only in a run that exports metrics

        self._bucket = bucket_latencies

    def add(self, arrival: np.ndarray, finish: np.ndarray, ms: float) -> None:
        """Count one buffer's latencies: (`finish` - `arrival`) x `ms` milliseconds."""
        self.total_ms += self._bucket(arrival, finish, ms, self.bounds, self.counts)

    def cumulative(self) -> np.ndarray:
        """Tuples at or below each bound, then all of them: Prometheus' `le` buckets."""
        return np.cumsum(self.counts)


class HistogramSeries:
    """One worker's latency histogram as Prometheus stores a histogram: `_bucket` per `le`, `_sum`, `_count`."""

    def __init__(self, name: str, ctx: MetricsContext, **tags: str) -> None:
        from ray.util import metrics as rm

        m = METRICS[name]
        labels = {"run": ctx.run, "grouping": ctx.grouping, "time_scale": f"{ctx.time_scale:g}",
                  **{k: str(v) for k, v in tags.items()}}
        self.buckets = []
        for le in [f"{b:g}" for b in LATENCY_BUCKETS_MS] + ["+Inf"]:
            gauge = rm.Gauge(f"{name}_bucket", description=m.help, tag_keys=(*m.tag_keys, "le"))
            gauge.set_default_tags({**labels, "le": le})
            self.buckets.append(gauge)
        self.sum = rm.Gauge(f"{name}_sum", description=m.help, tag_keys=m.tag_keys)
        self.count = rm.Gauge(f"{name}_count", description=m.help, tag_keys=m.tag_keys)
        self.sum.set_default_tags(labels)
        self.count.set_default_tags(labels)

    def publish(self, hist: LatencyBuckets) -> None:
        """Set every series to the histogram's running totals."""
        cumulative = hist.cumulative().tolist()
        for gauge, value in zip(self.buckets, cumulative, strict=True):
            gauge.set(value)
        self.sum.set(hist.total_ms)
        self.count.set(cumulative[-1])


class WorkerMetrics:
    """A worker's series: tuples served, latencies, queue length, utilization, signals. `served` and `load` only
    add up (a buffer at a time); `publish` hands the totals to Ray."""

    def __init__(self, ctx: MetricsContext, worker: int) -> None:
        self.processed = _counter("topo_tuples_processed", ctx, worker=worker)
        self.latency = HistogramSeries("topo_latency_ms", ctx, worker=worker)
        self.queue = _metric("topo_queue_length", ctx, worker=worker)
        self.utilization = _metric("topo_utilization", ctx, worker=worker)
        self.signals = {kind: _counter("topo_signals", ctx, worker=worker, kind=kind)
                        for kind in ("increase", "decrease")}
        self._ms = 1e3 / ctx.time_scale  # wall seconds -> emulated milliseconds
        self.hist = LatencyBuckets()
        self._lock = threading.Lock()  # buffers are added on the serving thread, published on the flusher's
        self._served = 0  # tuples served since the last publish
        self._signals = {"increase": 0, "decrease": 0}
        self._load: tuple[float, float] | None = None  # the last ack's queue length and utilization

    def served(self, arrival: np.ndarray, finish: np.ndarray) -> None:
        """A batch was served: count it and its latencies."""
        if not len(finish):
            return
        with self._lock:
            self._served += len(finish)
            self.hist.add(np.asarray(arrival, np.float64), np.asarray(finish, np.float64), self._ms)

    def load(self, queue_len: float, utilization: float, verdict: int) -> None:
        """What an ack carries: queue length, utilization and the delegation signal, if any."""
        with self._lock:
            self._load = (float(queue_len), float(utilization))
            if verdict:
                self._signals["increase" if verdict > 0 else "decrease"] += 1

    def publish(self) -> None:
        """Hand what was served and acked since the last publish to Ray (a few calls, whatever the tuples)."""
        with self._lock:
            served, self._served = self._served, 0
            signals, self._signals = self._signals, {"increase": 0, "decrease": 0}
            load, self._load = self._load, None
            hist = LatencyBuckets()
            hist.counts[:], hist.total_ms = self.hist.counts, self.hist.total_ms
        if served:
            self.processed.inc(served)
            self.latency.publish(hist)
        for kind, count in signals.items():
            if count:
                self.signals[kind].inc(count)
        if load is not None:
            self.queue.set(load[0])
            self.utilization.set(load[1])


class SourceMetrics:
    """A source's series: tuples emitted, batches in flight and (cg) virtual workers, per worker; published at most
    every `PUBLISH_EVERY_S` and at the end."""

    def __init__(self, ctx: MetricsContext, source: int, workers: int) -> None:
        self.emitted = _counter("topo_tuples_emitted", ctx, source=source)
        self.inflight = [_metric("topo_inflight_batches", ctx, source=source, worker=w) for w in range(workers)]
        self._ctx, self._source = ctx, source
        self.virtual: list | None = None  # created on the first stats that have virtual workers
        self._virtual_due = 0.0
        self._publish_due = 0.0
        self._emitted = 0  # tuples emitted since the last publish

    def batch(self, emitted: int, inflight: list[int], final: bool = False) -> None:
        """Buffers were sent: `emitted` more tuples, and the buffers in flight to each worker now; published if
        due (or `final`)."""
        self._emitted += emitted
        now = time.monotonic()
        if not final and now < self._publish_due:
            return
        self._publish_due = now + PUBLISH_EVERY_S
        if self._emitted:
            self.emitted.inc(self._emitted)
            self._emitted = 0
        for gauge, count in zip(self.inflight, inflight, strict=True):
            gauge.set(count)

    def virtual_due(self) -> bool:
        """True at most every `VIRTUAL_EVERY_S` (the caller then reads its grouping's stats)."""
        now = time.monotonic()
        if now < self._virtual_due:
            return False
        self._virtual_due = now + VIRTUAL_EVERY_S
        return True

    def virtual_workers(self, stats: dict) -> None:
        """Export the grouping's virtual workers per worker, if it has any (cg)."""
        counts = stats.get("virtual_workers") if isinstance(stats, dict) else None
        if counts is None:
            return
        if self.virtual is None:
            self.virtual = [_metric("topo_virtual_workers", self._ctx, source=self._source, worker=w)
                            for w in range(len(counts))]
        for gauge, count in zip(self.virtual, counts, strict=False):
            gauge.set(float(count))


class ControlMetrics:
    """The controller's repartitions (the driver exports them at zero for every run)."""

    def __init__(self, ctx: MetricsContext) -> None:
        self.migrations = _counter("topo_migrations", ctx)
        self.keys = _counter("topo_migrated_keys", ctx)

    def migrated(self, keys: int) -> None:
        """One repartition moved the state of `keys` keys."""
        if keys:
            self.migrations.inc()
            self.keys.inc(keys)


class DriverMetrics:
    """The driver's series: the imbalance gauge, from the workers' tuples served over the last window; it also
    exports the migration counters at zero, so every run has them (strategies without a controller never move)."""

    def __init__(self, ctx: MetricsContext) -> None:
        self.imbalance = _metric("topo_imbalance", ctx)
        _metric("topo_time_scale", ctx).set(ctx.time_scale)
        self.control = ControlMetrics(ctx)
        self._history: list[tuple[float, np.ndarray]] = []

    def served(self, now: float, served: np.ndarray, active: int) -> float | None:
        """The workers' running totals of tuples served at `now`; sets and returns the imbalance over the active
        ones (max/mean - 1 of what each served over the last `IMBALANCE_WINDOW_S`), None while nothing moved."""
        served = np.asarray(served, np.float64)
        if self._history and np.any(served < self._history[-1][1]):
            self._history = []  # a worker restarted and counts from zero again
        self._history.append((now, served))
        while len(self._history) > 2 and self._history[1][0] <= now - IMBALANCE_WINDOW_S:
            self._history.pop(0)
        delta = (served - self._history[0][1])[:active]
        mean = float(delta.mean()) if delta.size else 0.0
        if mean <= 0:
            return None
        value = float(delta.max()) / mean - 1.0
        self.imbalance.set(value)
        return value
