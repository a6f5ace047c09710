"""Input checks shared by every strategy, so that all of them refuse bad input the same way, and the per-worker
resize they share."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .feedback import AckReport


def check_workers(workers: Any) -> int:
    """A worker count as int; anything but a positive integer is a ValueError."""
    if isinstance(workers, (bool, np.bool_)) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be a positive integer (got {workers!r})")
    return int(workers)


def per_worker(values: np.ndarray, workers: int, fill: Any) -> np.ndarray:
    """A per-worker array for `workers` workers: cut, or padded with `fill` (workers join or leave at the top index)."""
    out = np.full(workers, fill, dtype=values.dtype)
    keep = min(workers, values.size)
    out[:keep] = values[:keep]
    return out


def as_key_hashes(keys: Any) -> np.ndarray:
    """Keys as a contiguous one-dimensional uint64 array; signed integers reinterpret bit for bit."""
    keys = np.asarray(keys)
    if keys.ndim != 1:
        raise ValueError(f"route takes a one-dimensional array of key hashes (got shape {keys.shape})")
    if keys.dtype != np.uint64:
        if keys.size and keys.dtype.kind not in "iu":
            raise ValueError(f"route takes uint64 key hashes (got dtype {keys.dtype})")
        keys = keys.astype(np.uint64)
    return np.ascontiguousarray(keys)


def check_now(now: Any) -> float | None:
    """The engine clock as a float, or None; NaN and infinities are ValueErrors."""
    if now is None:
        return None
    now = float(now)
    if not math.isfinite(now):
        raise ValueError(f"now must be a finite time in seconds (got {now})")
    return now


def check_report(report: Any, workers: int) -> AckReport:
    """The report itself, once it is known to be an AckReport naming only workers in [0, workers)."""
    if not isinstance(report, AckReport):
        raise TypeError(f"feedback takes an AckReport (got {type(report).__name__})")
    w = report.workers
    if len(w) and (int(np.min(w)) < 0 or int(np.max(w)) >= workers):
        raise ValueError(f"feedback names a worker outside [0, {workers})")
    return report
