"""Run outputs computed after the fact from what happened to each tuple: the run summary and the time series.

Engine-agnostic: any engine that logs, per tuple, its source, worker, arrival at the source, entry into the
worker's queue, start and finish of service, gets the same summary (the contract in docs/design.md), per-worker
time series and latency table. A worker is one FIFO server, so its starts and finishes are both ordered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from topo.results.passes import WorkerLoads, sampled, worker_loads
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

    def chunks(self, *names: str, rows: int | None = None) -> Iterator[tuple[int, tuple[np.ndarray, ...]]]:
        """(first row, the named columns' rows from it) for `rows` rows at a time (default `passes.CHUNK`). A
        column kept in a file (the simulator's spilled log) gives each chunk's pages back to it once the caller
        asks for the next, so a pass over the log holds one chunk of it; the caller copies what it keeps."""
        from topo.results import passes, spill

        rows = rows or passes.CHUNK
        columns = [getattr(self, name) for name in names]
        for a in range(0, len(self), rows):
            b = min(a + rows, len(self))
            yield a, tuple(c[a:b] for c in columns)
            for c in columns:
                spill.release(c, a, b)

    def every(self, step: int) -> TupleLog:
        """Every step-th row (rows 0, step, 2 step, ...), read a chunk at a time."""
        names = [f.name for f in fields(self)]
        parts = [tuple(c[(-a) % step :: step].copy() for c in columns) for a, columns in self.chunks(*names)]
        return TupleLog(*(np.concatenate([p[i] for p in parts]) if parts else getattr(self, name)[:0]
                          for i, name in enumerate(names)))

    @property
    def latency_ms(self) -> np.ndarray:
        """End-to-end latency of each tuple: finish minus arrival at the source, in milliseconds."""
        out = np.empty(len(self))
        for a, (finish, arrival) in self.chunks("finish_s", "arrival_s"):
            np.multiply(finish - arrival, 1e3, out=out[a : a + len(finish)])
        return out


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


def imbalance(tuples: Sequence[float], capacities: Sequence[float]) -> float:
    """max_w(L_w / c_w) / mean_w(L_w / c_w) - 1: zero when every worker got work in proportion to capacity."""
    relative = np.asarray(tuples, dtype=float) / np.asarray(capacities, dtype=float)
    mean = relative.mean()
    return float(relative.max() / mean - 1.0) if mean > 0 else 0.0


def replication(distinct_per_worker: Sequence[int], distinct_total: int) -> float:
    """Sum over workers of distinct keys seen, over distinct keys in the stream (key grouping gives 1)."""
    return float(np.sum(distinct_per_worker) / distinct_total) if distinct_total else 0.0


def latency_stats(latency_ms: np.ndarray, overwrite: bool = False) -> dict[str, float]:
    """Mean, median, tail percentiles and maximum of the latencies (milliseconds); with `overwrite` the
    percentiles reorder the array in place instead of a copy of it (the caller's own array, 8 bytes a tuple)."""
    if len(latency_ms) == 0:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    mean, most = float(latency_ms.mean()), float(latency_ms.max())  # before any reordering
    p50, p95, p99 = np.percentile(latency_ms, [50, 95, 99], overwrite_input=overwrite)
    return {"mean": mean, "p50": float(p50), "p95": float(p95), "p99": float(p99), "max": most}


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
    loads: WorkerLoads | None = None,
) -> dict:
    """The run summary of docs/design.md (its keys first, unchanged), followed by the extras; `loads` are the
    log's `worker_loads` when the caller has them already."""
    n = len(capacities)
    loads = loads if loads is not None else worker_loads(log, n)
    if len(distinct_keys) != n:
        raise ValueError(f"distinct_keys has {len(distinct_keys)} entries for {n} workers")
    makespan = loads.last_s - loads.first_s
    tuples = loads.tuples.tolist()
    busy = [b / makespan if makespan > 0 else 0.0 for b in loads.busy_s.tolist()]
    per_worker = [
        {
            "id": w,
            "capacity": float(capacities[w]),
            "tuples": tuples[w],
            "distinct_keys": int(distinct_keys[w]),
            "busy_fraction": busy[w],
            "queue_max": int(loads.queue_max[w]),
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
        "latency_ms": latency_stats(log.latency_ms, overwrite=True),
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


def timeseries(
    log: TupleLog,
    workers: int,
    interval_s: float | None = None,
    *,
    loads: WorkerLoads | None = None,
) -> pa.Table:
    """Per-worker queue length, utilization over the last interval and tuples processed, sampled in time;
    `loads` are the log's `worker_loads` when the caller has them already."""
    loads = loads if loads is not None else worker_loads(log, workers)
    if len(log) == 0:
        return _timeseries_table(np.empty(0), np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0), [])
    first, last = loads.first_s, loads.last_s
    span = last - first
    if interval_s is None:
        interval_s = span / DEFAULT_SAMPLES if span > 0 else 1.0
    if not interval_s > 0:
        raise ValueError(f"the sample interval must be positive (got {interval_s})")
    steps = max(1, math.ceil(span / interval_s - 1e-9))
    # each sample closes an interval, so the last one covers the last finish
    t = first + interval_s * np.arange(1, steps + 1)
    # the busy time at `first` opens the first interval
    enqueued, done, busy = sampled(log, loads, np.concatenate(([first], t)))
    queue, util = enqueued[:, 1:] - done[:, 1:], np.diff(busy, axis=1) / float(interval_s)
    return _timeseries_table(t, np.arange(workers, dtype=np.int32), queue, util, done[:, 1:])


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


LATENCY_COLUMNS = ("seq", "source", "worker", "arrival_s", "finish_s")


def latency_table(log: TupleLog) -> pa.Table:
    """One row per processed tuple: seq, source, worker, arrival_s, finish_s, latency_ms."""
    return _latency_rows(*(getattr(log, name) for name in LATENCY_COLUMNS))


def _latency_rows(seq, source, worker, arrival, finish) -> pa.Table:
    return pa.table(
        {
            "seq": pa.array(seq, pa.int64()),
            "source": pa.array(source, pa.int32()),
            "worker": pa.array(worker, pa.int32()),
            "arrival_s": pa.array(arrival, pa.float64()),
            "finish_s": pa.array(finish, pa.float64()),
            "latency_ms": pa.array((finish - arrival) * 1e3, pa.float64()),
        }
    )


def write_outputs(result: RunResult, directory: str | Path) -> None:
    """Write summary.json, timeseries.parquet and latency.parquet into an existing directory; the latency table a
    chunk of the log at a time (a row group or two each)."""
    out = Path(directory)
    (out / SUMMARY_FILE).write_text(json.dumps(result.summary, indent=2) + "\n")
    pq.write_table(result.timeseries, out / TIMESERIES_FILE)
    empty = np.empty(0)
    schema = _latency_rows(empty.astype(np.int64), *(empty.astype(np.int32),) * 2, empty, empty).schema
    with pq.ParquetWriter(out / LATENCY_FILE, schema) as writer:
        for _, columns in result.log.chunks(*LATENCY_COLUMNS):
            writer.write_table(_latency_rows(*columns))


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
