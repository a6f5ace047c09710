"""The summary extras every engine reports the same way: the run's settings, the repartitions of a shared
controller, workers that joined or left, the delegation signals, and each source's grouping statistics.

Each engine gathers the facts its own way (the simulator from its objects, Ray from its actors' reports) and
hands them here, so a key means the same thing in both summaries.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from groupings.control import MigrationLog
from topo.results.metrics import TupleLog, active_seconds, effective_capacities


def scaling_extras(log: TupleLog, active_history: Sequence[tuple[float, int]],
                   capacity_history: Sequence[tuple[float, Sequence[float]]], workers: int) -> dict:
    """Summary facts of a run whose workers joined or left: load per second each was actually in the topology."""
    out: dict = {"active_workers": [{"at_s": t, "workers": n} for t, n in active_history]}
    if len(active_history) > 1:
        start, end, tuples = np.inf, -np.inf, np.zeros(workers, np.int64)
        for _, (arrival, finish, worker) in log.chunks("arrival_s", "finish_s", "worker"):  # a chunk at a time
            start, end = min(start, float(arrival.min())), max(end, float(finish.max()))
            tuples += np.bincount(worker, minlength=workers)
        start, end = (start, end) if len(log) else (0.0, 0.0)
        active_s = active_seconds(active_history, workers, start, end)
        caps = effective_capacities(capacity_history, start, end)
        rate = tuples / np.maximum(active_s, 1e-12) / caps
        used = active_s > 0
        out["imbalance_active_time"] = float(rate[used].max() / rate[used].mean() - 1) if used.any() else 0.0
        out["active_seconds"] = active_s.tolist()
    return out


def run_config(spec: object, initial_capacities: Sequence[float]) -> dict:
    """The settings a run was made with, as every engine reports them in its summary."""
    return {
        "cost_ms": spec.cost_ms,
        "rate": spec.rate,
        "duration": spec.duration,
        "batch_size": spec.batch_size,
        "linger_ms": spec.linger_ms,
        "max_pending": spec.max_pending,
        "max_spout_pending": getattr(spec, "max_spout_pending", None),
        "net_delay_ms": spec.net_delay_ms,
        "transit_ms": spec.transit_ms,
        "operator": spec.operator,
        "initial_capacities": list(initial_capacities),
        "capacity_schedule": [c.describe() for c in spec.capacity_schedule],
        "scale_schedule": [c.describe() for c in spec.scale_schedule],
    }


def run_extras(spec: object, stream: object, log: TupleLog, workers: int,
               capacity_history: Sequence[tuple[float, Sequence[float]]], active_history: Sequence[tuple[float, int]],
               grouping_stats: list[dict], *, migrations: MigrationLog | None = None,
               controller: dict | None = None, signals: dict | None = None, delegation: dict | None = None,
               aggregation: dict | None = None) -> dict:
    """The extras of a run's summary: the same keys, with the same meaning, on every engine."""
    moved = migrations or MigrationLog()
    extra = {
        "seed": spec.seed,
        "params": dict(spec.params),
        "stream": dict(getattr(stream, "meta", None) or {}),
        "config": run_config(spec, capacity_history[0][1]),
        "migrations": moved.migrations,
        "migrated_keys": moved.migrated_keys,
        "migration_pause_s": moved.pause_s,
        "capacity_changes": [{"at_s": t, "capacities": list(c)} for t, c in capacity_history[1:]],
        **scaling_extras(log, active_history, capacity_history, workers),
        "grouping_stats": grouping_stats,
    }
    if controller is not None:
        extra["controller"] = controller
        extra["repartitions"] = moved.events
    if delegation is not None:
        extra["signals"] = {k: int(signals[k]) for k in ("increase", "decrease")}
        extra["delegation"] = delegation
    if aggregation is not None:
        extra["aggregation"] = aggregation
    return extra


def batch_table(source: np.ndarray, worker: np.ndarray, batch_id: np.ndarray, size: np.ndarray, sent_s: np.ndarray,
                ack_s: np.ndarray, **engine_columns: pa.Array) -> pa.Table:
    """One row per buffer sent, the same first columns on every engine (times in seconds), then the engine's own."""
    return pa.table({
        "source": pa.array(np.asarray(source).astype(np.int32)),
        "worker": pa.array(np.asarray(worker).astype(np.int32)),
        "batch_id": pa.array(np.asarray(batch_id).astype(np.int64)),
        "size": pa.array(np.asarray(size).astype(np.int32)),
        "sent_s": pa.array(np.asarray(sent_s, np.float64)),
        "ack_s": pa.array(np.asarray(ack_s, np.float64)),
        **engine_columns,
    })
