"""Gedik's controller: one partitioning function for every source of a run, rebuilt from their merged counters.

At the end of a period it merges the sources' sliding lossy counters and rebuilds p = <H_p, H_c> with Scan, Redist
or Readj (`gedik_build`) when N changed, at the first period with enough data, or when the measured imbalance
leaves alpha_n and the new p lowers the estimated imbalance b by at least min_gain (the choices made where the
paper is open are listed in `gedik`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import as_key_hashes, check_workers
from ..control import Controller
from ..feedback import WorkerReport
from ..groupmap import Versions
from ..lossy import SlidingLossyCounter, merged
from . import gedik_build as gb
from . import gedik_cost as gcost
from .gedik_function import PartitioningFunction, Ring, consistent_only, make_ring, moved_share


class _Index:
    """Estimated frequencies by key, through one sort (np.unique and np.isin are slow on a million hashes)."""

    def __init__(self, keys: np.ndarray, freqs: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")
        self.keys, self.freqs = keys[order], freqs[order]
        if self.keys.size > 1 and not (self.keys[1:] != self.keys[:-1]).all():
            raise ValueError("plan takes distinct keys")

    def _where(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.keys.size == 0:
            return np.zeros(wanted.size, np.int64), np.zeros(wanted.size, bool)
        where = np.minimum(np.searchsorted(self.keys, wanted), self.keys.size - 1)
        return where, self.keys[where] == wanted

    def has(self, wanted: np.ndarray) -> np.ndarray:
        """Whether each wanted key is indexed."""
        return self._where(wanted)[1]

    def frequency(self, wanted: np.ndarray) -> np.ndarray:
        """Frequency of each wanted key; 0 for keys not indexed."""
        where, hit = self._where(wanted)
        return np.where(hit, self.freqs[where], 0.0) if self.keys.size else np.zeros(wanted.size)


# --- planning a new version -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A candidate p^{t+1} with what it would cost and give, estimated on the frequencies it was built from."""

    function: PartitioningFunction
    reason: str
    migration_cost: float  # M (Eq. 9): known keys exactly, untracked ones by the ring share that changes owner
    relative_migration: float  # m = M / L-bar_s (Eq. 12)
    imbalance_before: float  # b (Eq. 11) of the current p on the same frequencies
    imbalance_after: float  # b of the candidate
    build_s: float  # time Scan / Redist / Readj took

    @property
    def gain(self) -> float:
        """Relative drop of the estimated b from the current function to the candidate."""
        return 1.0 - self.imbalance_after / self.imbalance_before if self.imbalance_before > 0 else 0.0


# --- the controller ---------------------------------------------------------------------------------------------


class GedikController(Controller):
    """One partitioning function shared by all sources, rebuilt from their merged lossy counters."""

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        workers = check_workers(workers)
        self.params = dict(params)
        self._rings: dict[int, Ring] = {}
        super().__init__(workers, seed, float(params["period"]), Versions(consistent_only(0, self.ring(workers))))
        self.kinds = gcost.parse_resources(str(params["resources"]))
        self.alphas = (float(params["alpha_s"]), float(params["alpha_c"]), float(params["alpha_n"]))
        self._queue: np.ndarray | None = None  # queue lengths of the last report, to count arrivals
        self._from_data = False  # whether some version was built from frequencies yet
        self.events: list[dict] = []  # one row per installed version
        self.declined = 0  # rebuilds planned on imbalance that would not lower b by min_gain
        self.last: dict = {}

    # the structure

    def ring(self, channels: int) -> Ring:
        """The consistent hash over `channels` channels (cached)."""
        if channels not in self._rings:
            self._rings[channels] = make_ring(channels, int(self.params["replicas"]))
        return self._rings[channels]

    def function(self, version: int | None = None) -> PartitioningFunction:
        """The partitioning function of `version` (default: current); only the current and previous are kept."""
        return self.versions.get(version)

    def lookup(self, keys: np.ndarray, version: int | None = None) -> np.ndarray:
        """Channel (int32) of each key hash under `version` (default: current); the previous version is kept."""
        return self.function(version).lookup(keys)

    def delta(self, channels: int | None = None) -> float:
        """Eq. 17's tracking threshold for `channels` channels (default: the active ones)."""
        n = self.workers if channels is None else channels
        p = self.params
        return gcost.delta(self.kinds, self.alphas, float(p["sigma"]), n, int(p["domain"]))

    def eps(self, channels: int | None = None) -> float:
        """The lossy counters' error: eps_share of delta."""
        return min(1.0, float(self.params["eps_share"]) * self.delta(max(2, channels or self.workers)))

    # the sources

    def resize(self, workers: int) -> None:
        """Workers join or leave at the top index: leaving ones hand their keys over at once (sources must stop
        routing to them now), joining ones get keys at the next step."""
        super().resize(workers)
        if workers < self.function().channels:
            keys, freqs, slack = self.frequencies()
            self.install(self.plan(keys, freqs, slack, "resize"))

    def attach(self, grouping: object) -> None:
        """A source joins (once); its counter takes the current error target."""
        if any(g is grouping for g in self.sources):
            return
        super().attach(grouping)
        counter = getattr(grouping, "counter", None)
        if isinstance(counter, SlidingLossyCounter):
            counter.set_eps(self.eps())

    def frequencies(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Merged estimate over the sources' sliding windows: keys, frequencies c_a / n, and the undercount bound.

        Empty until the counters together saw a full window of 1/eps items (estimates before that are noise).
        """
        parts = [c.entries() for c in self._counters()]
        keys, counts, seen, under = merged(parts)
        if seen == 0 or seen < min(p.width for p in parts):
            return np.zeros(0, np.uint64), np.zeros(0), 0.0
        return keys, counts / seen, under / seen

    def _counters(self) -> list[SlidingLossyCounter]:
        return [g.counter for g in self.sources if isinstance(getattr(g, "counter", None), SlidingLossyCounter)]

    # rebuilding

    def plan(self, keys: np.ndarray, freqs: np.ndarray, slack: float = 0.0, reason: str = "manual") -> Plan:
        """Build p^{t+1} for the active channels from estimated frequencies (keys below delta - slack untracked)."""
        keys = as_key_hashes(keys)
        freqs = np.asarray(freqs, dtype=np.float64)
        if keys.shape != freqs.shape or (freqs.size and (freqs.min() < 0 or not np.isfinite(freqs).all())):
            raise ValueError("plan takes keys and as many finite non-negative frequencies")
        index = _Index(keys, freqs)
        p, n, cur = self.params, self.workers, self.function()
        sigma, domain = float(p["sigma"]), int(p["domain"])
        cut = gcost.delta(self.kinds, self.alphas, sigma, n, domain)
        pick = (freqs >= cut - slack) & (freqs > 0) if n > 1 else np.zeros(keys.size, bool)
        if gcost.QUADRATIC in self.kinds and pick.any():
            cut = gcost.refined_delta(self.kinds, self.alphas, sigma, n, domain, freqs[pick])
            pick &= freqs >= cut - slack
        order = np.lexsort((keys[pick], -freqs[pick]))  # decreasing frequency, ties by key
        tracked, tf = keys[pick][order], freqs[pick][order]
        # D_o: keys of the current explicit hash that are no longer tracked
        dropped = cur.keys[~_Index(tracked, tf).has(cur.keys)]
        dropped_f = index.frequency(dropped)
        ring = self.ring(n)
        started = time.perf_counter()
        placement = gb.build(
            str(p["build"]),
            tf,
            cur.lookup(tracked),
            ring.channel_of(tracked),
            n,
            self.kinds,
            self.alphas,
            str(p["utility"]),
            dropped_f=dropped_f,
            dropped_moves=cur.lookup(dropped) != ring.channel_of(dropped),
        )
        build_s = time.perf_counter() - started
        fn = PartitioningFunction(cur.version + 1, ring, tracked, placement.channels, tf, cut)
        known = np.concatenate([keys, dropped[~index.has(dropped)]])
        known_f = np.concatenate([freqs, np.zeros(known.size - keys.size)])
        before, after = cur.lookup(known), fn.lookup(known)  # where each known key goes, read by both measures
        cost, relative = self._migration(cur, fn, before, after, known_f)
        return Plan(
            fn,
            reason,
            cost,
            relative,
            self._imbalance(cur, before, known_f),
            self._imbalance(fn, after, known_f),
            build_s,
        )

    def _rest(self, known_f: np.ndarray) -> tuple[float, float]:
        """The keys not known: how many there are, and their frequency each if all were equal (worst case)."""
        unknown = max(int(self.params["domain"]) - known_f.size, 0)
        mass = max(1.0 - float(known_f.sum()), 0.0)
        return float(unknown), (mass / unknown if unknown else 0.0)

    def _rest_load(self, kind: int, known_f: np.ndarray) -> float:
        unknown, each = self._rest(known_f)
        return unknown * float(gcost.beta(kind, each))

    def _imbalance(self, fn: PartitioningFunction, channels: np.ndarray, known_f: np.ndarray) -> float:
        """b (Eq. 11) of `fn`: known keys on their `channels` under it, the rest spread by the ring's shares."""
        shares = fn.ring.shares()
        ratios = []
        for kind in self.kinds:
            loads = gcost.channel_loads(known_f, channels, fn.channels, kind) + self._rest_load(kind, known_f) * shares
            ratios.append(gcost.imbalance(loads))
        return gcost.relative_imbalance(tuple(ratios), self.alphas)

    def _migration(self, a: PartitioningFunction, b: PartitioningFunction, on_a: np.ndarray, on_b: np.ndarray,
                   known_f: np.ndarray) -> tuple[float, float]:
        """M (Eq. 9) from a to b (the known keys' channels under each: `on_a`, `on_b`) and m = M / L-bar_s (Eqs.
        10, 12)."""
        kind = self.kinds[0]
        cost = gcost.migration_cost(known_f, on_a, on_b, kind)
        rest = self._rest_load(kind, known_f)
        cost += rest * moved_share(a.ring, b.ring)  # untracked keys move where H_c changes owner
        ideal = (float(gcost.beta(kind, known_f).sum()) + rest) / b.channels
        return cost, (cost / ideal if ideal > 0 else 0.0)

    def install(self, plan: Plan, at: float | None = None) -> None:
        """Make the planned function current (the one before it stays available to `lookup`)."""
        fn = plan.function
        if fn.version != self.version + 1:
            raise ValueError(f"plan was made for version {fn.version - 1}, the current one is {self.version}")
        self.versions.install(fn)
        self.last = {
            "version": fn.version,
            "at": at,
            "reason": plan.reason,
            "channels": fn.channels,
            "explicit_keys": int(fn.keys.size),
            "delta": fn.delta,
            "migration_cost": plan.migration_cost,
            "relative_migration": plan.relative_migration,
            "imbalance_before": plan.imbalance_before,
            "imbalance_after": plan.imbalance_after,
            "build_s": plan.build_s,
        }
        self.events.append(self.last)

    def measured_imbalance(self, report: WorkerReport) -> float | None:
        """max/min over active channels of tuples that arrived this period per unit of measured capacity."""
        n = self.function().channels
        tuples = np.asarray(report.tuples, dtype=np.float64)[:n]
        queue = np.asarray(report.queue_len, dtype=np.float64)[:n]
        before = self._queue[:n] if self._queue is not None and self._queue.size >= n else np.zeros(n)
        self._queue = np.asarray(report.queue_len, dtype=np.float64).copy()
        arrived = np.maximum(tuples + queue - before[: tuples.size], 0.0)
        capacity = report.measured_capacity()[:n]
        known = capacity > 0
        capacity = np.where(known, capacity, np.median(capacity[known]) if known.any() else 1.0)
        active = np.asarray(report.active, dtype=bool)[:n]
        load = (arrived / capacity)[active]
        if load.size < 2 or load.sum() <= 0:
            return None
        return float(load.max() / load.min()) if load.min() > 0 else math.inf

    def estimated_imbalance(self, keys: np.ndarray, freqs: np.ndarray) -> float:
        """Communication r_n = max/min of the current p on estimated frequencies (untracked keys by ring share)."""
        fn = self.function()
        loads = gcost.channel_loads(freqs, fn.lookup(keys), fn.channels, gcost.LINEAR)
        return gcost.imbalance(loads + max(1.0 - float(freqs.sum()), 0.0) * fn.ring.shares())

    def step(self, report: WorkerReport) -> bool:
        """End of a period: merge the counters, and rebuild p when N changed, at first data, or on imbalance."""
        if not isinstance(report, WorkerReport):
            raise TypeError(f"step takes a WorkerReport (got {type(report).__name__})")
        target = self.eps()
        for counter in self._counters():
            counter.set_eps(target)
        measured = self.measured_imbalance(report)
        keys, freqs, slack = self.frequencies()
        if self.workers != self.function().channels:
            reason = "resize"
        elif keys.size == 0:
            return False
        elif not self._from_data:
            reason = "first"
        else:
            # the workers' measurement when the engine made one, else the counters' estimate
            r = measured if measured is not None else self.estimated_imbalance(keys, freqs)
            if r <= self.alphas[2]:
                return False
            reason = "imbalance"
        plan = self.plan(keys, freqs, slack, reason)
        # Eq. 13 weighs a one-off migration against a lasting imbalance and would refuse most drift rebuilds:
        # a rebuild on imbalance is installed when it lowers b by min_gain (rebuilding cannot fix what
        # the structure or uneven machines cause, and then it is declined instead of repeated every period)
        if reason == "imbalance" and plan.gain < float(self.params["min_gain"]):
            self.declined += 1
            return False
        self.install(plan, at=report.now)
        self._from_data = self._from_data or keys.size > 0
        return True

    def stats(self) -> dict:
        """Version, channels, explicit-hash and counter sizes, thresholds, and the last rebuild's costs."""
        counters = self._counters()
        return {
            "version": self.version,
            "channels": self.function().channels,
            "explicit_keys": int(self.function().keys.size),
            "counter_entries": int(sum(c.size for c in counters)),
            "window_items": int(sum(c.seen for c in counters)),
            "delta": self.delta(),
            "eps": self.eps(),
            "rebuilds": len(self.events),
            "declined": self.declined,
            "last": dict(self.last),
        }
