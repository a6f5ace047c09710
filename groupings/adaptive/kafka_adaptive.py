"""Kafka's built-in partitioner ("kafka_adaptive"): sticky batches to channels drawn against their queues (KIP-794).

What a Kafka producer (3.3 and later) does with records that have no key:

    * Stickiness. It appends records to one partition until it has produced `batch.size` there, then switches.
    * The switch. With `partitioner.adaptive.partitioning.enable` (default true) the next partition is drawn with
      probability proportional to (max queue + 1 - its queue), queue being the batches waiting for the
      partition, max the longest of those queues: a cumulative frequency table of these weights in partition
      order, a uniform draw in [0, total), and the first partition whose running sum exceeds it. When every
      queue is the same length the draw is uniform. Without adaptive partitioning the draw is always uniform.
    * Availability. With `partitioner.availability.timeout.ms` > 0 (default 0, off), a partition whose broker
      has had data ready but accepted nothing for longer than the timeout is left out of the table until it
      accepts a batch again; when every partition is left out, the draw is uniform over all of them.

Here a channel's queue is its backlog in batches: ceil(backlog / `batch`), backlog being the tuples this source
routed to the worker minus the tuples its acks acknowledged (`AckReport.acked`). A channel is unavailable when it
has a backlog and neither an ack nor the start of that backlog happened within `availability_timeout_ms` of
the engine clock (the route's `now`, or the latest time seen). What differs from Kafka: the random generator is
a seeded splitmix64 (so runs repeat); sizes are in tuples, not bytes; a switch happens after exactly `batch`
tuples (Kafka may wait up to twice that for a lingering batch to fill); the table is computed at each switch
from the backlogs then, where Kafka's sender thread refreshes it; and adaptive draws start at once, where Kafka
waits until every partition has had a batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import registry
from ..checks import as_key_hashes, check_report, check_workers, per_worker
from ..contract import Adaptive
from ..feedback import AckReport
from ..hashing import bucket, mix64
from ..jit import hot
from ..params import Param, at_least_one, non_negative

# the command line's --batch-size (topo.spec.CLI_BATCH_SIZE): a source's output buffer, and so Kafka's batch
BATCH = 1000
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK64 = (1 << 64) - 1

PARAMS = (
    Param(
        "batch",
        int,
        BATCH,
        at_least_one,
        "tuples per batch (Kafka's batch.size): produced to one channel before switching, and the unit of its "
        "queue (default: the command line's --batch-size)",
    ),
    Param(
        "adaptive",
        bool,
        True,
        None,
        "draw the next channel against the queued batches (Kafka's partitioner.adaptive.partitioning.enable); "
        "false: uniformly",
    ),
    Param(
        "availability_timeout_ms",
        float,
        0.0,
        non_negative,
        "milliseconds a channel with a backlog may go without an ack before it is skipped (Kafka's "
        "partitioner.availability.timeout.ms); 0: never skipped",
        duration=True,
    ),
)


@hot
def _draw(rng, k):
    """Uniform integer in [0, k) from the instance's splitmix64 generator."""
    rng[0] += _GOLDEN
    return np.int64(bucket(mix64(rng[0], np.uint64(0)), k))


@hot(inline=True)
def _queue(backlog, since, clock, batch, timeout_s, w):
    """Batches queued for channel w, or -1 when it is unavailable (a backlog, and no ack within the timeout)."""
    if timeout_s > 0 and backlog[w] > 0 and clock - since[w] > timeout_s:
        return np.int64(-1)
    return (backlog[w] + batch - 1) // batch


@hot
def next_channel(backlog, since, clock, batch, adaptive, timeout_s, rng, counts):
    """The channel to stick to next: drawn against (max queue + 1 - queue) over the available channels."""
    n = backlog.size
    if not adaptive:
        return _draw(rng, n)
    longest = np.int64(-1)
    available = 0
    for w in range(n):
        queue = _queue(backlog, since, clock, batch, timeout_s, w)
        if queue >= 0:
            available += 1
            longest = max(longest, queue)
    if available == 0:
        return _draw(rng, n)
    counts[1] += n - available
    total = np.int64(0)
    for w in range(n):
        queue = _queue(backlog, since, clock, batch, timeout_s, w)
        if queue >= 0:
            total += longest + 1 - queue
    r = _draw(rng, total)
    running = np.int64(0)
    for w in range(n):
        queue = _queue(backlog, since, clock, batch, timeout_s, w)
        if queue >= 0:
            running += longest + 1 - queue
            if running > r:
                return w
    return np.int64(n - 1)  # not reached: the running sum ends at total > r


@hot
def route_kafka_adaptive(out, backlog, since, clock, batch, adaptive, timeout_s, sticky, rng, counts):
    """Each tuple to the sticky channel; after `batch` tuples there, draw the next one."""
    for j in range(out.size):
        if sticky[0] < 0:
            sticky[0] = next_channel(backlog, since, clock, batch, adaptive, timeout_s, rng, counts)
            sticky[1] = 0
        w = sticky[0]
        out[j] = w
        if backlog[w] == 0:
            since[w] = clock  # its backlog starts now
        backlog[w] += 1
        sticky[1] += 1
        if sticky[1] >= batch:
            sticky[0] = next_channel(backlog, since, clock, batch, adaptive, timeout_s, rng, counts)
            sticky[1] = 0
            counts[0] += 1


class KafkaAdaptive(Adaptive):
    """One source's Kafka producer partitioner: sticky batches, each to a channel drawn against the queues."""

    name = "kafka_adaptive"

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        super().__init__(workers, seed, params)
        self._backlog = np.zeros(self.workers, dtype=np.int64)  # tuples routed to each worker and not yet acked
        self._since = np.zeros(self.workers)  # last ack from each worker, or the start of its backlog (s)
        self._sticky = np.array([-1, 0], dtype=np.int64)  # the channel stuck to (-1: none yet), tuples sent there
        self._rng = np.array([self.seed & _MASK64], dtype=np.uint64)
        self._counts = np.zeros(2, dtype=np.int64)  # switches, and channels left out of a draw as unavailable
        self._messages = 0

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Worker (int32) of each tuple, in order; keys play no part, `now` (seconds) decides availability."""
        keys = as_key_hashes(keys)
        self.see(now)
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            p = self.params
            route_kafka_adaptive(
                out,
                self._backlog,
                self._since,
                self.clock,
                p["batch"],
                p["adaptive"],
                p["availability_timeout_ms"] / 1e3,
                self._sticky,
                self._rng,
                self._counts,
            )
            self._messages += keys.size
        return out

    def feedback(self, report: AckReport) -> None:
        """Acked tuples leave their channel's backlog; an ack marks its channel available from `report.now`."""
        check_report(report, self.workers)
        self.see(report.now)
        if len(report):
            self._backlog = np.maximum(self._backlog - report.acked_by(self.workers), 0)
            self._since[report.workers] = report.now

    def resize(self, workers: int) -> None:
        """Workers [0, workers) from now on: a newcomer has no backlog; a sticky channel that left is dropped."""
        workers = check_workers(workers)
        if workers == self.workers:
            return
        self._backlog = per_worker(self._backlog, workers, 0)
        self._since = per_worker(self._since, workers, self.clock)
        if self._sticky[0] >= workers:
            self._sticky[:] = (-1, 0)
        self.workers = workers

    def stats(self) -> dict:
        """Messages, switches, channels skipped as unavailable, and the queues seen now (batches)."""
        queues = [math.ceil(b / self.params["batch"]) for b in self._backlog.tolist()]
        return {
            "messages": self._messages,
            "switches": int(self._counts[0]),
            "skipped": int(self._counts[1]),
            "max_queue": max(queues),
            "backlog": int(self._backlog.sum()),
        }

    def backlog(self) -> np.ndarray:
        """Copy of the backlog this source sees on each channel (tuples)."""
        return self._backlog.copy()


registry.register(
    "kafka_adaptive",
    KafkaAdaptive.factory,
    params=PARAMS,
    doc="Kafka producer's built-in partitioner (Kafka 3.3+, KIP-794): sticky batches, the next channel drawn "
    "against its queued batches; stalled channels skipped",
)
