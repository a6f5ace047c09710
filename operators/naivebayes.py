"""Streaming multinomial naive Bayes, the papers' running example: a counter per (feature value, class).

Each tuple is one occurrence of a feature value (its key) with a class label (its value, an integer). A
stream without values gets the label `key_hash % classes`, so every stream can drive the operator (and the
class is then a function of the key, which the model learns exactly). Partial counters of a feature value
on several workers add up when merged, so the merged model equals the one trained on the whole stream.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from operators.base import Operator, as_key_hashes, group_by_worker, read_only

_MIN_COMPACT = 1 << 16  # buffered tuples that always justify a compaction
_FEW_LABELS = 8  # label ranges narrower than this are counted one class at a time (one pass over the batch each)
_EMPTY_KEYS = np.empty(0, dtype=np.uint64)
_EMPTY_INTS = np.empty(0, dtype=np.int64)


def _runs(keys: np.ndarray, labels: np.ndarray | None = None) -> np.ndarray:
    """Start of each run of equal keys (or equal (key, label) pairs) in arrays sorted by key, then label."""
    change = np.empty(keys.size, dtype=bool)
    change[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=change[1:])
    if labels is not None:
        change[1:] |= labels[1:] != labels[:-1]
    return np.flatnonzero(change)


def _count_pairs(keys: np.ndarray, labels: np.ndarray | None, classes: int) -> tuple[np.ndarray, ...]:
    """Sorted distinct (key, label) pairs of a batch and how often each occurs; None labels mean key % classes."""
    if keys.size == 0:
        return _EMPTY_KEYS, _EMPTY_INTS, _EMPTY_INTS
    if labels is None:
        # the label is a function of the key, so sorting the keys alone sorts the pairs
        sorted_keys = np.sort(keys)
        starts = _runs(sorted_keys)
        uniq = sorted_keys[starts]
        return uniq, (uniq % np.uint64(classes)).astype(np.int64), np.diff(np.append(starts, keys.size))
    lowest, highest = int(labels.min()), int(labels.max())
    if highest - lowest >= _FEW_LABELS:
        order = np.lexsort((labels, keys))
        keys, labels = keys[order], labels[order]
        starts = _runs(keys, labels)
        return keys[starts], labels[starts], np.diff(np.append(starts, keys.size))
    # for a few classes, a plain sort per class is several times faster than one sort on two columns
    parts = []
    for label in range(lowest, highest + 1):
        part = np.sort(keys[labels == label])
        if part.size:
            starts = _runs(part)
            counts = np.diff(np.append(starts, part.size))
            parts.append((part[starts], np.full(starts.size, label, dtype=np.int64), counts))
    uniq, labels, counts = (np.concatenate(col) for col in zip(*parts, strict=True))
    # a stable sort by key keeps the classes ascending within each key
    order = np.argsort(uniq, kind="stable")
    return uniq[order], labels[order], counts[order]


def _sum_pairs(keys: np.ndarray, labels: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sorted distinct (key, label) pairs and the summed counts of pairs that may repeat."""
    if keys.size == 0:
        return _EMPTY_KEYS, _EMPTY_INTS, _EMPTY_INTS
    order = np.lexsort((labels, keys))
    keys, labels, counts = keys[order], labels[order], counts[order]
    starts = _runs(keys, labels)
    return keys[starts], labels[starts], np.add.reduceat(counts, starts)


def class_labels(values: np.ndarray | Sequence[int], size: int) -> np.ndarray:
    """Integer class labels (int64) of `size` tuples, or ValueError if a value is not a whole number."""
    arr = np.asarray(values)
    if arr.shape != (size,):
        raise ValueError(f"naivebayes: values has shape {arr.shape} for {size} tuples")
    if arr.dtype.kind in "biu":
        if arr.dtype == np.uint64 and size and arr.max() > np.iinfo(np.int64).max:
            raise ValueError("naivebayes: class labels must fit in int64")
        return arr.astype(np.int64)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        return arr.astype(np.int64)
    raise ValueError(f"naivebayes: values must be integer class labels (got dtype {arr.dtype})")


class NaiveBayesState:
    """Counters per (feature value, class): `keys`, `labels`, `counts` sorted by key then label, plus a buffer."""

    __slots__ = ("classes", "_keys", "_labels", "_counts", "_pending", "_pending_n")

    def __init__(
        self,
        classes: int,
        keys: np.ndarray | None = None,
        labels: np.ndarray | None = None,
        counts: np.ndarray | None = None,
    ) -> None:
        self.classes = classes
        self._keys = _EMPTY_KEYS if keys is None else keys
        self._labels = _EMPTY_INTS if labels is None else labels
        self._counts = _EMPTY_INTS if counts is None else counts
        self._pending: list[tuple[np.ndarray, np.ndarray | None]] = []
        self._pending_n = 0

    def add(self, key_hash: np.ndarray, labels: np.ndarray | None) -> None:
        """Buffer a batch of tuples (copied); None labels stand for key % classes."""
        if key_hash.size == 0:
            return
        copied = None if labels is None else np.array(labels, dtype=np.int64, copy=True)
        self._pending.append((np.array(key_hash, dtype=np.uint64, copy=True), copied))
        self._pending_n += key_hash.size
        # amortized O(log) per tuple: a compaction costs about as much as the tuples buffered since the last
        if self._pending_n >= max(self._keys.size, _MIN_COMPACT):
            self.compact()

    def compact(self) -> None:
        """Fold the buffered tuples into the sorted table (the value of the state does not change)."""
        if not self._pending:
            return
        keys = np.concatenate([k for k, _ in self._pending])
        if all(lab is None for _, lab in self._pending):
            labels = None
        else:
            modulus = np.uint64(self.classes)
            labels = np.concatenate(
                [(k % modulus).astype(np.int64) if lab is None else lab for k, lab in self._pending]
            )
        batch = _count_pairs(keys, labels, self.classes)
        if self._keys.size:
            old = (self._keys, self._labels, self._counts)
            batch = _sum_pairs(*(np.concatenate(pair) for pair in zip(old, batch, strict=True)))
        self._keys, self._labels, self._counts = batch
        self._pending, self._pending_n = [], 0

    def table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The compacted (keys, labels, counts) arrays (read-only views)."""
        self.compact()
        return read_only(self._keys), read_only(self._labels), read_only(self._counts)

    @property
    def keys(self) -> np.ndarray:
        """Feature value (key hash) of each counter, sorted."""
        return self.table()[0]

    @property
    def labels(self) -> np.ndarray:
        """Class of each counter (ascending within a key)."""
        return self.table()[1]

    @property
    def counts(self) -> np.ndarray:
        """Tuples of each (feature value, class) pair."""
        return self.table()[2]

    def class_totals(self) -> tuple[np.ndarray, np.ndarray]:
        """The classes seen, ascending, and how many tuples each has."""
        _, labels, counts = self.table()
        classes, index = np.unique(labels, return_inverse=True)
        return classes, np.bincount(index, weights=counts, minlength=classes.size).astype(np.int64)

    def __repr__(self) -> str:
        keys, _, counts = self.table()
        return f"NaiveBayesState(pairs={keys.size}, tuples={int(counts.sum())})"


class NaiveBayes(Operator):
    """Multinomial naive Bayes over one feature per tuple; counters add up when merged."""

    name = "naivebayes"

    def __init__(self, classes: int = 2, alpha: float = 1.0) -> None:
        if isinstance(classes, bool) or not isinstance(classes, (int, np.integer)) or classes < 1:
            raise ValueError(f"naivebayes: classes must be a whole number >= 1 (got {classes!r})")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.number)) or not alpha > 0:
            raise ValueError(f"naivebayes: alpha must be a number > 0 (got {alpha!r})")
        self.classes = int(classes)
        self.alpha = float(alpha)

    def _labels(self, values: np.ndarray | None, size: int) -> np.ndarray | None:
        """Class labels of the tuples, or None when they derive from the keys."""
        return None if values is None else class_labels(values, size)

    def empty(self) -> NaiveBayesState:
        """A model that has seen no tuple."""
        return NaiveBayesState(self.classes)

    def update(self, state: NaiveBayesState, key_hash: np.ndarray, values: np.ndarray | None = None) -> NaiveBayesState:
        """Count these (feature value, class) tuples into `state` (changed in place and returned)."""
        keys = as_key_hashes(key_hash)
        state.add(keys, self._labels(values, keys.size))
        return state

    def merge(self, states: Sequence[NaiveBayesState]) -> NaiveBayesState:
        """Sum the counters of all states into a new one."""
        tables = [s.table() for s in states]
        if not tables:
            return self.empty()
        return NaiveBayesState(self.classes, *_sum_pairs(*(np.concatenate(col) for col in zip(*tables, strict=True))))

    def distinct_keys(self, state: NaiveBayesState) -> int:
        """Number of distinct feature values with a counter."""
        keys = state.keys
        return int(np.count_nonzero(keys[1:] != keys[:-1]) + 1) if keys.size else 0

    def state_size_bytes(self, state: NaiveBayesState) -> int:
        """Bytes of the compacted counters: hash, label and count per (feature value, class) pair."""
        return int(sum(arr.nbytes for arr in state.table()))

    def equal(self, a: NaiveBayesState, b: NaiveBayesState) -> bool:
        """True if both states hold the same counter for every (feature value, class) pair."""
        return all(np.array_equal(x, y) for x, y in zip(a.table(), b.table(), strict=True))

    def exact(self, key_hash_all: np.ndarray, values: np.ndarray | None = None) -> NaiveBayesState:
        """Counters of the whole input, counted at once."""
        keys = as_key_hashes(key_hash_all)
        return NaiveBayesState(self.classes, *_count_pairs(keys, self._labels(values, keys.size), self.classes))

    def from_grouped(
        self, key_hash: np.ndarray, worker: np.ndarray, n: int, values: np.ndarray | None = None
    ) -> list[NaiveBayesState]:
        """Compacted states of all n workers from one grouping pass and one sort per worker."""
        key_hash = as_key_hashes(key_hash)
        if len(worker) != key_hash.size:
            raise ValueError(f"worker has {len(worker)} entries for {key_hash.size} tuples")
        labels = self._labels(values, key_hash.size)
        order, offsets = group_by_worker(worker, n)
        keys = key_hash[order]
        labels = None if labels is None else labels[order]
        states = []
        for lo, hi in zip(offsets[:-1], offsets[1:], strict=True):
            part = None if labels is None else labels[lo:hi]
            states.append(NaiveBayesState(self.classes, *_count_pairs(keys[lo:hi], part, self.classes)))
        return states

    def log_scores(self, state: NaiveBayesState, key_hash: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The classes seen, and log P(class) + log P(feature value | class) per key (row) and class (column)."""
        query = as_key_hashes(key_hash)
        keys, labels, counts = state.table()
        if keys.size == 0:
            raise ValueError("naivebayes: the model has seen no tuple")
        classes, index = np.unique(labels, return_inverse=True)
        totals = np.bincount(index, weights=counts, minlength=classes.size)
        vocabulary = self.distinct_keys(state)
        # a query's counters are the run of its key in the sorted table: positions lo .. hi - 1
        lo, hi = np.searchsorted(keys, query, "left"), np.searchsorted(keys, query, "right")
        lengths = hi - lo
        rows = np.repeat(np.arange(query.size), lengths)
        cols = np.arange(lengths.sum()) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
        table = np.zeros((query.size, classes.size))
        table[rows, index[cols]] = counts[cols]
        # Laplace smoothing: an unseen (feature value, class) pair counts alpha, so no score is -inf
        log_prior = np.log(totals / totals.sum())
        log_likelihood = np.log(table + self.alpha) - np.log(totals + self.alpha * vocabulary)
        return classes, log_prior + log_likelihood

    def predict(self, state: NaiveBayesState, key_hash: np.ndarray) -> np.ndarray:
        """Most probable class of a tuple with each feature value (ties go to the smallest label)."""
        classes, scores = self.log_scores(state, key_hash)
        return classes[np.argmax(scores, axis=1)]

    def summary(self, state: NaiveBayesState) -> dict:
        """Distinct feature values, bytes, tuples, (feature value, class) counters and classes seen."""
        _, counts = state.class_totals()
        return {
            **super().summary(state),
            "tuples": int(counts.sum()),
            "pairs": int(state.keys.size),
            "classes": int(counts.size),
        }
