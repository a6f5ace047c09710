"""The workers of the simulator: one FIFO input queue and one deterministic server each, and what they
piggyback on acks.

A tuple on worker w takes cost_ms / c_w. With FIFO order and deterministic service its finish time is known
the moment it is queued (Lindley: start = max(arrival, server free), finish = start + service), so a whole
batch is queued by one compiled loop and no service events are ever simulated.

What a worker piggybacks on an ack comes from a `Piggyback`; the default, `AckContent`, reports queue length and
fill, recent utilization, time per tuple, and the increase/decrease signal of the strategy's worker delegation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numba
import numpy as np


@numba.njit(cache=True)
def _lindley(workers, first, at, service, free_at, log, fifo, seen, mark, touched):
    """Queue a batch arriving at `at` in order; return its last finish time and how many workers it used."""
    worker, enqueue, start, finish = log
    after, head, tail = fifo
    n = free_at.size
    done = at
    used = 0
    for i in range(workers.size):
        w = workers[i]
        if w < 0 or w >= n:
            return -1.0 - i, used
        slot = first + i
        begin = at if at > free_at[w] else free_at[w]
        end = begin + service[w]
        free_at[w] = end
        worker[slot] = w
        enqueue[slot] = at
        start[slot] = begin
        finish[slot] = end
        # each worker's queue is a linked list over slots, walked later to count what it holds
        after[slot] = -1
        if tail[w] >= 0:
            after[tail[w]] = slot
        else:
            head[w] = slot
        tail[w] = slot
        if seen[w] != mark:
            seen[w] = mark
            touched[used] = w
            used += 1
        if end > done:
            done = end
    return done, used


@numba.njit(cache=True)
def _advance(w, at, times, after, head, last, count):
    # move worker w's cursor over its tuples whose `times` are <= at; cursors only ever move forward
    slot = head[w] if last[w] < 0 else after[last[w]]
    while slot >= 0 and times[slot] <= at:
        last[w] = slot
        count[w] += 1
        slot = after[slot]


@numba.njit(cache=True)
def _observe(workers, at, enqueue, start, finish, after, head, cursors, qlen, busy, done):
    """Queue length, busy seconds so far and tuples done by time `at` of each given worker."""
    arrived_last, arrived, done_last, done_count, busy_acc = cursors
    for i in range(workers.size):
        w = workers[i]
        _advance(w, at, enqueue, after, head, arrived_last, arrived)
        # like _advance over finish times, but also adding up the service time of every finished tuple
        slot = head[w] if done_last[w] < 0 else after[done_last[w]]
        while slot >= 0 and finish[slot] <= at:
            done_last[w] = slot
            done_count[w] += 1
            busy_acc[w] += finish[slot] - start[slot]
            slot = after[slot]
        partial = at - start[slot] if slot >= 0 and start[slot] < at else 0.0  # the tuple in service now
        qlen[i] = arrived[w] - done_count[w]
        busy[i] = busy_acc[w] + partial
        done[i] = done_count[w]


class WorkerPool:
    """The workers: one FIFO input queue and one server each, serving a tuple in cost_ms / capacity.

    Every queued tuple gets a slot in a log (worker, enqueue, start, finish) sized for the whole stream.
    """

    def __init__(self, capacities: Sequence[float], cost_ms: float, max_tuples: int) -> None:
        n = len(capacities)
        self.cost_s = cost_ms / 1e3
        self.capacity = np.empty(n)
        self.service_s = np.empty(n)
        self.set_capacities(capacities)
        self.free_at = np.zeros(n)  # when each server is done with everything queued so far
        self.size = 0  # tuples queued so far, which is also the next free slot
        self.worker = np.empty(max_tuples, np.int32)
        self.enqueue_s = np.empty(max_tuples)
        self.start_s = np.empty(max_tuples)
        self.finish_s = np.empty(max_tuples)
        self._after = np.empty(max_tuples, np.int64)
        self._head = np.full(n, -1, np.int64)
        self._tail = np.full(n, -1, np.int64)
        self._seen = np.full(n, -1, np.int64)
        self._touched = np.empty(n, np.int32)
        self._batches = 0
        self._default = Observer(self)  # answers queue_length for callers that keep no observer of their own

    @property
    def workers(self) -> int:
        """Number of workers."""
        return len(self.capacity)

    def set_capacities(self, capacities: Sequence[float]) -> None:
        """Change every worker's capacity; tuples queued from now on are served at the new speed."""
        capacity = np.asarray(capacities, dtype=np.float64)
        if capacity.shape != self.capacity.shape or not np.all(capacity > 0):
            raise ValueError(f"a capacity vector needs {len(self.capacity)} positive values")
        self.capacity[:] = capacity
        self.service_s[:] = self.cost_s / capacity

    def enqueue(self, workers: np.ndarray, at: float) -> tuple[int, float, np.ndarray]:
        """Queue a batch routed to `workers` arriving at `at`: first slot, last finish, workers used."""
        first = self.size
        if first + len(workers) > len(self.worker):
            raise RuntimeError("more tuples queued than the stream holds")
        self._batches += 1
        log = (self.worker, self.enqueue_s, self.start_s, self.finish_s)
        fifo = (self._after, self._head, self._tail)
        done, used = _lindley(
            workers,
            first,
            at,
            self.service_s,
            self.free_at,
            log,
            fifo,
            self._seen,
            self._batches,
            self._touched,
        )
        if done < 0:
            bad = workers[int(-1.0 - done)]
            raise ValueError(f"the grouping routed a tuple to worker {bad}, outside [0, {self.workers})")
        self.size += len(workers)
        return first, done, self._touched[:used].copy()

    def queue_length(self, workers: np.ndarray, at: float) -> np.ndarray:
        """Tuples waiting or in service on each given worker at time `at` (times must not decrease)."""
        return self._default.observe(workers, at)[0]

    def pause(self, worker: int, at: float, seconds: float) -> None:
        """Stop worker's server for `seconds` from `at` (or from when it is done with its queue), e.g. to move state."""
        self.free_at[worker] = max(self.free_at[worker], at) + seconds


class Observer:
    """Looks at the workers at non-decreasing times, with cursors of its own (one per kind of observer)."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        n = pool.workers
        # per worker: last slot counted as arrived, how many arrived, last slot done, how many done, busy seconds
        self._cursors = (
            np.full(n, -1, np.int64),
            np.zeros(n, np.int64),
            np.full(n, -1, np.int64),
            np.zeros(n, np.int64),
            np.zeros(n, np.float64),
        )
        self._at = -np.inf

    def observe(self, workers: np.ndarray, at: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(queue length, busy seconds since the start, tuples done) of each given worker at time `at`."""
        if at < self._at:
            raise ValueError("an observer looks at the workers in time order")
        self._at = at
        workers = np.ascontiguousarray(workers, dtype=np.int32)
        qlen = np.empty(len(workers), np.int64)
        busy = np.empty(len(workers), np.float64)
        done = np.empty(len(workers), np.int64)
        pool = self.pool
        _observe(workers, at, pool.enqueue_s, pool.start_s, pool.finish_s, pool._after, pool._head,
                 self._cursors, qlen, busy, done)
        return qlen, busy, done


class UtilizationMeter:
    """Busy fraction of each worker over the last `window` seconds, read at non-decreasing times."""

    def __init__(self, pool: WorkerPool, window: float) -> None:
        self.window = window
        self.service_s = pool.service_s  # the pool's own array: capacity changes show at once
        self._now = Observer(pool)
        self._then = Observer(pool)  # lags `window` behind, so the difference is the busy time inside it

    def measure(self, workers: np.ndarray, at: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(queue length at `at`, busy fraction and offered utilization over [at - window, at]) of each worker.

        Offered utilization = tuples that arrived in the window x the worker's time per tuple / window: the load
        the worker is being given, which unlike the busy fraction does not stay at 1 while a backlog drains.
        """
        qlen, busy_now, done_now = self._now.observe(workers, at)
        start = max(0.0, at - self.window)
        qlen_then, busy_then, done_then = self._then.observe(workers, start)
        span = at - start
        if not span > 0:
            zero = np.zeros(len(workers))
            return qlen, zero, zero
        util = np.clip((busy_now - busy_then) / span, 0.0, 1.0)
        arrived = (qlen + done_now) - (qlen_then + done_then)
        offered = arrived * self.service_s[workers] / span
        return qlen, util, offered


class Piggyback(Protocol):
    """Worker-side ack logic: what each worker attaches to the ack of `source`'s batch, leaving at `at`."""

    def __call__(self, pool: WorkerPool, workers: np.ndarray, at: float, source: int) -> dict[str, np.ndarray]: ...


class AckContent:
    """What a worker piggybacks: queue length and fill, recent utilization and time per tuple, and the signal
    of its worker delegation (Consistent Grouping) when the strategy has one."""

    def __init__(self, pool: WorkerPool, queue_capacity: int, delegation: object | None = None,
                 window_s: float = 0.1) -> None:
        self.queue_capacity = max(1, queue_capacity)
        self.delegation = delegation
        self.meter = UtilizationMeter(pool, getattr(delegation, "window_s", window_s))
        self.signals_sent = {"increase": 0, "decrease": 0}

    def __call__(self, pool: WorkerPool, workers: np.ndarray, at: float, source: int) -> dict[str, np.ndarray]:
        """The ack fields of the given workers at time `at`, for the source that sent the batch."""
        qlen, util, offered = self.meter.measure(workers, at)
        signals = np.zeros(len(workers), np.int8)
        if self.delegation is not None:
            watched = {"busy": util, "offered": offered, "queue": qlen / self.queue_capacity}[
                getattr(self.delegation, "measure", "busy")
            ]
            for i, w in enumerate(workers.tolist()):
                signals[i] = self.delegation.signal(w, source, at, float(watched[i]))
            self.signals_sent["increase"] += int(np.sum(signals > 0))
            self.signals_sent["decrease"] += int(np.sum(signals < 0))
        return {
            "queue_len": qlen.astype(np.float64),
            "load": np.minimum(1.0, qlen / self.queue_capacity),
            "utilization": util,
            "service_ms": pool.service_s[workers] * 1e3,
            "signals": signals,
        }
