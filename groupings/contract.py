"""The contract between strategies and engines: what an engine may ask of a grouping, and nothing more.

- `Partitioner`: every grouping, one instance per source: `route`, `feedback`, `resize`, `stats`.
- `Replicated`: a grouping that routes with a controller shared by the run (gedik, albic). An engine that keeps
  the controller elsewhere (Ray's controller actor) asks each source's grouping for a `snapshot()` of what the
  controller reads, steps the controller over those snapshots, and hands each source a copy of every new version
  through `adopt()`. The simulator shares one controller object and never needs either.
- `Controller` (`groupings.control`): the shared function, stepped once per period over the sources' groupings
  (or their snapshots) and the workers' `WorkerReport`.
- `Delegation`: the worker side of a strategy's feedback (cg's busy/idle signals), one per run.
- `Adaptive`: a small base an adaptive grouping may start from: checked workers, seed and params, a repr, and
  the registry's factory.

Engines name no strategy: they take a strategy's parts from the registry and use them through these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .checks import check_now, check_workers
from .control import Controller
from .feedback import AckReport

__all__ = ["Adaptive", "Controller", "Delegation", "Partitioner", "Replicated"]


@runtime_checkable
class Partitioner(Protocol):
    """What every grouping instance offers engines (one instance per source)."""

    name: str
    workers: int  # active workers now: route answers in [0, workers)
    seed: int
    params: dict

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Worker (int32) of each uint64 key hash, in order; the same as routing them one at a time at `now`."""

    def feedback(self, report: AckReport) -> None:
        """Take what the acks that reached this source carried. A grouping whose `takes_feedback` attribute is
        False (optional; default True) ignores them, and engines may never call this."""

    def resize(self, workers: int) -> None:
        """The active workers become [0, workers): workers join or leave at the top index."""

    def stats(self) -> dict:
        """Small JSON-able facts about the routing so far."""


@runtime_checkable
class Replicated(Partitioner, Protocol):
    """A grouping that routes with a shared controller, which may live in another process."""

    controller: Controller

    def snapshot(self) -> Any:
        """A picklable stand-in for this grouping at the controller: the statistics its `step` reads (taking
        them restarts what counts since the last snapshot)."""

    def adopt(self, controller: Controller) -> Controller:
        """Route with `controller` (a copy of the run's, without statistics) from the next key on; returns it."""


@runtime_checkable
class Delegation(Protocol):
    """The worker side of a strategy's feedback: it decides the signal a worker's ack carries."""

    def signal(self, worker: int, source: int, now: float, utilization: float) -> int:
        """The signal (+1 more, -1 less, 0 none) worker `worker`'s ack to `source` carries at `now`."""

    def resize(self, workers: int) -> None:
        """Workers [0, workers) from now on."""

    def stats(self) -> dict:
        """Small JSON-able facts about its decisions."""


class Adaptive:
    """What every adaptive grouping repeats, once: its worker count checked, its seed and resolved parameters kept,
    a repr that shows them, and the factory the registry calls (one instance per source)."""

    name = ""

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        self.workers = check_workers(workers)
        self.seed = int(seed)
        self.params = dict(params)
        self.clock = 0.0  # the latest engine time seen, from route or from an ack report (never goes back)

    def see(self, now: Any) -> float:
        """Advance `clock` to `now` (seconds, checked; None leaves it) and return it."""
        now = check_now(now)
        if now is not None and now > self.clock:
            self.clock = now
        return self.clock

    @classmethod
    def factory(cls, workers: int, seed: int, params: Mapping[str, Any], controller: Any = None) -> Adaptive:
        """The registry's factory; a strategy with a shared controller overrides it to pass the controller on."""
        return cls(workers, seed, params)

    def shown(self) -> dict:
        """What the repr shows besides workers and seed (the parameters, by default)."""
        return self.params

    def __repr__(self) -> str:
        shown = "".join(f", {k}={v}" for k, v in self.shown().items())
        return f"{type(self).__name__}(workers={self.workers}, seed={self.seed}{shown})"
