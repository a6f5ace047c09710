"""Load-aware shuffle grouping ("lasg"): Storm 2.x's LoadAwareShuffleGrouping, the balancer a Storm user has today.

Shuffle grouping that sends less to workers whose input queue fills up:

    * Load of a worker: the fraction of its receive queue in use (queued tuples / queue capacity, in [0, 1]),
      as Storm's LoadMapping reports it. Here it is the last `AckReport.load` this source heard from the worker;
      a worker never heard from counts as load 0. (Storm counts a task it has no connection to as fully
      loaded; a source here learns about a worker only from the acks of tuples it sent there.)
    * Weights, refreshed every `refresh` seconds of engine time (Storm's load timer fires every second): each
      worker has an integer weight in [0, 100], 100 at start. At a refresh, a worker whose load is within 0.05
      of the least loaded worker's gains 1, any other loses 10: slow to trust, quick to back off. With
      `weights=linear` the weight is instead 101 - 100 * load, truncated (the formula of Storm 1.x).
    * Choice array: `slots` entries (Storm: 1000); worker w fills floor(weight_w / sum of weights * slots) of
      them in worker order, each entry still empty copies a uniformly drawn earlier one, then the array is
      shuffled (Fisher-Yates). Tuples walk it round robin from its start; a refresh rebuilds it and restarts.

What differs from Storm: the random generator is a seeded splitmix64 (so runs repeat); Storm's locality
awareness (prefer workers in the same process, host or rack) is left out, since every worker of the emulator
shares one host; refreshes happen on the engine clock at multiples of `refresh` seconds, and when routing
resumes after several refresh instants went by unseen the missed weight steps are applied at once; the array
holds at least one entry per worker, so no worker is starved by rounding alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import registry
from ..checks import as_key_hashes, check_report, check_workers, per_worker
from ..contract import Adaptive
from ..feedback import AckReport
from ..hashing import bucket, mix64
from ..jit import hot
from ..params import Param, at_least_one, positive

MAX_WEIGHT = 100  # a worker's weight at start, and at most
GROW = 1  # weight gained at a refresh by a worker about as idle as the least loaded one
SHRINK = 10  # weight lost at a refresh by any other worker
TOLERANCE = 0.05  # "about as idle": load within this of the least loaded worker's
STEP, LINEAR = 0, 1
_MODES = {"step": STEP, "linear": LINEAR}
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK64 = (1 << 64) - 1

PARAMS = (
    Param("refresh", float, 1.0, positive, "seconds of engine time between two recomputations of the weights",
          duration=True),
    Param("slots", int, 1000, at_least_one, "entries of the shuffled choice array (at least one per worker)"),
    Param(
        "weights",
        str,
        "step",
        None,
        "step: +1 near the least loaded, -10 otherwise (Storm 2.x); linear: 101 - 100 load (Storm 1.x)",
        choices=tuple(_MODES),
    ),
)


@hot
def _draw(rng, k):
    """Uniform integer in [0, k) from the instance's splitmix64 generator."""
    rng[0] += _GOLDEN
    return bucket(mix64(rng[0], np.uint64(0)), k)


@hot
def update_weights(weights, loads, steps, mode):
    """Apply `steps` refreshes of the weights to the loads last heard (clipped to [0, 1])."""
    n = weights.size
    if mode == LINEAR:
        for w in range(n):
            weights[w] = np.int64(101.0 - 100.0 * loads[w])
        return
    least = loads[0]
    for w in range(1, n):
        least = min(least, loads[w])
    for _ in range(steps):
        for w in range(n):
            if loads[w] <= least + TOLERANCE:
                weights[w] = min(MAX_WEIGHT, weights[w] + GROW)
            else:
                weights[w] = max(0, weights[w] - SHRINK)


@hot
def fill_choices(weights, choices, rng):
    """Entries in proportion to the weights, the rest copied from random earlier entries, then shuffled."""
    n, size = weights.size, choices.size
    total = 0
    for w in range(n):
        total += weights[w]
    filled = 0
    if total > 0:
        for w in range(n):
            count = np.int64(weights[w] / total * size)
            for _ in range(count):
                if filled < size:
                    choices[filled] = w
                    filled += 1
        if filled == 0:  # rounding can leave even the heaviest worker just short of one entry
            heaviest = 0
            for w in range(1, n):
                if weights[w] > weights[heaviest]:
                    heaviest = w
            choices[0] = heaviest
            filled = 1
        while filled < size:
            choices[filled] = choices[_draw(rng, filled)]
            filled += 1
    else:
        for i in range(size):
            choices[i] = i % n
    for i in range(size - 1, 0, -1):
        j = _draw(rng, i + 1)
        choices[i], choices[j] = choices[j], choices[i]


@hot
def hear_loads(workers, load, loads, heard):
    """Each acking worker's load, clipped to [0, 1], in report order (the most recent wins)."""
    for i in range(workers.size):
        loads[workers[i]] = min(max(load[i], 0.0), 1.0) if not math.isnan(load[i]) else load[i]
        heard[workers[i]] = True


@hot
def route_lasg(out, choices, cursor, sent):
    """Walk the choice array round robin, one entry per tuple."""
    size = choices.size
    i = cursor[0]
    for j in range(out.size):
        i += 1
        if i >= size:
            i = 0
        w = choices[i]
        out[j] = w
        sent[w] += 1
    cursor[0] = i


class LoadAwareShuffle(Adaptive):
    """One source's load-aware shuffle grouping: a weighted, shuffled choice array walked round robin."""

    name = "lasg"

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        super().__init__(workers, seed, params)
        self._mode = _MODES[self.params["weights"]]
        self._weights = np.full(self.workers, MAX_WEIGHT, dtype=np.int64)
        self._loads = np.zeros(self.workers)  # last load heard from each worker
        self._heard = np.zeros(self.workers, dtype=bool)
        self._sent = np.zeros(self.workers, dtype=np.int64)
        self._rng = np.array([self.seed & _MASK64], dtype=np.uint64)
        self._cursor = np.array([-1], dtype=np.int64)
        self._tick = 0  # refresh instants are multiples of `refresh`; the weights are those of this one
        self._refreshes = 0
        self._messages = 0
        self._choices = np.empty(0, dtype=np.int32)
        # as Storm does when a grouping is prepared: one update with every load at 0 (equal weights)
        update_weights(self._weights, self._loads, 1, self._mode)
        self._rebuild()

    def _rebuild(self) -> None:
        size = max(self.params["slots"], self.workers)
        if self._choices.size != size:
            self._choices = np.empty(size, dtype=np.int32)
        fill_choices(self._weights, self._choices, self._rng)
        self._cursor[0] = -1

    def _advance(self, now: float | None) -> None:
        """Refresh the weights if the engine clock passed a refresh instant since the last refresh."""
        tick = math.floor(self.see(now) / self.params["refresh"])
        if tick > self._tick:
            # with fixed loads every weight reaches its bound within MAX_WEIGHT steps: more change nothing
            steps = min(tick - self._tick, MAX_WEIGHT)
            self._tick = tick
            update_weights(self._weights, self._loads, steps, self._mode)
            self._rebuild()
            self._refreshes += 1

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Worker (int32) of each tuple, in order; keys are ignored. `now` (seconds) may trigger a refresh."""
        keys = as_key_hashes(keys)
        self._advance(now)
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            route_lasg(out, self._choices, self._cursor, self._sent)
            self._messages += keys.size
        return out

    def feedback(self, report: AckReport) -> None:
        """Remember the newest load each acking worker reported; it counts at the next refresh."""
        check_report(report, self.workers)
        self.see(report.now)
        if not len(report):
            return
        # compiled: np.unique sorts, and a sort lets go of the GIL the engine's stepping thread then waits to get back
        hear_loads(np.asarray(report.workers, np.int64), np.asarray(report.load, np.float64), self._loads,
                   self._heard)

    def resize(self, workers: int) -> None:
        """Workers [0, workers) from now on: a newcomer starts at load 0 (never heard from) and its weight.

        The choice array is rebuilt at once with the weights as they are (no refresh step).
        """
        workers = check_workers(workers)
        if workers == self.workers:
            return
        self._weights = per_worker(self._weights, workers, MAX_WEIGHT if self._mode == STEP else 101)  # load 0's
        self._loads = per_worker(self._loads, workers, 0.0)
        self._heard = per_worker(self._heard, workers, False)
        self._sent = per_worker(self._sent, workers, 0)
        self.workers = workers
        self._rebuild()

    def stats(self) -> dict:
        """Messages, refreshes, and the spread of the current weights."""
        return {
            "messages": self._messages,
            "refreshes": self._refreshes,
            "min_weight": int(self._weights.min()),
            "max_weight": int(self._weights.max()),
            "starved": int(np.count_nonzero(self._weights == 0)),
            "heard": int(np.count_nonzero(self._heard)),
        }

    def weights(self) -> np.ndarray:
        """Copy of the current weight of every worker."""
        return self._weights.copy()

    def local_loads(self) -> np.ndarray:
        """Tuples this source sent to each worker (the messages of a removed worker are dropped)."""
        return self._sent.astype(np.float64)


registry.register(
    "lasg",
    LoadAwareShuffle.factory,
    params=PARAMS,
    doc="load-aware shuffle grouping (Storm 2.x): shuffled choice array weighted by the workers' queue load",
)
