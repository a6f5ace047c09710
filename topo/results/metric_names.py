"""The Prometheus metrics a running topology exports (through `ray.util.metrics`) and the dashboards query.

One table, so the exporter and the dashboard generator cannot drift apart. Ray prefixes every application metric
with `ray_`; a Counter is exported with the suffix `_total`; a Histogram as `_bucket`, `_sum` and `_count`.
Every series carries `run`, `grouping` and `time_scale` (the run's K), plus `worker` or `source` where it applies.
Under time dilation the latency histogram holds emulated milliseconds, and the dashboards multiply every rate (per
wall second) by `topo_time_scale` to show it per emulated second.
"""

from __future__ import annotations

from dataclasses import dataclass

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"
RUN_LABELS = ("run", "grouping", "time_scale")
# latency histogram bounds, milliseconds: 0.1 ms to 10 s, about four buckets per decade
LATENCY_BUCKETS_MS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


@dataclass(frozen=True)
class MetricName:
    """One exported metric: its name in `ray.util.metrics`, kind, labels beyond run/grouping, and help text."""

    name: str
    kind: str
    labels: tuple[str, ...]
    help: str

    @property
    def tag_keys(self) -> tuple[str, ...]:
        """All the tag keys to declare in `ray.util.metrics`."""
        return RUN_LABELS + self.labels

    @property
    def prom(self) -> str:
        """The series name Prometheus sees (histograms: the base of _bucket/_sum/_count)."""
        return f"ray_{self.name}" + ("_total" if self.kind == COUNTER else "")


METRICS = {
    m.name: m
    for m in (
        MetricName("topo_tuples_emitted", COUNTER, ("source",), "tuples a source emitted"),
        MetricName("topo_tuples_processed", COUNTER, ("worker",), "tuples a worker served"),
        MetricName("topo_latency_ms", HISTOGRAM, ("worker",), "end-to-end latency of tuples, milliseconds"),
        MetricName("topo_queue_length", GAUGE, ("worker",), "tuples waiting in a worker's input queue"),
        MetricName("topo_utilization", GAUGE, ("worker",), "busy fraction of a worker over its last window"),
        MetricName("topo_inflight_batches", GAUGE, ("source", "worker"), "batches a source has in flight to a worker"),
        MetricName("topo_signals", COUNTER, ("worker", "kind"), "increase/decrease signals a worker sent"),
        MetricName("topo_virtual_workers", GAUGE, ("source", "worker"), "cg: virtual workers a source maps to worker"),
        MetricName("topo_migrations", COUNTER, (), "repartitions that moved state"),
        MetricName("topo_migrated_keys", COUNTER, (), "keys whose state moved"),
        MetricName("topo_imbalance", GAUGE, (), "current load imbalance over active workers (max/mean - 1)"),
        MetricName("topo_time_scale", GAUGE, (), "time dilation K: the run's clock is K times slower"),
    )
}
