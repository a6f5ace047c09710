"""Routing a whole stream without queues: where every message goes, for experiments about where keys go (imbalance,
memory) rather than queueing. Each source runs its own grouping instance, seeded per source as the engines do.

Imbalance = (max - mean) / mean of per-worker message counts; memory = replication, distinct (key, worker) pairs
per distinct key (1 = key grouping, the optimum).
"""

from __future__ import annotations

import numpy as np

import groupings
from experiments.adaptive import WP_LIKE
from experiments.common import stream
from topo.model.inputs import source_seed

SEED = 7


def imbalance(workers: np.ndarray, n: int) -> float:
    """(max - mean) / mean of per-worker message counts."""
    load = np.bincount(workers, minlength=n).astype(float)
    return float(load.max() / load.mean() - 1.0)


def replication(keys: np.ndarray, workers: np.ndarray, n: int) -> float:
    """Distinct (key, worker) pairs per distinct key."""
    uniq, code = np.unique(keys, return_inverse=True)
    return float(np.unique(code.astype(np.int64) * n + workers).size / uniq.size)


def route(grouping: str, keys: np.ndarray, workers: int, sources: int = 1, **params) -> np.ndarray:
    """Worker of every message: message i enters source i mod `sources` (shuffle grouping to the sources), and
    each source runs its own instance of `grouping`, seeded per source as the simulator does."""
    out = np.empty(keys.size, dtype=np.int64)
    for s in range(sources):
        g = groupings.make(grouping, workers=workers, seed=source_seed(SEED, s), **params)
        out[s::sources] = g.route(keys[s::sources])
    return out


def wp_keys(messages: int) -> np.ndarray:
    """The key hashes of `messages` of the WP-like Zipf stream (Wikipedia's p1)."""
    return stream(WP_LIKE.format(m=messages)).key_hash
