"""The object engines hold, one per source: a strategy (kernel + parameters) and the state it routes with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .params import Param
from .state import State


@dataclass(frozen=True)
class Strategy:
    """How one grouping routes: compiled kernel, parameters, initial state, statistics, feedback hook."""

    name: str
    doc: str
    kernel: Callable[[np.ndarray, np.ndarray, State], None]  # (keys, out bins, state), updates state in place
    prepare: Callable[[int, int, Mapping[str, Any]], State]  # (workers, seed, params) -> fresh state
    params: tuple[Param, ...] = ()
    stats: Callable[[State], dict] = field(default=lambda st: {})
    # bins -> workers when bins are not workers (virtual workers); None: bin b is worker b
    to_workers: Callable[[State, np.ndarray], np.ndarray] | None = None
    # reacts to what acks carry (worker, reported load, signal); None: the strategy ignores feedback
    on_feedback: Callable[[State, np.ndarray, np.ndarray, np.ndarray], None] | None = None


class Grouping:
    """A stream partitioner for one source instance: `route` keys to workers, learn from `feedback`."""

    def __init__(self, strategy: Strategy, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        self._strategy = strategy
        self.name = strategy.name
        self.workers = workers
        self.seed = seed
        self.params = dict(params)
        self._state = strategy.prepare(workers, seed, self.params)

    def route(self, keys: np.ndarray) -> np.ndarray:
        """Chosen worker (int32) of each 64-bit key hash, in order; same result and state as one at a time."""
        keys = np.asarray(keys)
        if keys.ndim != 1:
            raise ValueError(f"route takes a one-dimensional array of key hashes (got shape {keys.shape})")
        if keys.dtype != np.uint64:
            if keys.size and keys.dtype.kind not in "iu":
                raise ValueError(f"route takes uint64 key hashes (got dtype {keys.dtype})")
            keys = keys.astype(np.uint64)  # signed hashes reinterpret bit for bit
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            self._strategy.kernel(np.ascontiguousarray(keys), out, self._state)
        if self._strategy.to_workers is not None:
            out = self._strategy.to_workers(self._state, out)
        return out

    def feedback(self, workers: np.ndarray, loads: np.ndarray, signals: np.ndarray) -> None:
        """Take what acks carried back: acking worker, its reported load, and its +1/-1/0 signal."""
        workers = np.asarray(workers, dtype=np.int32)
        loads = np.asarray(loads, dtype=np.float64)
        signals = np.asarray(signals, dtype=np.int8)
        if not (workers.shape == loads.shape == signals.shape) or workers.ndim != 1:
            raise ValueError("feedback takes three one-dimensional arrays of the same length")
        if workers.size and (workers.min() < 0 or workers.max() >= self.workers):
            raise ValueError(f"feedback names a worker outside [0, {self.workers})")
        if self._strategy.on_feedback is not None and workers.size:
            self._strategy.on_feedback(self._state, workers, loads, signals)

    def stats(self) -> dict:
        """Small JSON-able facts about the routing so far (messages, probes, head size, d, ...)."""
        return self._strategy.stats(self._state)

    def local_loads(self) -> np.ndarray:
        """Copy of this source's local load estimate per bin (tuples it sent to each)."""
        return self._state.loads.copy()

    def __getstate__(self) -> dict:
        # strategies hold compiled kernels and lambdas: pickle the name and look it up again on arrival
        state = self.__dict__.copy()
        state["_strategy"] = self._strategy.name
        return state

    def __setstate__(self, state: dict) -> None:
        from .registry import STRATEGIES

        state["_strategy"] = STRATEGIES[state["_strategy"]]
        self.__dict__.update(state)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items())
        shown = ", " + shown if shown else ""
        return f"Grouping({self.name}, workers={self.workers}, seed={self.seed}{shown})"
