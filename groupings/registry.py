"""The strategies by name, and `make`: each is a kernel (candidates x selector), parameters and state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import kernels
from . import state as slot
from .grouping import Grouping, Strategy
from .head import FIRST_REFRESH
from .params import COUNTERS, REFRESH, REPLICAS, THETA, eps_param, resolve
from .ring import build_ring, ring_directory
from .selectors import capacity
from .spacesaving import head_frequencies
from .state import State, new_state

_MASK64 = (1 << 64) - 1


def _base_state(workers: int, seed: int, **extra: Any) -> State:
    st = new_state(workers, rng_seed=seed & _MASK64, **extra)
    st.counters[slot.OFFSET] = seed % workers  # each source starts its all-workers scans somewhere else
    return st


def _plain(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return _base_state(workers, seed)


def _bounded(workers: int, seed: int, params: Mapping[str, Any], ring: bool) -> State:
    points, owners = build_ring(workers, params["replicas"]) if ring else (None, None)
    st = _base_state(workers, seed, ring=(points, owners, ring_directory(points)) if ring else None)
    st.params[slot.EPS] = params["eps"]
    # odds of missing every spare bin that often are below e^-64
    st.counters[slot.MAX_PROBES] = max(1024, 64 * workers)
    return st


def _porc_state(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return _bounded(workers, seed, params, ring=False)


def _chbl_state(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return _bounded(workers, seed, params, ring=True)


def _head_state(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    st = _base_state(workers, seed, summary_capacity=params["counters"])
    st.params[slot.THETA] = params["theta"]
    st.params[slot.EPS] = params.get("eps", 0.0)
    st.counters[slot.D] = 2  # PKG until the first estimate of the head
    refresh = params.get("refresh", 1)
    st.counters[slot.REFRESH] = refresh
    st.counters[slot.NEXT_REFRESH] = min(FIRST_REFRESH, refresh)
    return st


def _messages(st: State) -> dict:
    return {"messages": int(st.counters[slot.MESSAGES])}


def _bounded_stats(st: State) -> dict:
    m = int(st.counters[slot.MESSAGES])
    return {
        "messages": m,
        "probes": int(st.counters[slot.PROBES]),
        "probes_per_message": float(st.counters[slot.PROBES]) / m if m else 0.0,
        "fallbacks": int(st.counters[slot.FALLBACKS]),
        "capacity": int(capacity(st)),
    }


def _head_stats(st: State) -> dict:
    m = int(st.counters[slot.MESSAGES])
    head = int(head_frequencies(st.summary, st.params[slot.THETA]).size) if m else 0
    return {
        "messages": m,
        "head_size": head,
        "head_fraction": float(st.counters[slot.HEAD_MESSAGES]) / m if m else 0.0,
    }


def _dc_stats(st: State) -> dict:
    out = _head_stats(st)
    out["head_size"] = int(st.counters[slot.HEAD_SIZE])  # the head FindOptimalChoices last saw
    out["d"] = int(st.counters[slot.D])
    out["refreshes"] = int(st.counters[slot.REFRESHES])
    return out


_CAPACITY_EPS = eps_param(0.01, "capacity slack: a bin takes a message while its load < ceil((1+eps) m/n)")

_DC_EPS = eps_param(1e-4, "imbalance target of FindOptimalChoices")

_TABLE = (
    Strategy("kg", "key grouping: one hash", kernels.route_kg, _plain, stats=_messages),
    Strategy("sg", "shuffle grouping: round robin", kernels.route_sg, _plain, stats=_messages),
    Strategy("pkg", "partial key grouping: two hashes, least local load", kernels.route_pkg, _plain, stats=_messages),
    Strategy("potc", "power of two random choices per message", kernels.route_potc, _plain, stats=_messages),
    Strategy(
        "porc",
        "power of random choices: salted rehash, first with spare capacity",
        kernels.route_porc,
        _porc_state,
        params=(_CAPACITY_EPS,),
        stats=_bounded_stats,
    ),
    Strategy(
        "chbl",
        "consistent hashing with bounded loads: ring walk, first with spare capacity",
        kernels.route_chbl,
        _chbl_state,
        params=(_CAPACITY_EPS, REPLICAS),
        stats=_bounded_stats,
    ),
    Strategy(
        "dc",
        "D-Choices: head by Greedy-d with d from FindOptimalChoices, tail by PKG",
        kernels.route_dc,
        _head_state,
        params=(THETA, COUNTERS, _DC_EPS, REFRESH),
        stats=_dc_stats,
    ),
    Strategy(
        "wc",
        "W-Choices: head to the least loaded of all workers, tail by PKG",
        kernels.route_wc,
        _head_state,
        params=(THETA, COUNTERS),
        stats=_head_stats,
    ),
    Strategy(
        "rr",
        "Round-Robin: head in turn over all workers, tail by PKG",
        kernels.route_rr,
        _head_state,
        params=(THETA, COUNTERS),
        stats=_head_stats,
    ),
)

STRATEGIES: dict[str, Strategy] = {s.name: s for s in _TABLE}


def names() -> list[str]:
    """Names of the implemented strategies."""
    return list(STRATEGIES)


def make(name: str, workers: int, seed: int = 0, **params: Any) -> Grouping:
    """A fresh grouping instance `name` over `workers` workers; `seed` drives only its random choices."""
    strategy = STRATEGIES.get(name.strip().lower()) if isinstance(name, str) else None
    if strategy is None:
        raise ValueError(f"unknown grouping {name!r} (valid: {', '.join(STRATEGIES)})")
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be a positive integer (got {workers!r})")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer (got {seed!r})")
    values = resolve(strategy.name, strategy.params, int(workers), params)
    return Grouping(strategy, int(workers), int(seed), values)
