"""Prometheus metrics of a running topology, through `ray.util.metrics` (the names are `topo.results.metric_names`).

Off unless the run has a metrics port: then the driver starts Ray with `_metrics_export_port` and hands every
actor a `MetricsContext` (the run id and grouping, the labels every series carries); each actor builds its own
recorder from it. With no context nothing here is created or called.

Hooks record per batch, never per tuple: counters add a batch's tuple count, gauges are set once per batch (or
per poll), and the latency histogram observes a systematic 1-in-`LATENCY_SAMPLE_EVERY` sample of the served
tuples (a stride carried across batches, so batches of every size are sampled at the same rate and the sample's
distribution is an unbiased estimate of all tuples'; the percentiles of summary.json fall in the same bucket or
a neighbour). Counters are exported at zero from the actor's start, so `rate()`/`increase()` see every increment
(a series that appears at its first increment loses that increment to them) and a run without migrations still
has a migrations series at zero.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

import numpy as np

from topo.results.metric_names import COUNTER, GAUGE, LATENCY_BUCKETS_MS, METRICS

LATENCY_SAMPLE_EVERY = 10  # the latency histogram observes every 10th tuple served (per worker)
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


class WorkerMetrics:
    """A worker's series: tuples served, sampled latencies, queue length, utilization, signals."""

    def __init__(self, ctx: MetricsContext, worker: int) -> None:
        self.processed = _counter("topo_tuples_processed", ctx, worker=worker)
        self.latency = _metric("topo_latency_ms", ctx, worker=worker)
        self.queue = _metric("topo_queue_length", ctx, worker=worker)
        self.utilization = _metric("topo_utilization", ctx, worker=worker)
        self.signals = {kind: _counter("topo_signals", ctx, worker=worker, kind=kind)
                        for kind in ("increase", "decrease")}
        self._skip = 0  # tuples to skip before the next latency sample
        self._ms = 1e3 / ctx.time_scale  # wall seconds -> emulated milliseconds

    def served(self, arrival: np.ndarray, finish: np.ndarray) -> None:
        """A batch was served: count it and observe the latencies of its sampled tuples."""
        n = len(finish)
        if not n:
            return
        self.processed.inc(n)
        pick = slice(self._skip, n, LATENCY_SAMPLE_EVERY)
        self._skip = (self._skip - n) % LATENCY_SAMPLE_EVERY
        for value in ((np.asarray(finish[pick]) - np.asarray(arrival[pick])) * self._ms).tolist():
            self.latency.observe(value)

    def load(self, queue_len: float, utilization: float, verdict: int) -> None:
        """What an ack carries: queue length, utilization and the delegation signal, if any."""
        self.queue.set(float(queue_len))
        self.utilization.set(float(utilization))
        if verdict:
            self.signals["increase" if verdict > 0 else "decrease"].inc()


class SourceMetrics:
    """A source's series: tuples emitted, batches in flight and (cg) virtual workers, per worker."""

    def __init__(self, ctx: MetricsContext, source: int, workers: int) -> None:
        self.emitted = _counter("topo_tuples_emitted", ctx, source=source)
        self.inflight = [_metric("topo_inflight_batches", ctx, source=source, worker=w) for w in range(workers)]
        self._ctx, self._source = ctx, source
        self.virtual: list | None = None  # created on the first stats that have virtual workers
        self._virtual_due = 0.0

    def batch(self, emitted: int, inflight: list[int]) -> None:
        """Buffers were sent: `emitted` more tuples, and the buffers in flight to each worker now."""
        if emitted:
            self.emitted.inc(emitted)
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
