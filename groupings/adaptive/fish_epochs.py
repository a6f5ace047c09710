"""FISH's epoch-based key frequency statistics (Algorithm 1): decayed counters for at most `kmax` keys.

Each tuple adds 1 to its key's counter; a key that is not monitored takes a free counter at 1, or, when all
`kmax` are taken, replaces the least counter and inherits its count plus 1 (ReplaceMin, as in Space-Saving).
Every `epoch` tuples all counters are multiplied by `alpha`, so a count made j epochs ago weighs alpha^j.

The counters sit in a min-heap (the least one is at the root for ReplaceMin) and are found through an
open-addressing table. Decay multiplies every counter by the same factor, so it keeps the heap order, and each
tuple adds exactly 1 to the sum of the counters (ReplaceMin removes min and adds min + 1): the sum is the
decayed length of the stream, the denominator of a key's frequency.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import keytable
from ..jit import hot

# slots of EpochCounters.meta (int64)
USED = 0  # counters in use (|K|)
IN_EPOCH = 1  # tuples counted in the current epoch
SEEN = 2  # tuples counted so far
EPOCHS = 3  # epochs completed (decays applied, when decay is on)
REPLACED = 4  # ReplaceMin evictions so far
EPOCH_LEN = 5  # N_epoch
DECAY = 6  # 1: decay every epoch; 0: lifetime counting (the "w/o epoch" ablation)
N_META = 7

# slots of EpochCounters.mass (float64)
TOTAL = 0  # sum of all counters
TOP = 1  # largest counter
ALPHA = 2  # decay factor
N_MASS = 3


class EpochCounters(NamedTuple):
    """The monitored keys K, their decayed counters c_k and the candidate counts M_k remembered with them."""

    keys: np.ndarray  # uint64[kmax]: key monitored by each counter slot
    counts: np.ndarray  # float64[kmax]: decayed counter c_k of each slot
    choices: np.ndarray  # int64[kmax]: M_k, most candidates the slot's key was given while hot (0: none yet)
    heap: np.ndarray  # int32[kmax]: slots in use as a min-heap on counts
    where: np.ndarray  # int32[kmax]: position of each slot in the heap
    table: np.ndarray  # int32[2^b >= 2 kmax]: key -> slot (groupings.keytable), -1 when empty
    meta: np.ndarray  # int64[N_META]
    mass: np.ndarray  # float64[N_MASS]


def new_counters(kmax: int, epoch: int, alpha: float, decay: bool = True) -> EpochCounters:
    """Empty counters for at most `kmax` keys, decayed by `alpha` every `epoch` tuples (never if not `decay`)."""
    if kmax < 1 or epoch < 1:
        raise ValueError(f"epoch counters need kmax >= 1 and epoch >= 1 (got {kmax}, {epoch})")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"the decay factor alpha must be in [0, 1] (got {alpha})")
    meta = np.zeros(N_META, dtype=np.int64)
    meta[EPOCH_LEN] = epoch
    meta[DECAY] = 1 if decay else 0
    mass = np.zeros(N_MASS, dtype=np.float64)
    mass[ALPHA] = alpha
    return EpochCounters(
        keys=np.zeros(kmax, dtype=np.uint64),
        counts=np.zeros(kmax, dtype=np.float64),
        choices=np.zeros(kmax, dtype=np.int64),
        heap=np.zeros(kmax, dtype=np.int32),
        where=np.zeros(kmax, dtype=np.int32),
        table=keytable.new_table(kmax),
        meta=meta,
        mass=mass,
    )


@hot
def _sift_down(heap, where, counts, used, i):
    # a counter that grew moves towards the leaves; ties stay put, so the order is deterministic
    slot = heap[i]
    c = counts[slot]
    while True:
        child = 2 * i + 1
        if child >= used:
            break
        if child + 1 < used and counts[heap[child + 1]] < counts[heap[child]]:
            child += 1
        if counts[heap[child]] >= c:
            break
        heap[i] = heap[child]
        where[heap[i]] = i
        i = child
    heap[i] = slot
    where[slot] = i


@hot
def _sift_up(heap, where, counts, i):
    slot = heap[i]
    c = counts[slot]
    while i > 0:
        parent = (i - 1) // 2
        if counts[heap[parent]] <= c:
            break
        heap[i] = heap[parent]
        where[heap[i]] = i
        i = parent
    heap[i] = slot
    where[slot] = i


@hot
def decay(c):
    """TimeDecayingUpdate: multiply every counter by alpha (the heap order survives a common factor)."""
    counts, mass = c.counts, c.mass
    alpha = mass[ALPHA]
    total = 0.0
    for s in range(c.meta[USED]):
        counts[s] *= alpha
        total += counts[s]
    mass[TOTAL] = total  # summed afresh, so rounding never drifts across epochs
    mass[TOP] *= alpha  # rounding is monotone: the largest product is the product of the largest


@hot(inline=True)
def count(c, key):
    """Count one tuple of `key` (Algorithm 1, with the epoch's decay first) and return its counter slot."""
    meta, counts, keys, table = c.meta, c.counts, c.keys, c.table
    if meta[IN_EPOCH] == meta[EPOCH_LEN]:
        if meta[DECAY]:
            decay(c)
        meta[IN_EPOCH] = 0
        meta[EPOCHS] += 1
    meta[IN_EPOCH] += 1
    meta[SEEN] += 1
    used = meta[USED]
    slot = keytable.find(table, keys, key)
    if slot >= 0:
        counts[slot] += 1.0
        _sift_down(c.heap, c.where, counts, used, c.where[slot])
    elif used < keys.size:
        slot = used
        meta[USED] = used + 1
        keys[slot] = key
        counts[slot] = 1.0
        c.choices[slot] = 0
        keytable.insert(table, keys, slot)
        c.heap[used] = slot
        _sift_up(c.heap, c.where, counts, used)
    else:
        # ReplaceMin: the new key inherits the least count plus one, and nothing else (M_k starts afresh)
        slot = c.heap[0]
        keytable.delete(table, keys, keys[slot])
        keys[slot] = key
        counts[slot] += 1.0
        c.choices[slot] = 0
        keytable.insert(table, keys, slot)
        _sift_down(c.heap, c.where, counts, used, 0)
        meta[REPLACED] += 1
    mass = c.mass
    mass[TOTAL] += 1.0
    if counts[slot] > mass[TOP]:
        mass[TOP] = counts[slot]
    return slot


@hot
def count_all(c, keys):
    """Count every key of an array, in order."""
    for i in range(keys.size):
        count(c, keys[i])


@hot
def lookup(c, key):
    """Counter slot of `key`, or -1 when it is not monitored."""
    return keytable.find(c.table, c.keys, key)


def snapshot(c: EpochCounters) -> dict[int, tuple[float, int]]:
    """Monitored keys -> (decayed counter c_k, remembered M_k), for tests and inspection."""
    used = int(c.meta[USED])
    return {int(c.keys[s]): (float(c.counts[s]), int(c.choices[s])) for s in range(used)}
