"""The messages between the actors of a Ray run, and the per-tuple log a worker ships with its flushes.

Sources call workers (a batch), workers answer with an `Ack` (to that source only) and push `Flush`es to the
aggregator; everything else (statistics for a controller, recovery questions) is a plain method call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

LOG_COLUMNS = ("seq", "source", "arrival_s", "enqueue_s", "start_s", "finish_s")
# one buffer on the wire: one record array per call (measured 1.2-1.6x the tuples/s of three separate arrays)
WIRE = np.dtype([("seq", "<i8"), ("key", "<u8"), ("arrival", "<f8")])
EPOCH_SHIFT = 40  # a batch id carries its source's incarnation above this bit: a restarted source never reuses one


def tag(epoch: int, batch: int) -> int:
    """The batch id of a source's `batch`-th buffer in its `epoch`-th incarnation."""
    return (epoch << EPOCH_SHIFT) | batch


def epoch_of(batch_id):
    """The source incarnation that sent a batch (works on arrays too)."""
    return batch_id >> EPOCH_SHIFT


def pack(seq: np.ndarray, keys: np.ndarray, arrival: np.ndarray) -> np.ndarray:
    """The buffer's columns as one packed record array (`WIRE`)."""
    out = np.empty(len(seq), WIRE)
    out["seq"], out["key"], out["arrival"] = seq, keys, arrival
    return out


class Ack(NamedTuple):
    """A worker's answer to one batch: who served it, how loaded it is now, and what it has committed since."""

    worker: int
    incarnation: int  # which life of the worker actor served the batch (a restart gives a new one)
    source: int  # the source that sent the batch: an ack goes back to its sender only
    batch_id: int
    queue_len: float  # tuples accepted and not yet served, when the ack left
    load: float  # queue_len over the most the worker can hold, in [0, 1]
    utilization: float  # busy fraction over the last window
    service_ms: float  # measured wall time per tuple over the last window (configured before any)
    signal: int  # worker delegation: +1 increase, -1 decrease, 0 nothing
    committed: np.ndarray  # int64 batch ids of this source the aggregator made durable since the last ack


@dataclass
class Flush:
    """A worker's periodic delta: the operator state of what it served since its last flush, the batches that
    state covers, and the per-tuple log of those batches."""

    worker: int
    incarnation: int
    sources: np.ndarray  # int32: source of each covered batch
    batch_ids: np.ndarray  # int64: id of each covered batch (ids are per source)
    state: Any  # the operator's partial state over exactly those batches
    log: dict[str, np.ndarray]  # LOG_COLUMNS over their tuples (times absolute, time.time() seconds)

    @property
    def tuples(self) -> int:
        """Tuples the flush covers."""
        return len(self.log["seq"])


def batch_log(seq, source, arrival, enqueue, begin, finish) -> dict[str, np.ndarray]:
    """LOG_COLUMNS of one served batch: its tuples started one after another from `begin` (FIFO server)."""
    n = len(seq)
    start = np.empty(n)
    if n:
        start[0] = begin
        start[1:] = finish[:-1]
    return {
        "seq": np.asarray(seq, np.int64),
        "source": np.full(n, source, np.int32),
        "arrival_s": np.asarray(arrival, np.float64),
        "enqueue_s": np.full(n, enqueue),
        "start_s": np.minimum(start, finish),
        "finish_s": np.asarray(finish, np.float64),
    }


def concat_logs(parts: list[dict[str, np.ndarray]], extra: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """One log holding every part, in order (LOG_COLUMNS and the `extra` int32 columns, e.g. the worker)."""
    names = (*LOG_COLUMNS, *extra)
    if not parts:
        return {name: np.empty(0, np.int32 if name == "source" or name in extra else
                               np.int64 if name == "seq" else np.float64) for name in names}
    return {name: np.concatenate([p[name] for p in parts]) for name in names}
