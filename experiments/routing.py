"""Routing a whole stream without queues, for experiments about where keys go (imbalance, memory) rather than
queueing: the one engine they share, their metrics and their workloads.

The stream is split over the sources as the engines split it (message i enters source i mod S,
`topo.model.inputs.source_share`) and each source routes its share with its own grouping instance, seeded
`source_seed(seed, s)` as the engines seed it. No clock and no acks: a grouping sees only the keys it routed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

import groupings
from experiments.common import stream
from experiments.topologies import WP_LIKE
from topo.data.streams import Stream
from topo.data.zipf import zipf_p1
from topo.model.inputs import source_seed, source_share

SEED = 7  # the run seed of every routing-only experiment
TRACE_P1 = {"WP": 0.0932, "TW": 0.0267}  # p1 of the papers' Wikipedia and Twitter traces
DRIFT_SOURCES = 4  # fish-drift's sources, shared by the FISH experiments on its stream


# --- the engine -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Routed:
    """Where every message went, and each source's grouping `stats()` once the stream has passed."""

    workers: np.ndarray
    stats: list[dict]


def route_stream(grouping: str, keys: np.ndarray, workers: int, sources: int = 1, seed: int = SEED,
                 resize: tuple[int, int] | None = None, **params) -> Routed:
    """Route `keys` over `sources` sources as the engines split and seed them; resize=(i, n) gives every source's
    grouping n workers before message i of the stream, as a world change in the middle of a run would."""
    out = np.empty(keys.size, dtype=np.int64)
    stats = []
    for s in range(sources):
        g = groupings.make(grouping, workers=workers, seed=source_seed(seed, s), **params)
        share = source_share(keys, s, sources)
        cut = len(range(s, resize[0], sources)) if resize else share.size  # its messages before message i
        parts = [g.route(share[:cut])]
        if resize:
            g.resize(resize[1])
            parts.append(g.route(share[cut:]))
        out[s::sources] = np.concatenate(parts)
        stats.append(g.stats())
    return Routed(out, stats)


def route(grouping: str, keys: np.ndarray, workers: int, sources: int = 1, seed: int = SEED,
          resize: tuple[int, int] | None = None, **params) -> np.ndarray:
    """The worker of every message (route_stream without the stats), for experiments that need only that."""
    return route_stream(grouping, keys, workers, sources, seed, resize, **params).workers


# --- metrics ----------------------------------------------------------------------------------------------------


def loads(workers: np.ndarray, n: int) -> np.ndarray:
    """Messages per worker: what every balance metric is made of."""
    return np.bincount(workers, minlength=n)


def imbalance(workers: np.ndarray, n: int) -> float:
    """(max - mean) / mean of per-worker message counts, as the run summary's `imbalance` on equal workers."""
    load = loads(workers, n).astype(float)
    return float(load.max() / load.mean() - 1.0)


def excess_share(workers: np.ndarray, n: int) -> float:
    """The D-Choices paper's imbalance I = max_w L_w - 1/n, L_w the share of all messages on w (= imbalance / n)."""
    return float(loads(workers, n).max() / workers.size - 1.0 / n)


def _pairs_and_keys(keys: np.ndarray, workers: np.ndarray, n: int) -> tuple[int, int]:
    uniq, code = np.unique(keys, return_inverse=True)
    return int(np.unique(code.astype(np.int64) * n + workers).size), int(uniq.size)


def pairs(keys: np.ndarray, workers: np.ndarray, n: int) -> int:
    """Distinct (key, worker) pairs: one unit of per-key state on each worker that saw the key; n > any worker."""
    return _pairs_and_keys(keys, workers, n)[0]


def replication(keys: np.ndarray, workers: np.ndarray, n: int) -> float:
    """Distinct (key, worker) pairs per distinct key, as the run summary's `replication` (key grouping = 1)."""
    p, k = _pairs_and_keys(keys, workers, n)
    return p / k


# --- workloads --------------------------------------------------------------------------------------------------


def trace_z(p1: float, keys: int) -> float:
    """The Zipf exponent whose most frequent of `keys` ranks has share p1: a stand-in for a trace with that p1."""
    return float(brentq(lambda z: zipf_p1(z, keys) - p1, 0.05, 4.0))


def zipf_stream(z: float, keys: int, messages: int, seed: int) -> Stream:
    """A bounded Zipf stream (cached per process, as every stream of `experiments.common.stream`)."""
    return stream(f"zipf:z={z:.6f},keys={keys},messages={messages},seed={seed}")


def drift_spec(z: float, messages: int) -> str:
    """The fish-drift stream at skew z: 100k keys, the hot ones re-ranked every tenth of the stream."""
    return f"drift:z={z},keys=100000,messages={messages},shift_every={messages // 10},seed=3"


def wp_keys(messages: int) -> np.ndarray:
    """The key hashes of `messages` of the WP-like Zipf stream (Wikipedia's p1)."""
    return stream(WP_LIKE.format(m=messages)).key_hash
