"""The object engines hold, one per source: a strategy (kernel + parameters) and the state it routes with.

Every grouping, compiled here or registered from its own module, honours one protocol (`contract.Partitioner`); the
checks of its inputs are shared functions below, so all strategies refuse bad input the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .feedback import AckReport
from .params import Param
from .state import State

# --- input checks shared by every strategy ----------------------------------------------------------------------


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


# --- the compiled strategies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Strategy:
    """How one compiled grouping routes: kernel, parameters, initial state, resize, statistics, feedback hook."""

    name: str
    doc: str
    kernel: Callable[[np.ndarray, np.ndarray, State], None]  # (keys, out bins, state), updates state in place
    prepare: Callable[[int, int, Mapping[str, Any]], State]  # (workers, seed, params) -> fresh state
    resize: Callable[[State, int, int, Mapping[str, Any]], State]  # (state, workers, seed, params) -> state
    params: tuple[Param, ...] = ()
    stats: Callable[[State], dict] = field(default=lambda st: {})
    # reacts to what acks carry; None: the strategy ignores feedback
    on_feedback: Callable[[State, AckReport], None] | None = None


# every compiled strategy by name, as the catalogue (`registry`) declares them; a pickled grouping carries only its
# strategy's name and finds the strategy here when it arrives
STRATEGIES: dict[str, Strategy] = {}


class Grouping:
    """A compiled stream partitioner for one source instance: `route` keys to workers, learn from `feedback`."""

    def __init__(self, strategy: Strategy, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        self._strategy = strategy
        self.name = strategy.name
        self.workers = workers
        self.seed = seed
        self.params = dict(params)
        self._state = strategy.prepare(workers, seed, self.params)

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Chosen worker (int32) of each 64-bit key hash, in order; same result and state as one at a time.

        These strategies do not depend on time: `now` is checked and otherwise ignored.
        """
        keys = as_key_hashes(keys)
        if now is not None:
            check_now(now)
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            self._strategy.kernel(keys, out, self._state)
        return out

    def feedback(self, report: AckReport) -> None:
        """Take what the acks that reached this source carried (most compiled strategies ignore it)."""
        check_report(report, self.workers)
        if self._strategy.on_feedback is not None and len(report):
            self._strategy.on_feedback(self._state, report)

    def resize(self, workers: int) -> None:
        """Route over [0, workers) from now on; local estimates of removed workers are dropped."""
        workers = check_workers(workers)
        if workers != self.workers:
            self._state = self._strategy.resize(self._state, workers, self.seed, self.params)
            self.workers = workers

    def stats(self) -> dict:
        """Small JSON-able facts about the routing so far (messages, probes, head size, d, ...)."""
        return self._strategy.stats(self._state)

    def local_loads(self) -> np.ndarray:
        """Copy of this source's local load estimate per worker (tuples it sent to each, see `resize`)."""
        return self._state.loads.copy()

    def __getstate__(self) -> dict:
        # strategies hold compiled kernels and lambdas: pickle the name and look it up again on arrival
        state = self.__dict__.copy()
        state["_strategy"] = self._strategy.name
        return state

    def __setstate__(self, state: dict) -> None:
        state["_strategy"] = STRATEGIES[state["_strategy"]]
        self.__dict__.update(state)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items())
        shown = ", " + shown if shown else ""
        return f"Grouping({self.name}, workers={self.workers}, seed={self.seed}{shown})"
