"""What a run computed, judged the same way on both engines: the key copies each worker held (from the routing,
the papers' memory cost) and whether the merged operator state equals the exact result of the input."""

from __future__ import annotations

import numpy as np

import operators


def operator_outcome(
    name: str,
    key_hash: np.ndarray,
    worker: np.ndarray,
    workers: int,
    values: np.ndarray | None = None,
    params: dict | None = None,
) -> tuple[list[int], int, bool]:
    """Distinct keys each worker saw, distinct keys in all, and whether the merged operator state is exact.

    Key counts come from the routing itself (the papers' memory cost: key copies held), not from the operator's
    state, which may keep fewer (a top-k summary holds a bounded number of keys).
    """
    op = operators.make(name, **(params or {}))
    exact = op.equal(op.merge(op.from_grouped(key_hash, worker, workers, values)), op.exact(key_hash, values))
    per_worker, total = distinct_keys_per_worker(key_hash, worker, workers)
    return per_worker, total, bool(exact)


def distinct_keys_per_worker(key_hash: np.ndarray, worker: np.ndarray, workers: int) -> tuple[list[int], int]:
    """Number of distinct keys routed to each worker, and in the whole stream."""
    if not len(key_hash):
        return [0] * workers, 0
    order = np.lexsort((key_hash, worker))
    w, k = worker[order], key_hash[order]
    first = np.ones(len(k), bool)
    first[1:] = (w[1:] != w[:-1]) | (k[1:] != k[:-1])
    per_worker = np.bincount(w[first], minlength=workers)
    return per_worker.tolist(), int(np.unique(key_hash).size)
