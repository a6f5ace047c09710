"""Gedik's partitioning functions at run time: each source's splitter, and the registration of the strategy with its
controller (`gedik_controller`, one per run, shared by all sources).

One controller per run holds the partitioning function p = <H_p, H_c> (see `gedik_function`) for every
source; each source looks keys up in it and counts them in its own sliding lossy counter as it routes. At the
end of a period the controller merges the sources' counters and rebuilds p with Scan, Redist or Readj (see
`gedik_build`) when N changed, at the first period with enough data, or when the measured imbalance leaves
alpha_n and the new p lowers the estimated imbalance b by at least min_gain. It keeps the previous version,
so the engine finds the keys that moved by looking them up under both.

Choices where the paper is open or inconsistent (each also noted where it is made):

    * An item's load is beta_k(f), not f * beta_k(f): the toy example and the derivation of delta use it so.
    * Migration normaliser m-bar and the starting migration m over D_a and D_o, as in Eq. 18 (not the
      pseudocode's sets); Readj scores candidates against the current utility, not u = 0; Redist keeps the set
      of unplaced keys explicitly; Readj applies only readjustments that lower the utility.
    * Lossy counting error eps = eps_share * delta (Manku-Motwani's eps = s/10); when N changes delta does,
      and each counter of the sliding window takes the new eps when it next restarts.
    * Frequencies are c_a / n (lower bounds), and none are used until the counters saw one window of 1/eps
      items: before that every key would pass the threshold.
    * The quadratic post-filter divides the estimated total load by N (the paper omits it).
    * The paper gives no trigger for rebuilding on drift: here it is the workers' measured load per unit of
      capacity (or, when the engine measured nothing, the counters' estimate) leaving alpha_n, and a rebuild
      is kept only when it lowers b by min_gain.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import registry
from ..checks import as_key_hashes, check_now, check_report, check_workers
from ..feedback import AckReport
from ..jit import hot
from ..lossy import SIZE, SlidingLossyCounter, count, grown
from ..params import Param, at_least_one, fraction, positive
from . import gedik_build as gb
from . import gedik_cost as gcost
from .gedik_controller import GedikController
from .gedik_function import lookup_channel

# --- the source's per-tuple loop ------------------------------------------------------------------------------


@hot
def _route(keys, out, start, lossy, t):
    """Count each key in the source's sliding lossy counter and look it up; stop early when a counter is full."""
    for j in range(start, keys.size):
        key = keys[j]
        out[j] = lookup_channel(key, t)
        if count(lossy, key):
            return j + 1
    return keys.size


# --- the source side --------------------------------------------------------------------------------------------


@dataclass
class GedikSnapshot:
    """A source's statistics as the controller reads them: its sliding lossy counter."""

    counter: SlidingLossyCounter


class GedikGrouping:
    """One source's splitter: counts its keys in a sliding lossy counter and routes them with the controller's p."""

    name = "gedik"
    takes_feedback = False  # its controller measures the workers itself: engines build it no ack reports

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any], controller: GedikController) -> None:
        if not isinstance(controller, GedikController):
            raise TypeError(f"gedik routes with a GedikController (got {type(controller).__name__})")
        self.seed = seed
        self.params = dict(params)
        self.controller = controller
        self.counter = SlidingLossyCounter(int(params["window"]), controller.eps(workers), int(params["counters"]))
        self.messages = 0
        controller.attach(self)

    @property
    def workers(self) -> int:
        """Channels of the partitioning function routed with now."""
        return self.controller.function().channels

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Channel (int32) of each key hash by LOOKUP under the controller's current version, counting each key."""
        keys = as_key_hashes(keys)
        check_now(now)
        out = np.empty(keys.size, dtype=np.int32)
        tables = self.controller.function().tables
        done = 0
        while done < keys.size:
            lossy = self.counter.lossy
            done = _route(keys, out, done, lossy, tables)
            if int(lossy.meta[:, SIZE].max()) >= lossy.keys.shape[1]:
                self.counter.lossy = grown(lossy)
        self.messages += keys.size
        return out

    def snapshot(self) -> GedikSnapshot:
        """A copy of the lossy counter, for a controller in another process."""
        return GedikSnapshot(copy.deepcopy(self.counter))

    def adopt(self, controller: GedikController) -> GedikController:
        """Route with `controller` (a replica of the run's) from now on; the counter follows its error target."""
        controller.sources = [self]
        self.controller = controller
        self.counter.set_eps(controller.eps())
        return controller

    def feedback(self, report: AckReport) -> None:
        """Acks carry nothing Gedik uses (the controller measures the workers itself); their ids are checked."""
        c = self.controller
        previous = c.function(c.version - 1).channels if c.version > 0 else 0
        check_report(report, max(self.workers, previous))  # acks from a version just replaced may still arrive

    def resize(self, workers: int) -> None:
        """Nothing to do at the source: the controller rebuilds p for the new N."""
        check_workers(workers)

    def stats(self) -> dict:
        """Messages routed, the version routed with, and this source's counter size."""
        return {
            "messages": self.messages,
            "version": self.controller.version,
            "counter_entries": self.counter.size,
            "window_items": self.counter.seen,
        }

    def __repr__(self) -> str:
        return f"GedikGrouping(workers={self.workers}, seed={self.seed}, version={self.controller.version})"


# --- registration -----------------------------------------------------------------------------------------------


def _alpha_rule(value: float, workers: int, values: Mapping[str, Any]) -> str | None:
    return None if value >= 1 else "must be >= 1 (max/min load ratio tolerated)"


def _resources_rule(value: str, workers: int, values: Mapping[str, Any]) -> str | None:
    try:
        gcost.parse_resources(value)
    except ValueError as err:
        return str(err)
    return None


def _window_rule(value: int, workers: int, values: Mapping[str, Any]) -> str | None:
    return None if value >= values["counters"] - 1 else "must hold at least counters - 1 items"


PARAMS = (
    Param("alpha", float, 1.2, _alpha_rule, "imbalance tolerated, max/min load, for every resource"),
    Param("alpha_s", float, lambda n, v: v["alpha"], _alpha_rule, "memory imbalance tolerated", shown="alpha"),
    Param("alpha_c", float, lambda n, v: v["alpha"], _alpha_rule, "computation imbalance tolerated", shown="alpha"),
    Param("alpha_n", float, lambda n, v: v["alpha"], _alpha_rule, "communication imbalance tolerated", shown="alpha"),
    Param("sigma", float, 0.1, fraction, "share of the tolerated imbalance left to untracked keys (delta scaler)"),
    Param("resources", str, "LCL", _resources_rule, "resource functions beta_s beta_c beta_n, each C, L or Q"),
    Param("build", str, "redist", None, "construction algorithm", choices=gb.BUILDS),
    Param("utility", str, "apm", None, "utility U(rho, gamma) ranking placements", choices=gcost.UTILITIES),
    Param("counters", int, 3, lambda v, n, vs: None if v >= 2 else "must be at least 2", "lossy counters per window"),
    Param(
        "window",
        int,
        100_000,
        _window_rule,
        "sliding window W of each source's lossy counters, in tuples (quadratic resources need W >> 10/delta)",
    ),
    Param("eps_share", float, 0.1, fraction, "lossy counting error eps as a share of delta"),
    Param("replicas", int, 1000, at_least_one, "consistent-hash ring points per channel"),
    Param("domain", int, 1_000_000, at_least_one, "estimated number of distinct keys |D| (quadratic resources)"),
    Param("period", float, 1.0, positive, "seconds between two controller steps", duration=True),
    Param("min_gain", float, 0.05, fraction, "drop of estimated imbalance b a rebuild on imbalance must bring"),
)


def _make_controller(workers: int, seed: int, params: Mapping[str, Any]) -> GedikController:
    """The run's controller: one partitioning function for every source."""
    return GedikController(workers, seed, params)


def _make(workers: int, seed: int, params: Mapping[str, Any], controller: Any = None) -> GedikGrouping:
    """A source's splitter; without a shared controller it gets a private one."""
    if controller is None:
        controller = GedikController(workers, seed, params)
    return GedikGrouping(workers, seed, params, controller)


registry.register(
    "gedik",
    _make,
    params=PARAMS,
    doc="Gedik's partitioning functions: explicit hash for frequent keys over a consistent hash, rebuilt by "
    "a shared controller with Scan/Redist/Readj trading balance against migration",
    controller=_make_controller,
)
