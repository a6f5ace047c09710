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


# the head of each buffer in a frame: its worker, its batch id and where its tuples end in the frame's records
HEAD = np.dtype([("worker", "<i4"), ("batch_id", "<i8"), ("end", "<i8")])


class Frame(NamedTuple):
    """Every buffer a source sends one worker process in one step, as two arrays: Ray pickles an array as one
    out-of-band buffer, so one frame of 30 buffers costs about what one buffer did (measured 187 -> 83 us for 12)."""

    source: int
    heads: np.ndarray  # HEAD, one per buffer
    tuples: np.ndarray  # WIRE, every buffer's tuples one after another
    values: list | None  # each buffer's operator values; None when the operator takes none

    @property
    def epoch(self) -> int:
        """The incarnation of the source that sent it (every buffer of a frame has the same)."""
        return epoch_of(int(self.heads["batch_id"][0])) if len(self.heads) else 0

    def buffers(self):
        """(worker, batch id, tuples, values) of each buffer, its tuples a view into the frame's records."""
        start = 0
        values = self.values
        for i, (worker, batch_id, end) in enumerate(self.heads.tolist()):
            yield worker, batch_id, self.tuples[start:end], None if values is None else values[i]
            start = end


def concat_records(parts: list[np.ndarray]) -> np.ndarray:
    """WIRE arrays one after another, joined as bytes: numpy's concatenation promotes a structured dtype field by
    field for every part (about 5 us a part here; a byte view of each first, 0.75 us; a join, 0.05 us). A
    writable copy, so that compiled code taking it sees the array type it was compiled for."""
    try:
        joined = b"".join(parts)
    except (BufferError, TypeError, ValueError):  # a strided part (never on the data path): copy each first
        joined = b"".join([np.ascontiguousarray(part) for part in parts])
    return np.frombuffer(bytearray(joined), WIRE)


class Handover(NamedTuple):
    """A frame between a source and workers of one process: its buffers as they are, nothing packed."""

    source: int
    entries: list  # each with `worker`, `batch_id`, `tuples` (WIRE) and `values`

    @property
    def epoch(self) -> int:
        """As `Frame.epoch`."""
        return epoch_of(self.entries[0].batch_id) if self.entries else 0

    def buffers(self):
        """(worker, batch id, tuples, values) of each buffer, as `Frame.buffers`."""
        for e in self.entries:
            yield e.worker, e.batch_id, e.tuples, e.values


def pack_frame(source: int, buffers: list) -> Frame:
    """One frame of `buffers` (each with `worker`, `batch_id`, `tuples` and `values`)."""
    heads = np.empty(len(buffers), HEAD)
    heads["worker"] = [b.worker for b in buffers]
    heads["batch_id"] = [b.batch_id for b in buffers]
    heads["end"] = np.cumsum([len(b.tuples) for b in buffers])
    tuples = concat_records([b.tuples for b in buffers]) if buffers else np.empty(0, WIRE)
    values = None if all(b.values is None for b in buffers) else [b.values for b in buffers]
    return Frame(source, heads, tuples, values)


class Ack(NamedTuple):
    """A worker's answer to one batch: who served it, how loaded it is now, and what it has committed since."""

    worker: int
    incarnation: int  # which life of the worker actor served the batch (a restart gives a new one)
    source: int  # the source that sent the batch: an ack goes back to its sender only
    batch_id: int
    # the five load fields, in this order (`Source._acked` takes them as one slice)
    queue_len: float  # tuples accepted and not yet served, when the ack left
    load: float  # queue_len over the most the worker can hold, in [0, 1]
    utilization: float  # busy fraction over the last window
    service_ms: float  # measured wall time per tuple over the last window (configured before any)
    signal: int  # worker delegation: +1 increase, -1 decrease, 0 nothing
    committed: tuple  # batch ids of this source the aggregator made durable since the last ack (ints)


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
    seq = np.asarray(seq, np.int64)
    return served_log(seq, np.asarray(arrival, np.float64), np.array([len(seq)]), [source], [enqueue], [begin],
                      np.asarray(finish, np.float64))


def served_log(seq: np.ndarray, arrival: np.ndarray, sizes: np.ndarray, sources: list, enqueues: list,
               begins: list, finish: np.ndarray) -> dict[str, np.ndarray]:
    """LOG_COLUMNS of batches served one after another, built at once (a worker logs at flush time, not per
    buffer): `seq`, `arrival` and `finish` hold every batch's tuples one after another, `sizes` says how many each
    has; within a batch each tuple starts when the one before it finished, the first at its batch's begin."""
    start = np.empty(len(finish))
    if len(finish):
        start[1:] = finish[:-1]
        firsts = np.concatenate(([0], np.cumsum(sizes)[:-1]))[sizes > 0]
        start[firsts] = np.asarray(begins, np.float64)[sizes > 0]
    return {
        "seq": seq,
        "source": np.repeat(np.asarray(sources, np.int32), sizes),
        "arrival_s": arrival,
        "enqueue_s": np.repeat(np.asarray(enqueues, np.float64), sizes),
        "start_s": np.minimum(start, finish),
        "finish_s": finish,
    }


def concat_logs(parts: list[dict[str, np.ndarray]], extra: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """One log holding every part, in order (LOG_COLUMNS and the `extra` int32 columns, e.g. the worker)."""
    names = (*LOG_COLUMNS, *extra)
    if not parts:
        return {name: np.empty(0, np.int32 if name == "source" or name in extra else
                               np.int64 if name == "seq" else np.float64) for name in names}
    return {name: np.concatenate([p[name] for p in parts]) for name in names}
