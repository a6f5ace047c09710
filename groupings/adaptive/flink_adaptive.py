"""Flink's adaptive partitioner ("flink_adaptive"): rebalance that skips channels with a backlog (Flink 2.3, FLIP-339).

With `taskmanager.network.adaptive-partitioner.enabled`, Flink's rebalance and rescale edges stop dealing records
strictly in turn (FLINK-31655, released in Flink 2.3). For each record the writer looks at the channels that
follow the last one it chose, at most `taskmanager.network.adaptive-partitioner.max-traverse-size` of them
(default 4, and never more than there are channels):

    * the first of them with nothing queued takes the record at once;
    * otherwise the least loaded of them takes it, load being the data the writer holds queued for that channel
      (buffers, then bytes); on equal load the one visited first wins;
    * the chosen channel becomes the position the next record's walk starts after. The writer starts before
      channel 0, so with nothing queued anywhere this is exactly round robin.

Here a channel's load is the backlog this source sees on it: tuples it routed there minus tuples the acks of
that worker acknowledged (`AckReport.acked`), counted per tuple as routing goes. Buffers-then-bytes orders
channels exactly as tuples do, since a buffer count is the rounded-up tuple count. What differs from Flink: its
queue empties as buffers leave over the network, while here a tuple stays in the backlog until its buffer is
acked, after service (the emulator's credits return then too); the cursor survives a resize when it is still a
valid channel, and otherwise starts before channel 0 again, as a freshly deployed writer does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import registry
from ..checks import as_key_hashes, check_now, check_report, check_workers, per_worker
from ..contract import Adaptive
from ..feedback import AckReport
from ..jit import hot
from ..params import Param


def _traversable(value: int, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: at least 2 channels, Flink's lower bound for the setting (1 would compare nothing)."""
    return None if value >= 2 else "must be at least 2 (one channel compares nothing)"


PARAMS = (
    Param(
        "max_traverse",
        int,
        4,
        _traversable,
        "channels looked at per record, from the one after the last chosen (Flink's "
        "taskmanager.network.adaptive-partitioner.max-traverse-size; capped at the worker count)",
    ),
)


@hot
def route_flink_adaptive(out, backlog, cursor, traverse, detours):
    """Each tuple to the first idle, else the least backlogged, of the `traverse` channels after the cursor."""
    n = backlog.size
    span = min(traverse, n)
    current = cursor[0]
    for j in range(out.size):
        best = -1
        least = np.int64(0)
        for i in range(1, span + 1):
            c = current + i
            if c >= n:
                c -= n
            load = backlog[c]
            if load == 0:
                best = c
                break
            if best < 0 or load < least:
                best, least = c, load
        if best != current + 1 and not (best == 0 and current == n - 1):
            detours[0] += 1
        out[j] = best
        backlog[best] += 1
        current = best
    cursor[0] = current


class FlinkAdaptive(Adaptive):
    """One source's adaptive rebalance: a round-robin walk that takes the least backlogged of the next channels."""

    name = "flink_adaptive"

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        super().__init__(workers, seed, params)  # no random choice: the seed changes nothing
        self._backlog = np.zeros(self.workers, dtype=np.int64)  # tuples routed to each worker and not yet acked
        self._cursor = np.array([-1], dtype=np.int64)  # the channel chosen last; -1 before the first record
        self._detours = np.zeros(1, dtype=np.int64)  # records that did not go to the round-robin channel
        self._messages = 0

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Worker (int32) of each tuple, in order; keys and time play no part."""
        keys = as_key_hashes(keys)
        check_now(now)
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            route_flink_adaptive(out, self._backlog, self._cursor, self.params["max_traverse"], self._detours)
            self._messages += keys.size
        return out

    def feedback(self, report: AckReport) -> None:
        """Acked tuples leave their channel's backlog (never below zero)."""
        check_report(report, self.workers)
        if len(report):
            self._backlog = np.maximum(self._backlog - report.acked_by(self.workers), 0)

    def resize(self, workers: int) -> None:
        """Workers [0, workers) from now on: a newcomer has no backlog; a cursor past the end starts over."""
        workers = check_workers(workers)
        if workers == self.workers:
            return
        self._backlog = per_worker(self._backlog, workers, 0)
        if self._cursor[0] >= workers:
            self._cursor[0] = -1
        self.workers = workers

    def stats(self) -> dict:
        """Messages, how many left the round-robin order, and the backlogs seen now."""
        return {
            "messages": self._messages,
            "detours": int(self._detours[0]),
            "max_backlog": int(self._backlog.max()),
            "backlog": int(self._backlog.sum()),
        }

    def backlog(self) -> np.ndarray:
        """Copy of the backlog this source sees on each channel (tuples)."""
        return self._backlog.copy()


registry.register(
    "flink_adaptive",
    FlinkAdaptive.factory,
    params=PARAMS,
    doc="Flink 2.3 adaptive partitioner (FLIP-339): round robin that takes the least backlogged of the next "
    "max_traverse channels",
)
