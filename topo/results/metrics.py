"""Run outputs computed after the fact from what happened to each tuple: the run summary and the time series.

Engine-agnostic: any engine that logs, per tuple, its source, worker, arrival at the source, entry into the
worker's queue, start and finish of service, gets the same summary (the contract in docs/design.md), per-worker
time series and latency table. A worker is one FIFO server, so its starts and finishes are both ordered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from topo.results.rundir import LATENCY_FILE, SUMMARY_FILE, TIMESERIES_FILE

DEFAULT_SAMPLES = 200


@dataclass(frozen=True)
class TupleLog:
    """What happened to every processed tuple: equal-length arrays, times in seconds."""

    seq: np.ndarray  # int64, position in the input stream
    source: np.ndarray  # int32, the source that emitted it
    worker: np.ndarray  # int32, the worker that processed it
    arrival_s: np.ndarray  # when it reached its source (latency starts here)
    enqueue_s: np.ndarray  # when it entered the worker's input queue
    start_s: np.ndarray  # when the worker started processing it
    finish_s: np.ndarray  # when the worker was done with it

    def __post_init__(self) -> None:
        n = len(self.seq)
        for name in ("source", "worker", "arrival_s", "enqueue_s", "start_s", "finish_s"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"TupleLog.{name} has {len(getattr(self, name))} entries, seq has {n}")

    def __len__(self) -> int:
        return len(self.seq)

    @property
    def latency_ms(self) -> np.ndarray:
        """End-to-end latency of each tuple: finish minus arrival at the source, in milliseconds."""
        return (self.finish_s - self.arrival_s) * 1e3


@dataclass
class RunResult:
    """Everything a run produced: the summary dict, the per-worker time series and the per-tuple log."""

    summary: dict
    timeseries: pa.Table
    log: TupleLog
    extras: dict = field(default_factory=dict)  # "batches": `extras.batch_table` on both engines

    @property
    def latency(self) -> pa.Table:
        """The per-tuple latency table written as latency.parquet."""
        return latency_table(self.log)


@dataclass(frozen=True)
class WorkerTimeline:
    """One worker's history as sorted event times, answering "how many / how busy at time t" by bisection."""

    enqueue: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    busy_before: np.ndarray  # busy_before[k] = total service time of the first k tuples

    @classmethod
    def of(cls, enqueue: np.ndarray, start: np.ndarray, finish: np.ndarray) -> WorkerTimeline:
        """Timeline from one worker's tuples in any order (`fifo.timelines_of` for one worker)."""
        from topo.results.fifo import timelines_of

        columns = (np.ascontiguousarray(a, np.float64) for a in (enqueue, start, finish))
        enqueue, start, finish, busy, _ = timelines_of(np.zeros(len(finish), np.int64), 1, *columns)
        return cls(enqueue, start, finish, busy)

    @property
    def tuples(self) -> int:
        """Number of tuples the worker processed."""
        return len(self.finish)

    @property
    def busy_s(self) -> float:
        """Total time the worker spent serving tuples."""
        return float(self.busy_before[-1])

    def processed(self, t: np.ndarray) -> np.ndarray:
        """Tuples finished by each time in t."""
        return np.searchsorted(self.finish, t, side="right")

    def queue_length(self, t: np.ndarray) -> np.ndarray:
        """Tuples waiting or in service at each time in t."""
        return np.searchsorted(self.enqueue, t, side="right") - self.processed(t)

    def busy_until(self, t: np.ndarray) -> np.ndarray:
        """Cumulative busy time up to each time in t."""
        from topo.results.fifo import busy_until

        return busy_until(self.start, self.finish, self.busy_before, np.ascontiguousarray(t, np.float64))

    def queue_max(self) -> int:
        """Largest number of tuples the worker held at once (reached right after an arrival)."""
        if self.tuples == 0:
            return 0
        from topo.results.fifo import queue_max

        return int(queue_max(self.enqueue, self.finish))


class Timelines(list):
    """One timeline per worker, views into `packed` = `fifo.timelines_of`'s arrays, which the time series samples
    in one compiled pass."""

    packed: tuple


def timelines(log: TupleLog, workers: int) -> Timelines:
    """Split the log into one timeline per worker id in [0, workers)."""
    if len(log) and (log.worker.min() < 0 or log.worker.max() >= workers):
        raise ValueError(f"worker ids must lie in [0, {workers})")
    from topo.results.fifo import timelines_of  # compiled: loaded by whoever makes a summary, not every actor

    packed = timelines_of(np.ascontiguousarray(log.worker, np.int64), workers,
                          *(np.ascontiguousarray(c, np.float64) for c in (log.enqueue_s, log.start_s, log.finish_s)))
    enqueue, start, finish, busy, bounds = packed
    lines = Timelines(WorkerTimeline(enqueue[a:b], start[a:b], finish[a:b], busy[a + w : b + w + 1])
                      for w, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)))
    lines.packed = packed
    return lines


def _packed(lines: Sequence[WorkerTimeline]) -> tuple:
    """`timelines_of`'s arrays for timelines made one by one."""
    bounds = np.zeros(len(lines) + 1, np.int64)
    np.cumsum([line.tuples for line in lines], out=bounds[1:])
    joined = [np.concatenate([np.empty(0), *(getattr(line, name) for line in lines)])
              for name in ("enqueue", "start", "finish", "busy_before")]
    return (*joined, bounds)


def imbalance(tuples: Sequence[float], capacities: Sequence[float]) -> float:
    """max_w(L_w / c_w) / mean_w(L_w / c_w) - 1: zero when every worker got work in proportion to capacity."""
    relative = np.asarray(tuples, dtype=float) / np.asarray(capacities, dtype=float)
    mean = relative.mean()
    return float(relative.max() / mean - 1.0) if mean > 0 else 0.0


def replication(distinct_per_worker: Sequence[int], distinct_total: int) -> float:
    """Sum over workers of distinct keys seen, over distinct keys in the stream (key grouping gives 1)."""
    return float(np.sum(distinct_per_worker) / distinct_total) if distinct_total else 0.0


def latency_stats(latency_ms: np.ndarray) -> dict[str, float]:
    """Mean, median, tail percentiles and maximum of the latencies (milliseconds)."""
    if len(latency_ms) == 0:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    p50, p95, p99 = np.percentile(latency_ms, [50, 95, 99])
    return {
        "mean": float(latency_ms.mean()),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "max": float(latency_ms.max()),
    }


def summarize(
    log: TupleLog,
    *,
    grouping: str,
    engine: str,
    capacities: Sequence[float],
    sources: int,
    tuples_in: int,
    distinct_keys: Sequence[int],
    keys_total: int,
    exact: bool,
    extra: Mapping[str, object] | None = None,
    worker_timelines: Sequence[WorkerTimeline] | None = None,
) -> dict:
    """The run summary of docs/design.md (its keys first, unchanged), followed by the extras."""
    n = len(capacities)
    lines = list(worker_timelines) if worker_timelines is not None else timelines(log, n)
    if len(distinct_keys) != n:
        raise ValueError(f"distinct_keys has {len(distinct_keys)} entries for {n} workers")
    first = float(log.arrival_s.min()) if len(log) else 0.0
    makespan = float(log.finish_s.max()) - first if len(log) else 0.0
    tuples = [line.tuples for line in lines]
    busy = [line.busy_s / makespan if makespan > 0 else 0.0 for line in lines]
    per_worker = [
        {
            "id": w,
            "capacity": float(capacities[w]),
            "tuples": tuples[w],
            "distinct_keys": int(distinct_keys[w]),
            "busy_fraction": busy[w],
            "queue_max": lines[w].queue_max(),
        }
        for w in range(n)
    ]
    summary: dict = {
        "grouping": grouping,
        "engine": engine,
        "workers": n,
        "sources": sources,
        "tuples_in": int(tuples_in),
        "tuples_processed": len(log),
        "duration_s": makespan,
        # undefined when everything finished at the instant it arrived (zero cost)
        "throughput_tps": len(log) / makespan if makespan > 0 else None,
        "latency_ms": latency_stats(log.latency_ms),
        "imbalance": imbalance(tuples, capacities),
        "replication": replication(distinct_keys, keys_total),
        "per_worker": per_worker,
        "exact": bool(exact),
        "utilization_spread": float(max(busy) - min(busy)) if busy else 0.0,
        "queue_max": max((p["queue_max"] for p in per_worker), default=0),
        "distinct_keys": int(keys_total),
    }
    for key, value in (extra or {}).items():
        summary.setdefault(key, jsonable(value))
    return summary


def effective_capacities(history: Sequence[tuple[float, Sequence[float]]], start: float, end: float) -> np.ndarray:
    """Each worker's capacity averaged over [start, end], from (from time, capacities) steps of the run."""
    if len(history) == 1 or not end > start:
        return np.asarray(history[-1][1] if end <= start else history[0][1], dtype=float)
    total = np.zeros(len(history[0][1]))
    for (t0, caps), (t1, _) in zip(history, [*history[1:], (end, None)], strict=True):
        lo, hi = max(t0, start), min(t1, end)
        if hi > lo:
            total += np.asarray(caps) * (hi - lo)
    return total / (end - start)


def active_seconds(history: Sequence[tuple[float, int]], workers: int, start: float, end: float) -> np.ndarray:
    """How long each of `workers` was part of the topology during [start, end], from (from time, active) steps."""
    out = np.zeros(workers)
    for (t0, n), (t1, _) in zip(history, [*history[1:], (end, None)], strict=True):
        lo, hi = max(t0, start), min(t1, end)
        if hi > lo:
            out[:n] += hi - lo
    return out


def aggregation_cost(log: TupleLog, key_hash: np.ndarray, period_s: float) -> dict:
    """Periodic aggregation: every period each worker flushes the partial state of the keys it updated since
    its last flush; the cost grows with how many workers share a key (replication)."""
    if not len(log):
        return {"period_s": period_s, "flushes": 0, "keys_flushed": 0, "keys_per_flush": 0.0}
    bucket = np.floor(log.finish_s / period_s).astype(np.int64)
    order = np.lexsort((key_hash, log.worker, bucket))
    b, w, k = bucket[order], log.worker[order], key_hash[order]
    new_flush = np.ones(len(b), bool)
    new_flush[1:] = (b[1:] != b[:-1]) | (w[1:] != w[:-1])
    new_key = new_flush.copy()
    new_key[1:] |= k[1:] != k[:-1]
    flushes, keys = int(new_flush.sum()), int(new_key.sum())
    return {"period_s": period_s, "flushes": flushes, "keys_flushed": keys, "keys_per_flush": keys / flushes}


def timeseries(
    log: TupleLog,
    workers: int,
    interval_s: float | None = None,
    *,
    worker_timelines: Sequence[WorkerTimeline] | None = None,
) -> pa.Table:
    """Per-worker queue length, utilization over the last interval and tuples processed, sampled in time."""
    lines = worker_timelines if worker_timelines is not None else timelines(log, workers)
    if len(log) == 0:
        return _timeseries_table(np.empty(0), np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0), [])
    first, last = float(log.arrival_s.min()), float(log.finish_s.max())
    span = last - first
    if interval_s is None:
        interval_s = span / DEFAULT_SAMPLES if span > 0 else 1.0
    if not interval_s > 0:
        raise ValueError(f"the sample interval must be positive (got {interval_s})")
    steps = max(1, math.ceil(span / interval_s - 1e-9))
    # each sample closes an interval, so the last one covers the last finish
    t = first + interval_s * np.arange(1, steps + 1)
    from topo.results.fifo import sample

    packed = getattr(lines, "packed", None) or _packed(lines)
    queue, util, done = sample(*packed, t, first, float(interval_s))
    return _timeseries_table(t, np.arange(workers, dtype=np.int32), queue, util, done)


def _timeseries_table(t, worker_ids, queue, util, done) -> pa.Table:
    # long format: one row per (sample, worker), sample-major so a row group holds whole instants
    k = len(worker_ids)
    return pa.table(
        {
            "t_s": pa.array(np.repeat(t, k), pa.float64()),
            "worker": pa.array(np.tile(worker_ids, len(t)), pa.int32()),
            "queue_len": pa.array(np.asarray(queue, np.int64).T.reshape(-1), pa.int64()),
            "utilization": pa.array(np.asarray(util, float).T.reshape(-1), pa.float64()),
            "processed": pa.array(np.asarray(done, np.int64).T.reshape(-1), pa.int64()),
        }
    )


def latency_table(log: TupleLog) -> pa.Table:
    """One row per processed tuple: seq, source, worker, arrival_s, finish_s, latency_ms."""
    return pa.table(
        {
            "seq": pa.array(log.seq, pa.int64()),
            "source": pa.array(log.source, pa.int32()),
            "worker": pa.array(log.worker, pa.int32()),
            "arrival_s": pa.array(log.arrival_s, pa.float64()),
            "finish_s": pa.array(log.finish_s, pa.float64()),
            "latency_ms": pa.array(log.latency_ms, pa.float64()),
        }
    )


def write_outputs(result: RunResult, directory: str | Path) -> None:
    """Write summary.json, timeseries.parquet and latency.parquet into an existing directory."""
    out = Path(directory)
    (out / SUMMARY_FILE).write_text(json.dumps(result.summary, indent=2) + "\n")
    pq.write_table(result.timeseries, out / TIMESERIES_FILE)
    pq.write_table(result.latency, out / LATENCY_FILE)


def jsonable(value: object) -> object:
    """The value with numpy scalars and arrays turned into plain Python, ready for json.dumps."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value
