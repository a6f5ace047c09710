"""FISH (Huang et al.): epoch-based recent hot keys, classes of candidates on a ring, least inferred wait.

Per source and per tuple: count the key in decayed epoch counters (Algorithm 1), give it d candidates by its
class (Algorithm 2: the hottest key all n workers, each halving of frequency half as many, cold keys 2), take
them as the first d distinct workers clockwise on a consistent-hash ring from the key, and send the tuple to
the candidate whose backlog, inferred at the source from what it sent and each worker's time per tuple, would
be done soonest (Algorithm 3).

Choices where the paper is silent or ambiguous:

    * Frequency: f_k = c_k / sum of all counters. Each tuple adds exactly 1 to that sum (ReplaceMin removes min
      and adds min + 1), so it is the decayed length of the stream and f_k a decayed relative frequency.
    * kmax defaults to max(1000, 4/theta): 1000 is the monitored-set size of the paper's study, and 4/theta
      keeps the inherited overestimate (at most sum/kmax) below theta/4 of the frequency.
    * Warm-up: during the first epoch every key is cold; with a sum of a few tuples any key would look hot and
      keep a large M_k.
    * d = floor(n / 2^index), at least d_min (default 2, PKG's two choices: the paper gives no formula), at
      most n. While a key is hot its d never drops below M_k; a key that cools to f_k <= theta takes 2 again
      (Algorithm 2 as printed). M_k lives with the key's counter: a key evicted by ReplaceMin forgets it, and
      the key taking over the counter starts from nothing. Since candidates are a prefix of the key's walk,
      a smaller d only narrows the key to workers that already hold its state.
    * Ablations of the hot-key strategy (`chk` false): every hot key takes all n workers (W-Choices), or with
      `d_hot` > 0 the same fixed d_hot (D-Choices' strategy, capped at n; the caller picks d, for instance with
      `groupings.dchoices.find_optimal_choices` on the head frequencies). No M_k is kept for either, since the
      whole head shares one d; cold keys still take 2. `d_hot` with `chk` true is refused rather than ignored.
    * Candidates: the first d distinct owners walking the ring clockwise from the key's position (`replicas`
      points per worker); with d >= n every worker, scanned from an offset set by the seed so that sources
      break ties differently. Without `ch`, the walk is re-hashes of the key taken mod n (the paper's baseline).
    * N_w and T (Eq. 1): each send adds 1 to C_w at once (Algorithm 3, line 18), so N_w is not added again;
      every inference drains C_w by the engine time actually elapsed since the last one (not the nominal T),
      at most every `interval` seconds. Default 0.1 s, not the paper's 10 s: simulated runs last a few seconds.
    * P_w: the last `service_ms` an ack brought from worker w. Before any ack all P_w are equal and no time is
      drained (t_pri stays put, so the first inference with a known P_w covers the time so far); workers not
      heard from yet take the mean of those heard. Without an engine clock (`now` None) nothing drains.
    * Each source infers only from its own sends, as in the paper: it drains a worker at the worker's full
      rate, even though other sources share that rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import registry
from ..checks import as_key_hashes, check_workers, per_worker
from ..contract import Adaptive
from ..feedback import AckReport
from ..params import REPLICAS, Param, at_least_one, fraction, positive, resolve
from ..ring import build_ring, ring_directory
from .fish_epochs import EPOCH_LEN, EPOCHS, REPLACED, SEEN, TOP, TOTAL, USED, EpochCounters, new_counters, snapshot
from .fish_route import (
    CH,
    CHK,
    D_HOT,
    D_MIN,
    ESTIMATES,
    HEARD,
    HOT_MESSAGES,
    HWA,
    INTERVAL,
    MESSAGES,
    N_CLOCK,
    N_FLAGS,
    OFFSET,
    T_PRI,
    THETA,
    FishState,
    candidates_into,
    choices_of,
    hear,
    route_fish,
)


def _unit_interval(value: float, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: in [0, 1]."""
    return None if 0.0 <= value <= 1.0 else "must be in [0, 1]"


def _fixed_head(value: int, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: zero or more, and only without classes of hot keys (CHK would silently override it)."""
    if value < 0:
        return "must be >= 0"
    return "needs chk=false (it replaces the classes of hot keys)" if value > 0 and values["chk"] else None


PARAMS = (
    Param("theta", float, lambda n, v: 1.0 / (4 * n), fraction, "hot threshold on decayed frequency", shown="1/(4n)"),
    Param(
        "kmax",
        int,
        lambda n, v: max(1000, math.ceil(4.0 / v["theta"] - 1e-9)),
        at_least_one,
        "keys monitored by the epoch counters",
        shown="max(1000, 4/theta)",
    ),
    Param("epoch", int, 1000, at_least_one, "tuples per epoch (N_epoch)"),
    Param("alpha", float, 0.2, _unit_interval, "factor every counter is multiplied by at the end of an epoch"),
    Param("d_min", int, 2, at_least_one, "least number of candidates of a hot key"),
    Param("interval", float, 0.1, positive, "T: least engine seconds between two backlog inferences",
          duration=True),
    REPLICAS,
    Param("epochs", bool, True, None, "decay the counters every epoch (false: lifetime counting)"),
    Param(
        "chk", bool, True, None, "classes of hot keys (false: one d for every hot key, all n as W-Choices, or d_hot)"
    ),
    Param(
        "d_hot",
        int,
        0,
        _fixed_head,
        "with chk=false, candidates of every hot key (0: all n, W-Choices; d > 0: d, D-Choices)",
    ),
    Param("hwa", bool, True, None, "least inferred wait C_w*P_w (false: fewest tuples sent)"),
    Param("ch", bool, True, None, "candidates on the consistent-hash ring (false: hash family mod n)"),
)


class Fish(Adaptive):
    """FISH for one source: route keys with `route`, learn each worker's time per tuple from `feedback`."""

    name = "fish"

    def __init__(self, workers: int, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed must be an integer (got {seed!r})")
        # a Fish made directly (not through the registry) resolves its own parameters
        super().__init__(workers, seed, resolve(self.name, PARAMS, check_workers(workers), dict(params or {})))
        p = self.params
        counters = new_counters(p["kmax"], p["epoch"], p["alpha"], decay=p["epochs"])
        flags = np.zeros(N_FLAGS, dtype=np.int64)
        flags[CHK], flags[HWA], flags[CH], flags[D_MIN] = p["chk"], p["hwa"], p["ch"], p["d_min"]
        flags[D_HOT] = p["d_hot"]
        clock = np.zeros(N_CLOCK, dtype=np.float64)
        clock[THETA], clock[INTERVAL], clock[T_PRI] = p["theta"], p["interval"], math.nan
        self._measured = np.ones(self.workers)  # last time per tuple (s) heard from each worker
        self._heard = np.zeros(self.workers, dtype=bool)
        zeros = np.zeros(self.workers)
        self._state = self._build(counters, zeros, zeros.copy(), flags, clock)

    def _build(
        self, counters: EpochCounters, backlog: np.ndarray, sent: np.ndarray, flags: np.ndarray, clock: np.ndarray
    ) -> FishState:
        """State over the current workers: their ring, and the per-worker arrays given (sized to match)."""
        n = self.workers
        flags[OFFSET] = self.seed % n
        if self.params["ch"]:
            points, owners = build_ring(n, self.params["replicas"])
            directory = ring_directory(points)
        else:
            points, owners, directory = np.zeros(0, np.uint64), np.zeros(0, np.int32), np.zeros(0, np.int32)
        state = FishState(
            counters=counters,
            backlog=backlog,
            service=np.ones(n),
            sent=sent,
            stamp=np.zeros(n, dtype=np.int64),
            scratch=np.zeros(n, dtype=np.int32),
            ring_points=points,
            ring_owner=owners,
            ring_directory=directory,
            flags=flags,
            clock=clock,
        )
        self._publish_service(state)
        return state

    def _publish_service(self, state: FishState) -> None:
        """P_w the kernels use: what was heard, the mean of that for workers not heard from, else all equal."""
        if self._heard.any():
            state.service[:] = np.where(self._heard, self._measured, self._measured[self._heard].mean())
            state.flags[HEARD] = 1
        else:
            state.service[:] = 1.0

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Chosen worker (int32) of each 64-bit key hash at engine time `now` (s); same as one at a time."""
        keys = as_key_hashes(keys)
        out = np.empty(keys.size, dtype=np.int32)
        clock = math.nan if now is None else float(now)
        if keys.size:
            route_fish(keys, out, self._state, clock)
        return out

    def feedback(self, report: AckReport) -> None:
        """Keep the last time per tuple each acking worker reported (`service_ms`); other fields are unused."""
        workers = np.asarray(report.workers, dtype=np.int64)
        service_ms = np.asarray(report.service_ms, dtype=np.float64)
        # one compiled call per delivery: it runs on the engine's hot path, once per ack a source takes
        heard = hear(workers, service_ms, self._measured, self._heard, self._state.service, self._state.flags)
        if heard < 0:
            raise ValueError(f"feedback names a worker outside [0, {self.workers})")
        if heard == 2:
            self._publish_service(self._state)

    def resize(self, workers: int) -> None:
        """Workers join or leave at the top index: their ring points come or go, so only ring neighbours move."""
        workers = check_workers(workers)
        st = self._state
        backlog, sent = per_worker(st.backlog, workers, 0.0), per_worker(st.sent, workers, 0.0)
        self._measured, self._heard = per_worker(self._measured, workers, 1.0), per_worker(self._heard, workers, False)
        self.workers = workers
        self._state = self._build(st.counters, backlog, sent, st.flags, st.clock)

    def stats(self) -> dict:
        """Small JSON-able facts: tuples, hot share, epochs, monitored and hot keys, top frequency, inferences."""
        st = self._state
        c = st.counters
        used = int(c.meta[USED])
        total = float(c.mass[TOTAL])
        warm = c.meta[SEEN] > c.meta[EPOCH_LEN]
        hot = int(np.count_nonzero(c.counts[:used] > st.clock[THETA] * total)) if warm else 0
        m = int(st.flags[MESSAGES])
        return {
            "messages": m,
            "hot_fraction": float(st.flags[HOT_MESSAGES]) / m if m else 0.0,
            "epochs": int(c.meta[EPOCHS]),
            "tracked": used,
            "hot_keys": hot,
            "f_top": float(c.mass[TOP]) / total if total > 0 else 0.0,
            "max_d": int(c.choices[:used].max()) if used else 0,
            "replacements": int(c.meta[REPLACED]),
            "inferences": int(st.flags[ESTIMATES]),
            "workers_heard": int(self._heard.sum()),
        }

    # --- inspection -------------------------------------------------------------------------------------

    def tracked(self) -> dict[int, tuple[float, int]]:
        """Monitored keys -> (decayed counter c_k, remembered M_k)."""
        return snapshot(self._state.counters)

    def choices(self, key: int) -> int:
        """d the key would get now (its class, or 2 if cold), without counting a tuple."""
        return int(choices_of(self._state, np.uint64(key)))

    def candidates(self, key: int, d: int | None = None) -> np.ndarray:
        """The key's first d distinct candidate workers in walk order (d defaults to `choices(key)`)."""
        d = self.choices(key) if d is None else int(d)
        if not 1 <= d:
            raise ValueError(f"d must be at least 1 (got {d})")
        out = np.empty(self.workers, dtype=np.int32)
        found = candidates_into(self._state, np.uint64(key), min(d, self.workers), out)
        return out[:found].copy()

    def backlogs(self) -> np.ndarray:
        """Copy of C_w: tuples this source believes still wait at each worker."""
        return self._state.backlog.copy()

    def waits(self) -> np.ndarray:
        """Inferred wait T_w = C_w * P_w of each worker (seconds once acks told P_w)."""
        return self._state.backlog * self._state.service

    def local_loads(self) -> np.ndarray:
        """Copy of N_w: tuples this source sent to each worker."""
        return self._state.sent.copy()


registry.register(
    "fish",
    Fish.factory,
    params=PARAMS,
    doc="FISH: epoch-decayed hot keys, d ring candidates by class, least inferred wait C_w*P_w",
)
