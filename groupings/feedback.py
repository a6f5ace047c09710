"""What acks carry back to the source that sent the tuples, as the papers piggyback it.

Every engine builds one `AckReport` per delivery to a source (all the acks that reached it since its last
send); every grouping reads what it needs and ignores the rest. Nothing here is broadcast: a source only
learns about the workers that acked its own tuples (eventual consistency, as in Consistent Grouping).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INCREASE = np.int8(1)  # "send me more": the worker is idle (CG worker delegation)
DECREASE = np.int8(-1)  # "send me less": the worker is busy
NO_SIGNAL = np.int8(0)


@dataclass(frozen=True)
class AckReport:
    """Acks that reached one source, oldest first; arrays are parallel, one entry per (ack, worker)."""

    workers: np.ndarray  # int32: the worker that acked
    queue_len: np.ndarray  # float64: tuples waiting or in service at that worker when the ack left
    load: np.ndarray  # float64 in [0, 1]: queue_len / the worker's input-queue capacity (Storm's "load")
    utilization: np.ndarray  # float64 in [0, 1]: busy fraction of the worker over its last monitoring window
    service_ms: np.ndarray  # float64: the worker's measured processing time per tuple, recently
    signals: np.ndarray  # int8: INCREASE, DECREASE or NO_SIGNAL, piggybacked by worker delegation
    now: float  # the source's clock when it reads the acks (seconds)
    # float64: tuples of this source that the ack acknowledges (the acked buffer's size), so that a grouping can
    # keep the backlog it sees on each channel: tuples it sent there minus tuples acked; zeros when not given
    acked: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.workers)
        if self.acked is None:
            object.__setattr__(self, "acked", np.zeros(n))
        for name in ("queue_len", "load", "utilization", "service_ms", "signals", "acked"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"AckReport.{name} has {len(getattr(self, name))} entries, workers has {n}")

    @classmethod
    def empty(cls, now: float = 0.0) -> AckReport:
        """A report of no acks (a source that has heard nothing yet)."""
        z = np.zeros(0)
        return cls(np.zeros(0, np.int32), z, z, z, z, np.zeros(0, np.int8), now, z)

    @classmethod
    def of(
        cls,
        workers,
        *,
        queue_len=None,
        load=None,
        utilization=None,
        service_ms=None,
        signals=None,
        now: float = 0.0,
        acked=None,
    ) -> AckReport:
        """Build a report from whatever the engine measured; fields not given are zeros (tests, simple engines)."""
        w = np.asarray(workers, dtype=np.int32)

        def col(x, dtype):
            return np.zeros(w.size, dtype) if x is None else np.asarray(x, dtype=dtype)

        return cls(
            w,
            col(queue_len, np.float64),
            col(load, np.float64),
            col(utilization, np.float64),
            col(service_ms, np.float64),
            col(signals, np.int8),
            float(now),
            col(acked, np.float64),
        )

    def __len__(self) -> int:
        return len(self.workers)

    def acked_by(self, workers: int) -> np.ndarray:
        """Tuples acknowledged per worker [0, workers) (int64): what leaves the backlog a source keeps per channel."""
        acked = np.bincount(self.workers, weights=np.rint(self.acked), minlength=workers)
        return acked[:workers].astype(np.int64)


@dataclass(frozen=True)
class WorkerReport:
    """What a controller sees of every worker at the end of a period (engine-measured, not piggybacked)."""

    tuples: np.ndarray  # int64: tuples each worker processed during the period
    busy_s: np.ndarray  # float64: seconds each worker spent processing during the period
    queue_len: np.ndarray  # float64: tuples queued at each worker at the end of the period
    active: np.ndarray  # bool: which workers are part of the topology now
    period_s: float  # length of the period
    now: float  # end of the period

    def measured_capacity(self) -> np.ndarray:
        """Tuples per second each worker could do when busy (0 where it did nothing)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(self.busy_s > 0, self.tuples / self.busy_s, 0.0)
        return rate
