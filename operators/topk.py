"""Top-k heavy hitters: a mergeable SpaceSaving summary per worker, merged at the aggregator.

A summary with `counters` counters keeps at most that many keys with a lower count `g` each, plus one error
bound `e` shared by all keys: every key's true count lies in [g, g + e] (g = 0 for keys it does not hold).
The SpaceSaving estimate of a key is g + e, never below its true count (Metwally et al.). This is the
Misra-Gries form of SpaceSaving, which carries the same information (Agarwal et al., "Mergeable Summaries",
show that SpaceSaving with c + 1 counters and Misra-Gries with c counters are isomorphic), and in this form
two summaries merge with a guarantee that does not degrade with the number of merges.

Merge rule: add the lower counts key by key, take C = the (counters + 1)-th largest sum (0 if there are no
more than `counters` keys), subtract C from every sum and drop the keys left at or below 0; the error bound of
the result is C plus the error bounds of the inputs. That is the consistent-grouping paper's decomposition of
the merged error (the error of the last summarization plus the errors of the partial summaries), and since each
cut C removes at least (counters + 1) * C from the sum of the counts, Agarwal et al.'s argument bounds it by
(n - sum of g) / (counters + 1) < n / counters for n tuples summarized, however many merges came before.

A worker counts each batch of tuples exactly (one sort) and folds that exact count into its summary with the
same merge rule; a batch of one tuple is then exactly one Misra-Gries (SpaceSaving) update.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from operators.base import Operator, as_key_hashes, group_by_worker, read_only

_MIN_COMPACT = 1 << 16  # buffered tuples that always justify a fold into the summary


def _count_sorted(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys of a sorted array and how often each occurs."""
    if sorted_keys.size == 0:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1])))
    return sorted_keys[starts], np.diff(np.append(starts, sorted_keys.size)).astype(np.int64)


def _sum_by_key(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and the summed counts of (key, count) pairs that may repeat keys."""
    if keys.size == 0:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")  # the inputs are sorted runs, which a stable sort merges cheaply
    keys, counts = keys[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return keys[starts], np.add.reduceat(counts, starts)


def _prune(keys: np.ndarray, counts: np.ndarray, counters: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Keep the keys above the (counters + 1)-th largest count, lowered by it; return it as the added error."""
    if counts.size <= counters:
        return keys, counts, 0
    # every key loses at most `cut`, while the counts lose at least (counters + 1) * cut in total
    cut = int(np.partition(counts, counts.size - counters - 1)[counts.size - counters - 1])
    keep = counts > cut
    return keys[keep], counts[keep] - cut, cut


class TopKState:
    """A summary: sorted monitored `keys`, their lower counts, `tuples` summarized and the shared `error` bound."""

    __slots__ = ("counters", "_keys", "_counts", "_tuples", "_error", "_pending", "_pending_n")

    def __init__(
        self,
        counters: int,
        keys: np.ndarray | None = None,
        counts: np.ndarray | None = None,
        tuples: int = 0,
        error: int = 0,
    ) -> None:
        self.counters = counters
        self._keys = np.empty(0, dtype=np.uint64) if keys is None else keys
        self._counts = np.empty(0, dtype=np.int64) if counts is None else counts
        self._tuples = int(tuples)
        self._error = int(error)
        self._pending: list[np.ndarray] = []
        self._pending_n = 0

    def add(self, key_hash: np.ndarray) -> None:
        """Buffer a batch of key hashes (copied), folding once the buffer outgrows the summary."""
        if key_hash.size == 0:
            return
        self._pending.append(np.array(key_hash, dtype=np.uint64, copy=True))
        self._pending_n += key_hash.size
        # one fold costs about a sort of the buffer plus the counters, so buffering keeps it amortized O(log)
        if self._pending_n >= max(self.counters, _MIN_COMPACT):
            self.compact()

    def compact(self) -> None:
        """Fold the buffered tuples into the summary: their exact count merged in by the merge rule."""
        if not self._pending:
            return
        batch = np.concatenate(self._pending)
        keys, counts = _count_sorted(np.sort(batch))
        if self._keys.size:
            keys, counts = _sum_by_key(np.concatenate((self._keys, keys)), np.concatenate((self._counts, counts)))
        self._keys, self._counts, cut = _prune(keys, counts, self.counters)
        self._tuples += batch.size
        self._error += cut
        self._pending, self._pending_n = [], 0

    @property
    def keys(self) -> np.ndarray:
        """Sorted monitored key hashes (read-only view)."""
        self.compact()
        return read_only(self._keys)

    @property
    def lower(self) -> np.ndarray:
        """Lower bound g on the true count of each key in `keys` (read-only view)."""
        self.compact()
        return read_only(self._counts)

    @property
    def tuples(self) -> int:
        """Number of tuples summarized (n)."""
        return self._tuples + self._pending_n

    @property
    def error(self) -> int:
        """Bound e on how far any estimate g + e lies above the true count (0 while nothing was dropped)."""
        self.compact()
        return self._error

    def __repr__(self) -> str:
        return f"TopKState(counters={self.counters}, keys={self.keys.size}, tuples={self.tuples}, error={self.error})"


def _whole(name: str, value: object, lowest: int) -> int:
    """`value` as an int of at least `lowest` (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lowest:
        raise ValueError(f"topk: {name} must be a whole number >= {lowest} (got {value!r})")
    return int(value)


class TopK(Operator):
    """The k most frequent keys, from SpaceSaving summaries that merge with a bounded error."""

    name = "topk"

    def __init__(self, k: int = 10, counters: int = 1000) -> None:
        self.k = _whole("k", k, 1)
        self.counters = _whole("counters", counters, 1)
        if self.counters < self.k:
            raise ValueError(f"topk: counters ({self.counters}) must be at least k ({self.k})")

    def empty(self) -> TopKState:
        """A summary of no tuples."""
        return TopKState(self.counters)

    def update(self, state: TopKState, key_hash: np.ndarray, values: np.ndarray | None = None) -> TopKState:
        """Summarize these tuples into `state` (changed in place and returned); values are ignored."""
        state.add(as_key_hashes(key_hash))
        return state

    def merge(self, states: Sequence[TopKState]) -> TopKState:
        """One summary of everything the given summaries hold, by the mergeable-summary merge rule."""
        states = list(states)
        keys, counts = _sum_by_key(
            np.concatenate([np.empty(0, dtype=np.uint64)] + [s.keys for s in states]),
            np.concatenate([np.empty(0, dtype=np.int64)] + [s.lower for s in states]),
        )
        keys, counts, cut = _prune(keys, counts, self.counters)
        return TopKState(self.counters, keys, counts, sum(s.tuples for s in states), sum(s.error for s in states) + cut)

    def distinct_keys(self, state: TopKState) -> int:
        """Number of keys the summary monitors (at most `counters`, except for an exact state)."""
        return int(state.keys.size)

    def state_size_bytes(self, state: TopKState) -> int:
        """Bytes of the counters: an 8-byte hash and an 8-byte count per monitored key."""
        return int(state.keys.nbytes + state.lower.nbytes)

    def exact(self, key_hash_all: np.ndarray, values: np.ndarray | None = None) -> TopKState:
        """The exact counts of every key (a summary that dropped nothing, so its error bound is 0)."""
        keys = as_key_hashes(key_hash_all)
        return TopKState(self.counters, *_count_sorted(np.sort(keys)), tuples=keys.size)

    def from_grouped(
        self, key_hash: np.ndarray, worker: np.ndarray, n: int, values: np.ndarray | None = None
    ) -> list[TopKState]:
        """The summaries of all n workers, each from one exact count of its tuples folded in one merge step."""
        key_hash = as_key_hashes(key_hash)
        if len(worker) != key_hash.size:
            raise ValueError(f"worker has {len(worker)} entries for {key_hash.size} tuples")
        order, offsets = group_by_worker(worker, n)
        grouped = key_hash[order]
        states = []
        for lo, hi in zip(offsets[:-1], offsets[1:], strict=True):
            keys, counts, cut = _prune(*_count_sorted(np.sort(grouped[lo:hi])), self.counters)
            states.append(TopKState(self.counters, keys, counts, tuples=int(hi - lo), error=cut))
        return states

    def top(self, state: TopKState) -> tuple[np.ndarray, np.ndarray]:
        """The (at most) k monitored keys with the largest estimates (ties by key) and their estimates."""
        keys, lower = state.keys, state.lower
        order = np.lexsort((keys, -lower))[: self.k]
        return keys[order], lower[order] + state.error

    def estimate(self, state: TopKState, key_hash: np.ndarray) -> np.ndarray:
        """SpaceSaving estimate g + e of each key: never below its true count, at most e above it."""
        query = as_key_hashes(key_hash)
        keys, lower = state.keys, state.lower
        if keys.size == 0:
            return np.full(query.size, state.error, dtype=np.int64)
        pos = np.minimum(np.searchsorted(keys, query), keys.size - 1)
        return np.where(keys[pos] == query, lower[pos], 0).astype(np.int64) + state.error

    def equal(self, a: TopKState, b: TopKState) -> bool:
        """True if both summarize as many tuples, report the same top-k keys and agree on each one's count.

        Each state bounds a key's true count to [estimate - error, estimate]; the counts agree when these
        intervals meet, so against an exact state every reported estimate lies in [true, true + error]. The
        reported order then follows: two keys whose true counts differ by more than the error bound cannot
        swap. The key sets are compared as they are, so a near-tie between the k-th and (k+1)-th key can make
        this False even though every estimate is within its bound.
        """
        if a.tuples != b.tuples:
            return False
        keys_a, est_a = self.top(a)
        keys_b, est_b = self.top(b)
        if keys_a.size != keys_b.size:
            return False
        order_a, order_b = np.argsort(keys_a), np.argsort(keys_b)
        if not np.array_equal(keys_a[order_a], keys_b[order_b]):
            return False
        hi_a, hi_b = est_a[order_a], est_b[order_b]
        return bool(np.all(hi_a - a.error <= hi_b) and np.all(hi_b - b.error <= hi_a))

    def summary(self, state: TopKState) -> dict:
        """Monitored keys, bytes, tuples summarized, the error bound and the top k as [key hash, estimate]."""
        keys, est = self.top(state)
        return {
            **super().summary(state),
            "tuples": state.tuples,
            "error_bound": state.error,
            "top": [[int(key), int(count)] for key, count in zip(keys, est, strict=True)],
        }
