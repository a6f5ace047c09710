"""The per-worker facts a summary and its time series take from the per-tuple log, in passes over the log a chunk
at a time (`topo.results.fifo`): memory that grows with the workers and the samples, not with the tuples.

A log whose workers' times are in order (the simulator's, and any FIFO engine that logs as it queues) is passed
in chunks of its own rows; one that is not is split by worker and sorted once, and its passes take that copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class TupleLog(Protocol):
    """What the passes take of `metrics.TupleLog` (named alike; this module comes before it)."""

    def __len__(self) -> int: ...

    def chunks(self, *names: str, rows: int | None = None) -> Iterator[tuple[int, tuple[np.ndarray, ...]]]: ...


CHUNK = 1 << 21  # rows per pass step: a split copy of 2M rows is 50 MB


@dataclass
class WorkerLoads:
    """What each worker did over the whole log: tuples, busy seconds and the largest queue it held (reached right
    after an arrival), and when the log starts (first arrival) and ends (last finish)."""

    tuples: np.ndarray  # int64, per worker
    busy_s: np.ndarray  # seconds, per worker
    queue_max: np.ndarray  # int64, per worker
    first_s: float
    last_s: float
    runs: tuple | None = None  # the log split by worker and sorted, when it was not in order: (e, s, f, bounds)


def worker_loads(log: TupleLog, workers: int) -> WorkerLoads:
    """Fold the log into each of `workers` workers' loads; ValueError if a worker id lies outside [0, workers)."""
    from topo.results import fifo

    runs, in_order, first, last = None, True, np.inf, -np.inf
    ints, floats, carry, carry_bounds = fifo.fold_state(workers)
    for _, (worker, arrival, *times) in log.chunks("worker", "arrival_s", "enqueue_s", "start_s", "finish_s"):
        if worker.min() < 0 or worker.max() >= workers:
            raise ValueError(f"worker ids must lie in [0, {workers})")
        first, last = min(first, float(arrival.min())), max(last, float(times[2].max()))
        if in_order:  # (once a worker's times go back, the rest of the pass only checks)
            carry, carry_bounds, in_order = fifo.fold(*_split_rows(worker, times, workers), ints, floats, carry,
                                                      carry_bounds)
    if not in_order:
        runs = _sorted_runs(log, workers)
        ints, floats, carry, carry_bounds = fifo.fold_state(workers)
        fifo.fold(*runs, ints, floats, carry, carry_bounds)
    if not len(log):
        first = last = 0.0
    return WorkerLoads(ints[:, fifo.TUPLES].copy(), floats[:, fifo.BUSY].copy(), fifo.queue_max(ints), first, last,
                       runs)


def sampled(log: TupleLog, loads: WorkerLoads, t: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each worker's tuples enqueued, tuples finished and busy seconds by each of the sorted times t: three arrays
    of (workers, len(t))."""
    from topo.results import fifo

    workers = len(loads.tuples)
    t = np.ascontiguousarray(t, np.float64)
    ints = np.zeros((workers, 4), np.int64)
    busy = np.zeros(workers)
    enqueued, finished = np.empty((workers, t.size), np.int64), np.empty((workers, t.size), np.int64)
    busy_at = np.empty((workers, t.size))
    parts = [loads.runs] if loads.runs is not None else _split(log, workers)
    for part in parts:
        fifo.sample(*part, t, ints, busy, enqueued, finished, busy_at)
    fifo.sample_rest(t, ints, busy, enqueued, finished, busy_at)
    return enqueued, finished, busy_at


def _split(log: TupleLog, workers: int, chunk: int | None = None) -> Iterator[tuple]:
    # the log's rows a chunk at a time, each split by worker (in log order within a worker)
    for _, (worker, *times) in log.chunks("worker", "enqueue_s", "start_s", "finish_s", rows=chunk):
        yield _split_rows(worker, times, workers)


def _split_rows(worker: np.ndarray, times: list[np.ndarray], workers: int) -> tuple:
    from topo.results import fifo

    return fifo.split_by_worker(np.ascontiguousarray(worker, np.int64), workers,
                                *(np.ascontiguousarray(c, np.float64) for c in times))


def _sorted_runs(log: TupleLog, workers: int) -> tuple:
    # the whole log split by worker, each worker's three columns sorted apart
    from topo.results import fifo

    runs = next(_split(log, workers, max(1, len(log))))
    for column in runs[:3]:
        fifo.sort_runs(column, runs[3])
    return runs
