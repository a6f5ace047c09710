"""The operator protocol: what a worker computes over the tuples routed to it, as a mergeable partial state.

A grouping that splits a key over several workers leaves a partial state per worker; the aggregator merges
them, and the run is exact when the merged state equals the state computed from the whole input at once.
Like Flink's AggregateFunction, `update` may change its `state` argument in place and return it (it is the
hot path); `merge` never changes its inputs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

State = Any


def read_only(array: np.ndarray) -> np.ndarray:
    """A view of `array` that callers cannot write through (states hand out their arrays without copying)."""
    view = array.view()
    view.flags.writeable = False
    return view


def as_key_hashes(key_hash: np.ndarray | Sequence[int]) -> np.ndarray:
    """A one-dimensional uint64 array of key hashes."""
    arr = np.asarray(key_hash, dtype=np.uint64)
    if arr.ndim != 1:
        raise ValueError(f"key hashes must be one-dimensional (got shape {arr.shape})")
    return arr


def group_by_worker(worker: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Stable order that groups tuples by worker, and the n + 1 offsets of each worker's run in it."""
    worker = np.asarray(worker)
    if worker.ndim != 1:
        raise ValueError(f"worker must be one-dimensional (got shape {worker.shape})")
    if n < 1:
        raise ValueError(f"n must be at least 1 (got {n})")
    if worker.size and (worker.min() < 0 or worker.max() >= n):
        raise ValueError(f"worker ids must be in [0, {n}) (got {worker.min()}..{worker.max()})")
    # numpy's stable sort is a radix sort on integers of 16 bits or less: linear time, fewer bytes faster
    narrow = worker.astype(np.uint8 if n <= 1 << 8 else np.uint16 if n <= 1 << 16 else np.int64)
    order = np.argsort(narrow, kind="stable")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(narrow, minlength=n), out=offsets[1:])
    return order, offsets


class Operator(ABC):
    """A worker-side computation with mergeable partial state (one instance serves every worker)."""

    name: str = ""
    # whether a worker's state has an entry for every key it was sent (then its distinct keys are the routing's key
    # copies, and a run counts them from the states instead of a second pass over the tuples)
    holds_every_key: bool = False

    @abstractmethod
    def empty(self) -> State:
        """The state of a worker that has seen no tuple."""

    @abstractmethod
    def update(self, state: State, key_hash: np.ndarray, values: np.ndarray | None = None) -> State:
        """The state after also processing these tuples (may reuse and return `state`)."""

    @abstractmethod
    def merge(self, states: Sequence[State]) -> State:
        """One state holding everything the given states hold (associative, commutative, inputs unchanged)."""

    @abstractmethod
    def distinct_keys(self, state: State) -> int:
        """Number of distinct keys the state holds something for (the memory cost the papers count)."""

    @abstractmethod
    def state_size_bytes(self, state: State) -> int:
        """Bytes the state needs once compacted (keys plus per-key values)."""

    @abstractmethod
    def equal(self, a: State, b: State) -> bool:
        """True if the two states hold the same result."""

    def exact(self, key_hash_all: np.ndarray, values: np.ndarray | None = None) -> State:
        """The true result computed from the whole input at once."""
        return self.update(self.empty(), key_hash_all, values)

    def from_grouped(
        self, key_hash: np.ndarray, worker: np.ndarray, n: int, values: np.ndarray | None = None
    ) -> list[State]:
        """The states of all n workers, given the worker each tuple was routed to."""
        key_hash = as_key_hashes(key_hash)
        if len(worker) != key_hash.size:
            raise ValueError(f"worker has {len(worker)} entries for {key_hash.size} tuples")
        order, offsets = group_by_worker(worker, n)
        keys = key_hash[order]
        vals = None if values is None else np.asarray(values)[order]
        return [
            self.update(self.empty(), keys[lo:hi], None if vals is None else vals[lo:hi])
            for lo, hi in zip(offsets[:-1], offsets[1:], strict=True)
        ]

    def merges_to(self, states: Sequence[State], whole: State) -> bool:
        """Whether the states merged hold what `whole` holds (an operator may check it without the merge)."""
        return self.equal(self.merge(states), whole)

    def judge(self, chunks: Iterable[tuple], n: int) -> tuple[list[State], State]:
        """The states of all n workers and the exact state, from the tuples a chunk at a time: (key hashes, worker,
        values or None) each. This default joins the chunks and takes `from_grouped` and `exact` of the whole; an
        operator whose states do not depend on how the tuples are cut folds each chunk as it comes."""
        parts = list(chunks) or [(np.empty(0, np.uint64), np.empty(0, np.int64), None)]
        key_hash = np.concatenate([as_key_hashes(p[0]) for p in parts])
        worker = np.concatenate([p[1] for p in parts])
        values = None if parts[0][2] is None else np.concatenate([p[2] for p in parts])
        return self.from_grouped(key_hash, worker, n, values), self.exact(key_hash, values)

    def summary(self, state: State) -> dict:
        """Small JSON-ready facts about a state, for run summaries."""
        return {"distinct_keys": self.distinct_keys(state), "state_bytes": self.state_size_bytes(state)}
