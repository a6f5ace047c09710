"""What periodic aggregation of partial state costs (`--aggregate-every`): every period each worker flushes the state
of the keys it updated since its last flush, so the cost grows with how many workers share a key (replication).

Counted a chunk of the per-tuple log at a time. A FIFO worker finishes its tuples in order, so its period only moves
forward; each worker carries its open period's keys from one chunk to the next, and memory grows with the keys a
period holds, not with the tuples.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def aggregation_cost(chunks: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]], period_s: float) -> dict:
    """Flushes (a worker's period with tuples) and keys flushed (distinct keys in each) over the log's chunks of
    (key hashes, workers, finish times in seconds); ValueError if a worker's finish times go back between chunks."""
    flushes = keys = 0
    carry: dict[int, tuple[int, np.ndarray]] = {}  # worker -> (its open period, the keys flushed in it so far)
    for key_hash, worker, finish_s in chunks:
        if not len(worker):
            continue
        period = np.floor(np.asarray(finish_s) / period_s).astype(np.int64)
        order = np.lexsort((key_hash, period, worker))  # by worker, then period, then key
        w, p, k = np.asarray(worker)[order], period[order], np.asarray(key_hash)[order]
        new_flush = np.ones(w.size, bool)
        new_flush[1:] = (w[1:] != w[:-1]) | (p[1:] != p[:-1])
        new_key = new_flush.copy()
        new_key[1:] |= k[1:] != k[:-1]
        flushes, keys = flushes + int(new_flush.sum()), keys + int(new_key.sum())
        groups = np.append(np.flatnonzero(new_flush), w.size)  # bounds of each (worker, period) in the chunk
        first = np.flatnonzero(np.diff(w, prepend=-1) != 0)  # each worker's first row
        for a, b in zip(first, np.append(first[1:], w.size), strict=True):
            g = np.searchsorted(groups, a)  # the worker's first group, and its last one
            last = np.searchsorted(groups, b) - 1
            opened = _keys(k, new_key, groups[last], groups[last + 1])
            before = carry.get(int(w[a]))
            if before is not None and p[a] < before[0]:
                raise ValueError(f"worker {int(w[a])}'s finish times go back between chunks of the log")
            if before is not None and p[a] == before[0]:  # the period it left open goes on
                continued = _keys(k, new_key, groups[g], groups[g + 1])
                shared = np.isin(continued, before[1], assume_unique=True)
                flushes, keys = flushes - 1, keys - int(shared.sum())
                if g == last:
                    opened = np.union1d(before[1], continued)
            carry[int(w[a])] = (int(p[groups[last]]), opened)
    return {"period_s": period_s, "flushes": flushes, "keys_flushed": keys,
            "keys_per_flush": keys / flushes if flushes else 0.0}


def _keys(k: np.ndarray, new_key: np.ndarray, a: int, b: int) -> np.ndarray:
    # the distinct keys of rows [a, b) of one (worker, period) group, sorted
    return k[a:b][new_key[a:b]]
