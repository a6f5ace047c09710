"""The catalogue of compiled strategies: each a kernel over a candidate set and a selector, its parameters and
its state, declared once in `TABLE` and registered by name when the package is imported."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import registry
from ..params import COUNTERS, REFRESH, REPLICAS, THETA, Param, at_least_one, eps_param, resolve
from ..spacesaving import head_frequencies
from . import kernels
from . import state as slot
from .grouping import STRATEGIES, Grouping, Strategy
from .selectors import capacity
from .state import State


def _plain(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return slot.plain_state(workers, seed)


def _pkg_state(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return slot.pkg_state(workers, seed, params["choices"], params["distinct"])


def _porc_state(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return slot.bounded_state(workers, seed, params["eps"])


def _chbl_state(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return slot.bounded_state(workers, seed, params["eps"], params["replicas"])


def _head_state(workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return slot.head_state(
        workers,
        seed,
        params["theta"],
        params["counters"],
        params.get("eps", 0.0),
        params.get("refresh", 1),
        params.get("d", 0),
    )


def _resize(st: State, workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return slot.resized_state(st, workers, seed)


def _resize_ring(st: State, workers: int, seed: int, params: Mapping[str, Any]) -> State:
    return slot.resized_state(st, workers, seed, replicas=params["replicas"])


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

# the paper's authors let F_1(key) and F_2(key) coincide; Storm's PartialKeyGrouping forces them apart
_PKG_PARAMS = (
    Param(
        "distinct",
        bool,
        False,
        None,
        "true: a choice equal to an earlier one moves to the next worker (Storm's PartialKeyGrouping); "
        "false: choices may coincide (the paper's code)",
    ),
    Param("choices", int, 2, at_least_one, "hash choices per key, d (Storm takes more than two since STORM-2782)"),
)


def _compiled(name, doc, kernel, prepare=_plain, params=(), stats=_messages, resize=_resize) -> Strategy:
    return Strategy(name, doc, kernel, prepare, resize, params=params, stats=stats)


TABLE = (
    _compiled("kg", "key grouping: one hash", kernels.route_kg),
    _compiled("sg", "shuffle grouping: round robin", kernels.route_sg),
    _compiled(
        "pkg",
        "partial key grouping: two hashes, least local load",
        kernels.route_pkg,
        _pkg_state,
        params=_PKG_PARAMS,
    ),
    _compiled("potc", "power of two random choices per message", kernels.route_potc),
    _compiled(
        "porc",
        "power of random choices: salted rehash, first with spare capacity",
        kernels.route_porc,
        _porc_state,
        params=(_CAPACITY_EPS,),
        stats=_bounded_stats,
    ),
    _compiled(
        "chbl",
        "consistent hashing with bounded loads: ring walk, first with spare capacity",
        kernels.route_chbl,
        _chbl_state,
        params=(_CAPACITY_EPS, REPLICAS),
        stats=_bounded_stats,
        resize=_resize_ring,
    ),
    _compiled(
        "dc",
        "D-Choices: head by Greedy-d with d from FindOptimalChoices, tail by PKG",
        kernels.route_dc,
        _head_state,
        params=(THETA, COUNTERS, _DC_EPS, REFRESH),
        stats=_dc_stats,
    ),
    _compiled(
        "wc",
        "W-Choices: head to the least loaded of all workers, tail by PKG",
        kernels.route_wc,
        _head_state,
        params=(THETA, COUNTERS),
        stats=_head_stats,
    ),
    _compiled(
        "rr",
        "Round-Robin: head in turn over all workers, tail by PKG",
        kernels.route_rr,
        _head_state,
        params=(THETA, COUNTERS),
        stats=_head_stats,
    ),
)

STRATEGIES.update({s.name: s for s in TABLE})


def _compiled_factory(strategy: Strategy) -> registry.Factory:
    def build(workers: int, seed: int, params: dict, controller: Any = None) -> Grouping:
        return Grouping(strategy, workers, seed, params)

    return build


for _strategy in TABLE:
    registry.register(_strategy.name, _compiled_factory(_strategy), _strategy.params, _strategy.doc)


def greedy_d(workers: int, seed: int, d: int, **params: Any) -> Grouping:
    """D-Choices for one source with a fixed d for the head (Greedy-d, all workers once d >= n; the tail by PKG):
    the runs of the paper's search for the smallest sufficient d (Min-d, Fig. 9). Not a registered strategy, so
    dc's own parameters stay as they are; `params` are dc's (theta, counters, ...)."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2:
        raise ValueError(f"Greedy-d needs an integer d >= 2 (got {d!r})")
    dc = STRATEGIES["dc"]
    return Grouping(dc, workers, seed, {**resolve("dc", dc.params, workers, params), "d": int(d)})
