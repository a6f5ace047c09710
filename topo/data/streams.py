"""The stream the engines consume: per-message key hashes and dense key ids, built from a spec or a dataset.

`stream_from_spec` samples an inline spec (see `topo.data.streamspec`); `topo.data.dataset` reads a dataset
directory and opens either by name (`topo.data.dataset.load_stream`). Key ids are dense indices into `key_table`,
which is sorted (by code point), so the same messages give the same arrays whichever way they were built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from groupings.hashing import hash_keys
from topo.data.streamspec import (  # noqa: F401  (re-exported: the public face of streams)
    BLOCK,
    StreamError,
    StreamSpec,
    is_inline_spec,
    key_names,
    parse_stream_spec,
    sample_key_ids,
)
from topo.data.zipf import zipf_p1, zipf_pmf  # noqa: F401  (re-exported)

TOP_KEYS = 10  # how many of the most frequent keys the metadata lists


class StreamLike(Protocol):
    """The fields of a loaded stream (`topo.data.streams.Stream`) the simulator reads."""

    key_hash: np.ndarray  # uint64 key hash of every message, in seq order
    ts: np.ndarray | None  # arrival times, if the dataset has them
    values: np.ndarray | None  # operator input beyond the key, if any
    meta: dict


@dataclass
class StreamArrays:
    """A stream given directly as arrays (tests, benchmarks, notebooks)."""

    key_hash: np.ndarray
    ts: np.ndarray | None = None
    values: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.key_hash = np.ascontiguousarray(self.key_hash, dtype=np.uint64)

    @property
    def messages(self) -> int:
        """Number of messages."""
        return len(self.key_hash)


class Stream:
    """A finite keyed stream in seq order: key hash and dense key id per message, optional arrival times."""

    def __init__(
        self,
        key_id: np.ndarray,
        key_table: np.ndarray,
        meta: dict | None = None,
        key_hash: np.ndarray | None = None,
        ts: np.ndarray | None = None,
        values: np.ndarray | None = None,
    ) -> None:
        self.key_id = np.ascontiguousarray(key_id, dtype=np.int64)
        self.key_table = np.asarray(key_table, dtype=object)
        n = self.key_id.size
        if self.key_id.ndim != 1 or self.key_table.ndim != 1:
            raise ValueError("key_id and key_table must be one-dimensional")
        if key_hash is None:
            # hash each distinct key once, then spread by id
            key_hash = hash_keys(self.key_table)[self.key_id]
        self.key_hash = np.ascontiguousarray(key_hash, dtype=np.uint64)
        self.ts = None if ts is None else np.ascontiguousarray(ts, dtype=np.float64)
        self.values = values
        for name, arr in (("key_hash", self.key_hash), ("ts", self.ts), ("values", self.values)):
            if arr is not None and len(arr) != n:
                raise ValueError(f"{name} has {len(arr)} entries for {n} messages")
        self.meta = dict(meta or {})
        self.meta.update(key_stats(self.counts(), self.key_table))

    @property
    def messages(self) -> int:
        """Number of messages."""
        return int(self.key_id.size)

    @property
    def distinct_keys(self) -> int:
        """Number of distinct keys that occur in the stream."""
        return int(self.key_table.size)

    def keys(self) -> np.ndarray:
        """Key string of every message (object array; builds one reference per message)."""
        return self.key_table[self.key_id]

    def counts(self) -> np.ndarray:
        """Number of messages of each key, indexed like `key_table`."""
        return np.bincount(self.key_id, minlength=self.distinct_keys)

    def slice(self, start: int, stop: int) -> Stream:
        """Messages [start, stop) as a stream of their own (key ids renumbered over the keys they hold)."""
        start, stop, _ = slice(start, stop).indices(self.messages)
        stop = max(start, stop)
        ids = self.key_id[start:stop]
        present = np.flatnonzero(np.bincount(ids, minlength=self.distinct_keys))
        # a subset of a sorted table stays sorted, so the slice is canonical too
        remap = np.zeros(self.distinct_keys, dtype=np.int64)
        remap[present] = np.arange(present.size)
        # seq range relative to the stream this one was first sliced from
        offset = self.meta.get("slice", [0, 0])[0]
        meta = {**self.meta, "slice": [offset + start, offset + stop]}
        return Stream(
            remap[ids],
            self.key_table[present],
            meta=meta,
            key_hash=self.key_hash[start:stop],
            ts=None if self.ts is None else self.ts[start:stop],
            values=None if self.values is None else self.values[start:stop],
        )

    def __repr__(self) -> str:
        return (
            f"Stream(messages={self.messages}, distinct_keys={self.distinct_keys}, p1={self.meta['p1']:.4g})"
        )


def key_stats(counts: np.ndarray, key_table: np.ndarray) -> dict:
    """The metadata the messages themselves determine: messages, distinct_keys, p1 and top_keys."""
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        return {"messages": 0, "distinct_keys": int(np.count_nonzero(counts)), "p1": 0.0, "top_keys": []}
    k = min(TOP_KEYS, counts.size)
    cutoff = np.partition(counts, counts.size - k)[counts.size - k]
    candidates = np.flatnonzero(counts >= cutoff)
    # most frequent first, ties in table order, so the list is the same however the stream was built
    top = candidates[np.lexsort((candidates, -counts[candidates]))][:k]
    return {
        "messages": n,
        "distinct_keys": int(np.count_nonzero(counts)),
        "p1": float(counts.max() / n),
        "top_keys": [[str(key_table[i]), int(counts[i])] for i in top],
    }


def stream_from_spec(spec: StreamSpec | str) -> Stream:
    """Sample the whole stream of an inline spec, hashing only its distinct key names."""
    if isinstance(spec, str):
        spec = parse_stream_spec(spec)
    raw = spec.sample()
    present = np.flatnonzero(np.bincount(raw, minlength=int(spec.params["keys"])))
    names = key_names(present)
    order = np.argsort(names, kind="stable")
    # rank of each present raw id in the sorted table
    remap = np.zeros(int(spec.params["keys"]), dtype=np.int64)
    remap[present[order]] = np.arange(present.size)
    return Stream(remap[raw], names[order].astype(object), meta=spec_meta(spec))


def spec_meta(spec: StreamSpec) -> dict:
    """Metadata an inline spec fixes before sampling: generator, params, seed, spec and exact p1."""
    return {
        "generator": spec.generator,
        "params": dict(spec.params),
        "seed": spec.seed,
        "spec": spec.text,
        # share of rank 1 (within each epoch, for drift)
        "p1_exact": zipf_p1(spec.params["z"], spec.params["keys"]),
    }
