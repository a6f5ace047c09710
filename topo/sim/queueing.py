"""The workers of the simulator: one FIFO input queue and one deterministic server each, and what they
piggyback on acks.

A tuple on worker w takes cost_ms / c_w. With FIFO order and deterministic service its finish time is known
the moment it is queued (Lindley: start = max(arrival, server free), finish = start + service), so a whole
buffer is queued by one compiled loop and no service events are ever simulated.
What a worker piggybacks on its acks is the shared model's (`topo.model.AckMeter`), the same as on Ray.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from topo.results.spill import column, release

KEEP_ROWS = 1 << 20  # rows of a spilled log kept in memory behind the newest: the queues' tails and buffers in flight
# the log's columns, one entry per queued tuple (`_after` links each worker's queue)
LOG_COLUMNS = (("worker", np.int32), ("enqueue_s", np.float64), ("start_s", np.float64), ("finish_s", np.float64),
               ("source", np.int32), ("seq", np.int64), ("arrival_s", np.float64), ("_after", np.int64))
LOG_ROW_BYTES = sum(np.dtype(dtype).itemsize for _, dtype in LOG_COLUMNS)


@numba.njit(cache=True, inline="always")  # no call, no reference counts, in a compiled caller
def _lindley(w, index, first, at, service, free_at, log, fifo, who):
    """Queue a buffer for worker w arriving at `at`: its tuples are the sender's input positions `index`, in order.
    Fill their log slots from `first` on (who sent which input tuple, and when it arrived); return the last finish."""
    worker, enqueue, start, finish = log
    after, head, tail = fifo
    source, sources, arrivals, source_out, seq_out, arrival_out = who
    for i in range(index.size):
        slot = first + i
        begin = at if at > free_at[w] else free_at[w]
        end = begin + service[w]
        free_at[w] = end
        worker[slot] = w
        enqueue[slot] = at
        start[slot] = begin
        finish[slot] = end
        source_out[slot] = source
        seq_out[slot] = source + index[i] * sources  # message seq went to source seq % sources
        arrival_out[slot] = arrivals[index[i]]
        # each worker's queue is a linked list over slots, walked later to count what it holds
        after[slot] = -1
        if tail[w] >= 0:
            after[tail[w]] = slot
        else:
            head[w] = slot
        tail[w] = slot
    return free_at[w] if index.size else at


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

    Every queued tuple gets a slot in a log (worker, enqueue, start, finish, and the sender's source, seq and
    arrival) sized for the whole stream; with `spill` the log lives in files (`topo.results.spill`), and
    `release` hands the rows already written back to them.
    """

    def __init__(self, capacities: Sequence[float], cost_ms: float, max_tuples: int, spill: bool = False) -> None:
        n = len(capacities)
        self.cost_s = cost_ms / 1e3
        self.capacity = np.empty(n)
        self.service_s = np.empty(n)
        self.set_capacities(capacities)
        self.free_at = np.zeros(n)  # when each server is done with everything queued so far
        self.size = 0  # tuples queued so far, which is also the next free slot
        for name, dtype in LOG_COLUMNS:
            setattr(self, name, column(dtype, max_tuples) if spill else np.empty(max_tuples, dtype))
        self.spilled = spill
        self._released = 0  # rows whose pages went back to their files
        self._head = np.full(n, -1, np.int64)
        self._tail = np.full(n, -1, np.int64)
        self._default = Observer(self)  # answers queue_length for callers that keep no observer of their own

    def release(self, upto: int) -> None:
        """Hand the log's rows before `upto` back to their files (nothing when the log is in memory). They keep
        their values: a row read again (a queue walked, a buffer's first tuple) comes back from its file."""
        for name, _ in LOG_COLUMNS:
            release(getattr(self, name), self._released, upto)
        self._released = max(self._released, upto)

    def release_written(self) -> None:
        """`release` all but the last `KEEP_ROWS` rows written, once twice that many are held (a spilled log)."""
        if self.spilled and self.size - self._released >= 2 * KEEP_ROWS:
            self.release(self.size - KEEP_ROWS)

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

    def enqueue_buffer(self, w: int, index: np.ndarray, at: float, source: int, sources: int,
                       arrivals: np.ndarray) -> tuple[int, float]:
        """Queue a buffer for worker w arriving at `at`: input positions `index` of `source`, one of `sources`
        (position p is message seq source + p * sources), whose arrival times are `arrivals`. Its first slot and last
        finish."""
        first, size = self.size, len(index)
        if first + size > len(self.worker):
            raise RuntimeError("more tuples queued than the stream holds")
        if not 0 <= w < self.workers:
            raise ValueError(f"the grouping routed a tuple to worker {w}, outside [0, {self.workers})")
        service, free_at, log, fifo, out = self.arrays
        done = _lindley(w, index, first, at, service, free_at, log, fifo, (source, sources, arrivals, *out))
        self.size += size
        return first, done

    @property
    def arrays(self) -> tuple:
        """What `_lindley` takes of the pool, for compiled callers too: (service, free at, the log's (worker,
        enqueue, start, finish), the queues' (after, head, tail), the sender's (source, seq, arrival) columns)."""
        return (self.service_s, self.free_at, (self.worker, self.enqueue_s, self.start_s, self.finish_s),
                (self._after, self._head, self._tail), (self.source, self.seq, self.arrival_s))

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
