"""Flink's adaptive partitioner ("flink_adaptive"): rebalance that skips channels with a backlog (Flink 2.3, FLIP-339).

With `taskmanager.network.adaptive-partitioner.enabled`, Flink's rebalance and rescale edges stop dealing records
strictly in turn (FLINK-31655, released in Flink 2.3). For each record the writer looks at the channels that
follow the last one it chose, at most `taskmanager.network.adaptive-partitioner.max-traverse-size` of them
(default 4, and never more than there are channels):

    * the first of them that holds no buffer takes the record at once;
    * otherwise the least loaded of them takes it, load being the buffers the writer holds for that channel, then
      the bytes its reader has not taken yet; on equal load the one visited first wins;
    * the chosen channel becomes the position the next record's walk starts after. The writer starts before
      channel 0, so with nothing queued anywhere this is exactly round robin.

Flink counts a channel's buffers from the moment its writer asks the pool for one until the reader has read all of
it (`LocalBufferPool.getBuffersCountUnsafe`): a buffer stays open across flushes until it is full (a flush ships
what it holds so far, and later records fill the rest of the same 32 KiB segment), so a channel that has carried
anything holds one buffer, and one more for every full buffer its worker has not read through. Its bytes are those
written and not yet taken by the reader (`getBytesInQueueUnsafe`), and a reader shared by several channels takes
all of a channel's data each time it comes back to it. Here, with `size` tuples to a buffer (the run's
--batch-size), r tuples routed to a channel, a of them acked and t taken, the channel holds
ceil(r / size) - floor(a / size) buffers and r - max(t, a) tuples not taken. The source tells the grouping t
(`see_channels`): the tuples it had sent on the channel when the worker's previous ack landed, about when the worker
came back to its channel last (`SourceNode.on_ack`). So a channel counts as idle only when everything it carried
was acked and its last buffer was full, and a worker with a full buffer unread is passed over. Outside a run (size
1, nothing taken but what was acked) this is the per-tuple backlog. The cursor survives a resize when it is still
a valid channel, and otherwise starts before channel 0 again, as a freshly deployed writer does.
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
    Param(
        "buffer_tuples",
        int,
        0,
        lambda v, n, values: None if v >= 0 else "must be 0 (the run's --batch-size) or more",
        "tuples in one network buffer, whose count is Flink's first measure of a channel's load; 0 = the run's "
        "--batch-size (1, per tuple, outside a run)",
    ),
)


@hot
def route_flink_adaptive(out, routed, acked, taken, size, cursor, traverse, detours):
    """Each tuple to the first idle, else the least loaded (buffers held, then tuples unread), of the `traverse`
    channels after the cursor."""
    n = routed.size
    span = min(traverse, n)
    current = cursor[0]
    for j in range(out.size):
        best = -1
        fewest = np.int64(0)
        least = np.int64(0)
        for i in range(1, span + 1):
            c = current + i
            if c >= n:
                c -= n
            r = routed[c]
            held = (r + size - 1) // size - min(acked[c], r) // size  # the open buffer, and every full one unread
            if held == 0:
                best = c
                break
            unread = r - min(max(taken[c], acked[c]), r)
            if best < 0 or held < fewest or (held == fewest and unread < least):
                best, fewest, least = c, held, unread
        if best != current + 1 and not (best == 0 and current == n - 1):
            detours[0] += 1
        out[j] = best
        routed[best] += 1
        current = best
    cursor[0] = current


class FlinkAdaptive(Adaptive):
    """One source's adaptive rebalance: a round-robin walk that takes the least backlogged of the next channels."""

    name = "flink_adaptive"

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        super().__init__(workers, seed, params)  # no random choice: the seed changes nothing
        self._routed = np.zeros(self.workers, dtype=np.int64)  # tuples routed to each worker
        self._acked = np.zeros(self.workers, dtype=np.int64)  # ... and acked by it
        self._size = max(1, self.params["buffer_tuples"])  # tuples to a buffer (1 until a run says otherwise)
        # tuples each worker has taken off its channel (its reader has them), told by the source; at least those acked
        self._taken = np.zeros(self.workers, dtype=np.int64)
        self._cursor = np.array([-1], dtype=np.int64)  # the channel chosen last; -1 before the first record
        self._detours = np.zeros(1, dtype=np.int64)  # records that did not go to the round-robin channel
        self._messages = 0

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Worker (int32) of each tuple, in order; keys and time play no part."""
        keys = as_key_hashes(keys)
        check_now(now)
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            route_flink_adaptive(out, self._routed, self._acked, self._taken, self._size, self._cursor,
                                 self.params["max_traverse"], self._detours)
            self._messages += keys.size
        return out

    def set_buffer_tuples(self, size: int) -> None:
        """The run's tuples per buffer (its --batch-size), unless the buffer_tuples parameter gave a number."""
        if not self.params["buffer_tuples"]:
            self._size = max(1, int(size))

    def see_channels(self, taken: np.ndarray) -> None:
        """The tuples each worker has taken from this source's channel, as its source estimates them (int64)."""
        self._taken = taken

    def feedback(self, report: AckReport) -> None:
        """Acked tuples leave their channel's load (never more than it was sent)."""
        check_report(report, self.workers)
        if len(report):
            self._acked = np.minimum(self._acked + report.acked_by(self.workers), self._routed)

    def resize(self, workers: int) -> None:
        """Workers [0, workers) from now on: a newcomer has no backlog; a cursor past the end starts over."""
        workers = check_workers(workers)
        if workers == self.workers:
            return
        self._routed = per_worker(self._routed, workers, 0)
        self._acked = per_worker(self._acked, workers, 0)
        if self._taken.size < workers:
            self._taken = per_worker(self._taken, workers, 0)
        if self._cursor[0] >= workers:
            self._cursor[0] = -1
        self.workers = workers

    def stats(self) -> dict:
        """Messages, how many left the round-robin order, and the backlogs seen now."""
        return {
            "messages": self._messages,
            "detours": int(self._detours[0]),
            "max_backlog": int(self.backlog().max()),
            "backlog": int(self.backlog().sum()),
            "buffer_tuples": self._size,
        }

    def backlog(self) -> np.ndarray:
        """The tuples this source sees unacked on each channel."""
        return self._routed - self._acked


registry.register(
    "flink_adaptive",
    FlinkAdaptive.factory,
    params=PARAMS,
    doc="Flink 2.3 adaptive partitioner (FLIP-339): round robin that takes the least backlogged of the next "
    "max_traverse channels",
)
