"""Consistent Grouping (CG): Power of Random Choices over equal virtual workers, times a virtual-to-worker map.

Each source routes a key in two steps:

    key --PoRC--> virtual worker --map--> worker

The first step is the "porc" strategy of this package, run over alpha * n bins (alpha = `vw`), so every
virtual worker carries at most ceil((1 + eps) m / (alpha n)) of the source's m messages. The second step is a
plain array lookup, and the only thing CG adapts: a worker's share of the stream is its number of virtual
workers, so the map should give worker w about alpha_w* = alpha n c_w / sum(c) of them.

Choices where the paper is silent:

    * Initial map: virtual worker v belongs to worker v mod n, so every worker starts with alpha of them.
    * Pairing: INCREASE puts the worker at the back of the idle queue, DECREASE at the back of the busy queue
      (a worker is in at most one queue; the latest signal wins). While both queues are non-empty their heads
      are paired: the busy worker gives one virtual worker to the idle one and both leave their queues. A
      worker gives away the virtual worker it has held longest (FCFS) and appends the one it receives.
    * A worker keeps at least `min_vw` virtual workers; a busy head that has no more to give leaves the queue.
    * Probing (`probe=true`, Section 6.1.2): a busy signal that finds the idle queue empty is paired at once with
      the worker that never reported busy, or did so least recently (then fewest virtual workers, then lowest
      id), as the analysis shows a busy worker already holds close to its optimum.
    * Resize keeps the number of virtual workers (alpha * initial workers): PoRC's bins, hence every key's
      virtual worker, stay put and only the map changes. A joining worker takes virtual workers one at a time
      from the worker holding the most until it has the average (rounded down); a leaving worker's virtual
      workers go one at a time to the remaining worker holding the fewest. Only if more workers join than the
      layer can give `min_vw` each does it grow to alpha per worker: PoRC then starts afresh over the new bins
      and the map is rebuilt in proportion to what workers held.

Signals reach a source only through `feedback`, piggybacked on acks of its own tuples, so each source keeps its
own map (eventual consistency). Nothing migrates: a moved virtual worker only changes where later tuples go.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import registry
from ..checks import check_report, check_workers, per_worker
from ..contract import Adaptive
from ..delegation import DEFAULT_BUSY, DEFAULT_IDLE, DEFAULT_T0, MEASURES, WorkerDelegation
from ..feedback import AckReport
from ..groupmap import GroupMap, apportion
from ..params import Number, Param, at_least_one, eps_param, fraction, positive
from . import pairing as P


def _within_vw(value: Number, workers: int, values: Mapping[str, Number]) -> str | None:
    """Rule: a count between 1 and the initial virtual workers per worker."""
    return None if 1 <= value <= values["vw"] else "must be between 1 and vw"


def _above_idle(value: Number, workers: int, values: Mapping[str, Number]) -> str | None:
    """Rule: at least the idle threshold and below 1 (a busy fraction never exceeds 1)."""
    return None if values["idle"] <= value < 1 else "must be in [idle, 1)"


PARAMS = (
    Param("vw", int, 10, at_least_one, "virtual workers per worker at start (alpha)"),
    eps_param(0.01, "PoRC capacity slack: a virtual worker takes a message while its load < ceil((1+eps) m/(alpha n))"),
    Param("min_vw", int, 1, _within_vw, "virtual workers a worker always keeps"),
    Param("probe", bool, False, None, "give a busy worker's virtual worker away even when no worker is idle"),
    Param("t0", float, DEFAULT_T0, positive, "time slot: least seconds between two idle/busy decisions of a worker",
          duration=True),
    Param("idle", float, DEFAULT_IDLE, fraction, "a worker below this utilization asks for more"),
    Param("busy", float, DEFAULT_BUSY, _above_idle, "a worker above this utilization asks for less"),
    Param("measure", str, "offered", None, "the utilization a worker watches: " + "; ".join(
        f"{k} = {v}" for k, v in MEASURES.items()), choices=tuple(MEASURES)),
)


class ConsistentGrouping(Adaptive):
    """One source's CG: PoRC routes keys to virtual workers, the source's own map sends those to workers."""

    name = "cg"

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        super().__init__(workers, seed, params)
        self._vw = int(self.params["vw"])
        self._min_vw = int(self.params["min_vw"])
        self._probe = bool(self.params["probe"])
        self._idle: deque[int] = deque()  # idle queue: workers waiting for a virtual worker, FCFS
        self._busy: deque[int] = deque()  # busy queue: workers waiting to give one away, FCFS
        self._last_busy: list[int] = [-1] * self.workers  # order stamp of each worker's latest DECREASE
        self._stamp = 0
        self._sent = np.zeros(self.workers, dtype=np.int64)  # tuples this source sent to each worker
        self._counts = {"moves": 0, "probe_moves": 0, "refused": 0, "increase": 0, "decrease": 0, "rebuilds": 0}
        self._build(self._vw * self.workers, [self._vw] * self.workers, striped=True)

    # --- the virtual layer ---------------------------------------------------------------------------------

    def _build(self, total: int, shares: list[int], striped: bool) -> None:
        """Fresh PoRC over `total` virtual workers and a map giving worker w `shares[w]` of them."""
        self._porc = registry.make("porc", workers=total, seed=self.seed, eps=self.params["eps"])
        self._map = GroupMap.striped(total, len(shares)) if striped else GroupMap.blocks(shares)

    def _move(self, donor: int, receiver: int) -> None:
        """The donor's longest-held virtual worker goes to the receiver; the total never changes."""
        self._map.move(donor, receiver)
        self._counts["moves"] += 1

    @property
    def total_virtual_workers(self) -> int:
        """Number of virtual workers (alpha n); pairing and resizing keep it constant."""
        return self._map.groups

    def virtual_workers(self) -> np.ndarray:
        """How many virtual workers each worker holds in this source's map."""
        return self._map.holdings()

    def owners(self) -> np.ndarray:
        """Copy of the virtual-to-worker map."""
        return self._map.current.copy()

    def held(self, worker: int) -> list[int]:
        """The virtual workers `worker` holds, in the order it got them."""
        return self._map.held(worker)

    def virtual_loads(self) -> np.ndarray:
        """Tuples this source sent to each virtual worker (PoRC's local load estimate)."""
        return self._porc.local_loads()

    def local_loads(self) -> np.ndarray:
        """Tuples this source sent to each worker."""
        return self._sent.astype(np.float64)

    # --- routing -------------------------------------------------------------------------------------------

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Chosen worker (int32) of each 64-bit key hash: PoRC's virtual worker, then its owner in the map."""
        virtual = self._porc.route(keys, now)
        out = self._map.current[virtual]
        if out.size:
            self._sent += np.bincount(out, minlength=self.workers)
        return out

    def compiled_route(self) -> tuple[Any, np.ndarray]:
        """What the simulator's compiled event loop routes with: PoRC (a compiled strategy) and the tuples sent
        to each worker (updated in place); the map and the pairing it runs as `pairing` does (`pairing_arrays`)."""
        return self._porc, self._sent

    def pairing_arrays(self) -> tuple[np.ndarray, ...]:
        """The map and the pairing's queues, stamps and counts as arrays, in `pairing`'s layout."""
        n, owner = self.workers, self._map.current.astype(np.int32)
        after, holds = np.full(owner.size, -1, np.int64), np.full((n, 3), -1, np.int64)
        for w in range(n):
            held = self._map.held(w)
            holds[w] = (held[0], held[-1], len(held)) if held else (-1, -1, 0)
            after[held[:-1]] = held[1:]
        idle, busy = np.zeros(n, np.int64), np.zeros(n, np.int64)
        idle[: len(self._idle)], busy[: len(self._busy)] = list(self._idle), list(self._busy)
        c = self._counts
        count = np.array([len(self._idle), len(self._busy), self._stamp, c["moves"], c["probe_moves"], c["refused"],
                          c["increase"], c["decrease"], self._map.version, -1, -1, self._min_vw, self._probe],
                         np.int64)
        return owner, after, holds, idle, busy, np.array(self._last_busy, np.int64), count

    def take_pairing_arrays(self, owner, after, holds, idle, busy, last_busy, count) -> None:
        """The state `pairing` left in arrays (`pairing_arrays`' layout), back into this grouping and its map."""
        held = []
        for first in holds[:, 0].tolist():
            chain = []
            while first >= 0:
                chain.append(first)
                first = int(after[first])
            held.append(chain)
        previous = None
        if count[P.MOVES] > self._counts["moves"]:  # the version before the last move differs in one virtual worker
            previous = owner.copy()
            previous[count[P.LAST_GROUP]] = count[P.LAST_FROM]
        self._map.restore(owner.copy(), held, int(count[P.VERSION]), previous)
        self._idle, self._busy = deque(idle[: count[P.IDLE_N]].tolist()), deque(busy[: count[P.BUSY_N]].tolist())
        self._last_busy, self._stamp = last_busy.tolist(), int(count[P.STAMP])
        for name, at in (("moves", P.MOVES), ("probe_moves", P.PROBE_MOVES), ("refused", P.REFUSED),
                         ("increase", P.INCREASES), ("decrease", P.DECREASES)):
            self._counts[name] = int(count[at])

    # --- pairing -------------------------------------------------------------------------------------------

    def feedback(self, report: AckReport) -> None:
        """Apply the signals piggybacked on acks of this source's tuples, oldest first."""
        report = check_report(report, self.workers)
        signals = np.asarray(report.signals)
        for i in np.flatnonzero(signals):
            w = int(report.workers[i])
            if signals[i] > 0:
                self._on_increase(w)
            else:
                self._on_decrease(w)

    def _on_increase(self, w: int) -> None:
        """Worker `w` is idle: queue it for a virtual worker."""
        self._counts["increase"] += 1
        if w in self._busy:
            self._busy.remove(w)
        if w not in self._idle:
            self._idle.append(w)
        self._pair()

    def _on_decrease(self, w: int) -> None:
        """Worker `w` is busy: queue it to give one away, or probe another worker's capacity."""
        self._counts["decrease"] += 1
        self._last_busy[w] = self._stamp
        self._stamp += 1
        if w in self._idle:
            self._idle.remove(w)
        if w not in self._busy:
            self._busy.append(w)
        self._pair()
        if self._probe and w in self._busy:  # still queued: no idle worker to pair with
            self._busy.remove(w)
            self._probe_capacity(w)

    def _probe_capacity(self, donor: int) -> None:
        """Give one of the busy donor's virtual workers to the worker that reported busy least recently (or never)."""
        held = self._map.holdings()
        if held[donor] <= self._min_vw or self.workers == 1:
            self._counts["refused"] += 1
            return
        target = min(
            (u for u in range(self.workers) if u != donor),
            key=lambda u: (self._last_busy[u], held[u], u),
        )
        self._move(donor, target)
        self._counts["probe_moves"] += 1

    def _pair(self) -> None:
        """While both queues have a head, move one virtual worker from the busy head to the idle head."""
        while self._idle and self._busy:
            donor = self._busy.popleft()
            if self._map.holds(donor) <= self._min_vw:
                self._counts["refused"] += 1  # nothing left to give: the signal is dropped
                continue
            self._move(donor, self._idle.popleft())

    # --- elasticity ----------------------------------------------------------------------------------------

    def resize(self, workers: int) -> None:
        """Workers join or leave at the top index; the virtual workers are redistributed, their number kept."""
        workers = check_workers(workers)
        old = self.workers
        if workers == old:
            return
        self._idle = deque(w for w in self._idle if w < workers)
        self._busy = deque(w for w in self._busy if w < workers)
        self._last_busy = (self._last_busy + [-1] * workers)[:workers]
        self._sent = per_worker(self._sent, workers, 0)
        self.workers = workers
        if workers < old:
            self._counts["moves"] += self._map.leave(workers)
        elif self.total_virtual_workers >= workers * self._min_vw:
            self._counts["moves"] += self._map.join(workers)
        else:
            self._grow(old)

    def _grow(self, old: int) -> None:
        """More workers than the layer can serve: alpha per worker, shared as workers held them so far."""
        weights = self._map.holdings().astype(float).tolist()
        weights += [self.total_virtual_workers / old] * (self.workers - old)
        total = self._vw * self.workers
        self._build(total, apportion(weights, total, self._min_vw), striped=False)
        self._counts["rebuilds"] += 1

    # --- reporting -----------------------------------------------------------------------------------------

    def stats(self) -> dict:
        """Virtual workers per worker, moves and signals so far, queue lengths, and PoRC's own statistics."""
        return {
            "virtual_workers": self.virtual_workers().tolist(),
            "total_virtual_workers": self.total_virtual_workers,
            **self._counts,
            "idle_queue": len(self._idle),
            "busy_queue": len(self._busy),
            "porc": self._porc.stats(),
        }

def _make_delegation(workers: int, params: Mapping[str, Any]) -> WorkerDelegation:
    """The worker side of CG, with the same time slot and thresholds as the sources."""
    return WorkerDelegation(
        workers, t0=params["t0"], idle=params["idle"], busy=params["busy"], measure=params["measure"]
    )


registry.register(
    "cg",
    ConsistentGrouping.factory,
    params=PARAMS,
    doc="consistent grouping: PoRC over alpha*n virtual workers, a map moved by piggybacked idle/busy signals",
    delegation=_make_delegation,
)
