"""How input reaches the sources, the same on both engines: which source gets which message, when it arrives,
and the seed of each source's grouping."""

from __future__ import annotations

import numpy as np


def source_seed(seed: int, source: int) -> int:
    """The grouping seed of one source, derived from the run seed (independent streams per source)."""
    return int(np.random.SeedSequence([seed, source]).generate_state(1)[0])


def arrival_times(messages: int, rate: float | None, ts: np.ndarray | None = None) -> np.ndarray | None:
    """Arrival time (s) of each message: seq / rate, or the stream's ts rescaled to that mean rate."""
    if rate is None:
        return None
    if ts is None or messages < 2:
        return np.arange(messages) / rate
    # keep the dataset's burstiness but run it at the requested mean rate; never let time go backwards
    relative = np.maximum.accumulate(np.asarray(ts, dtype=np.float64) - float(ts[0]))
    span = float(relative[-1])
    if not span > 0:
        return np.arange(messages) / rate
    return relative * ((messages - 1) / rate / span)


def source_keys(key_hash: np.ndarray, source: int, sources: int) -> np.ndarray:
    """Source `source`'s key hashes: the stream's own array when it is the only source and the array is writable
    (the simulator's compiled loop is built for writable arrays; nothing writes to them), else a copy of its share."""
    if sources == 1 and key_hash.flags.writeable:
        return key_hash
    return key_hash[source::sources].copy()


def source_share(values: np.ndarray | None, source: int, sources: int) -> np.ndarray | None:
    """Source `source`'s share of a per-message array: messages source, source + sources, ... (shuffle into sources)."""
    return None if values is None else np.ascontiguousarray(np.asarray(values)[source::sources])
