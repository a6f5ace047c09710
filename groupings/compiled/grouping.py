"""A compiled grouping: one strategy (kernel, parameters, state functions) and the state one source routes with.

Every compiled strategy is declared once in `catalog.py`; a pickled grouping carries only its strategy's name and
finds the strategy again in `STRATEGIES` when it arrives (Ray ships groupings between processes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..checks import as_key_hashes, check_now, check_report, check_workers
from ..feedback import AckReport
from ..params import Param
from .state import State


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

    @property
    def takes_feedback(self) -> bool:
        """False when the strategy ignores what acks carry: engines may then skip building its reports."""
        return self._strategy.on_feedback is not None

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
