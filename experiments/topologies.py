"""Topologies and measures the papers' adaptation experiments share: the Wikipedia-like stream, Consistent
Grouping's fast and slow workers, rates at a load, p99 over time and the summary row of a run."""

from __future__ import annotations

import numpy as np

from experiments.common import series
from topo.results.metrics import RunResult
from topo.spec import TopologySpec

COST_MS = 0.1  # a capacity-1.0 worker serves 10,000 tuples/s
WP_LIKE = "zipf:z=1.0224,keys=100000,messages={m},seed=7"  # p1 = 9.32%, the Wikipedia trace's
FAST_SLOW = (5.0, 5.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)  # y = 3 workers z = 5 times faster
UNBOUNDED = 10**6  # max pending batches: the papers' queues are unbounded, so no backpressure here


def cg_params(grouping: str, quick: bool) -> dict:
    """CG's time slot scaled with the run: a quick run is a fifth as long, so its slot is half the default."""
    return {"t0": 0.01} if grouping == "cg" and quick else {}


def rate_at(load: float, capacities: tuple[float, ...]) -> float:
    """Input rate (tuples/s) that keeps the whole topology at `load` of its total capacity."""
    return load * sum(capacities) * 1e3 / COST_MS


def fast_slow_topology(messages: int) -> TopologySpec:
    """The Consistent Grouping paper's heterogeneous setting: 10 workers, 3 of them 5x faster, 80% load."""
    return TopologySpec(
        engine="sim", workers=10, sources=2, capacities=FAST_SLOW, stream=WP_LIKE.format(m=messages),
        cost_ms=COST_MS, rate=rate_at(0.8, FAST_SLOW), max_pending=UNBOUNDED, batch_size=50, linger_ms=1.0, seed=1,
    )


def latency_over_time(result: RunResult, windows: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """p99 latency (ms) of the tuples arriving in each of `windows` equal time windows."""
    log = result.log
    edges = np.linspace(log.arrival_s.min(), log.arrival_s.max(), windows + 1)
    which = np.clip(np.searchsorted(edges, log.arrival_s, side="right") - 1, 0, windows - 1)
    lat = log.latency_ms
    p99 = np.array([np.percentile(lat[which == i], 99) if np.any(which == i) else np.nan for i in range(windows)])
    return (edges[:-1] + edges[1:]) / 2, p99


def summary_row(name: str, result: RunResult) -> dict:
    """The row the adaptation experiments report for one run: latency, throughput, balance, memory, queues."""
    s = result.summary
    _, queues = series(result, "queue_len")
    tail = queues[:, -max(1, queues.shape[1] // 5) :]
    return {
        "grouping": name,
        "p50_ms": s["latency_ms"]["p50"],
        "p99_ms": s["latency_ms"]["p99"],
        "throughput_tps": s["throughput_tps"],
        "imbalance": s["imbalance"],
        "replication": s["replication"],
        "max_queue_end": float(tail.max()),
        "exact": s["exact"],
    }


def latency_between(result: RunResult, start_s: float, end_s: float = np.inf) -> np.ndarray:
    """Latencies (ms) of the tuples that reached their source in [start_s, end_s): a steady state's, its warm-up
    (and, for a finite input in a closed loop, its drain) left out."""
    log = result.log
    return log.latency_ms[(log.arrival_s >= start_s) & (log.arrival_s < end_s)]


def after_share(result: RunResult, share: float) -> float:
    """The time by which `share` of the input's span had reached the sources."""
    arrival = result.log.arrival_s
    return float(arrival.min() + share * (arrival.max() - arrival.min()))
