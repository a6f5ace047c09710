"""Key_Shared ("key_shared"): Pulsar's Key_Shared subscription with its consistent-hashing selector (Pulsar 4.0).

Pulsar's broker hands each message of a Key_Shared subscription to one consumer chosen by the message's key, and
since PIP-379 (Pulsar 4.0) it keeps a key on one consumer at a time across membership changes. The facts kept here:

    * Slots. A key hashes into a fixed space of 65,536 slots (Pulsar: Murmur3 32-bit of the key bytes, modulo the
      range; it keeps slot 0 for "no hash" and uses 1..65,535). Here a key arrives as a 64-bit hash
      (`groupings.hashing`), and its slot is `bucket(mix64(key, SLOT_SALT), slots)`: every slot is used.
    * Ring. Each consumer puts `points` points on the same slot space (Pulsar's
      `subscriptionKeySharedConsistentHashingReplicaPoints`, default 100; Pulsar hashes the consumer's name, its
      name index and the point index). Here worker w's point i sits at the slot of the ring position
      `groupings.ring.build_ring` gives (w, i), which depends on neither the seed nor the worker count, so every
      source agrees. A key goes to the owner of the first point at or after its slot, wrapping past the last
      point to the first (Pulsar's `ceilingEntry`, else `firstEntry`). When points of several workers share a
      slot, the worker added first keeps it and the others wait behind it (Pulsar's colliding consumers); workers
      join and leave at the top index here, so that is the lowest index.
    * Draining (PIP-379). When a membership change gives a slot a new owner while the old owner still has
      unacknowledged messages of that slot, the slot drains: it stays with the old owner until those messages
      are acknowledged, then goes to the new owner. A slot with nothing pending moves at once. A slot whose
      new owner is the one it is draining from stops draining. When a consumer disconnects, Pulsar puts its
      pending messages back for redelivery and its slots move at once: a worker that leaves here is gone for the
      source (`topo.model.source` refuses tuples for a worker that left), so its slots move at once too, and no
      slot drains from it.

What a source sees of the pending messages is what acks carry (`AckReport.acked`: tuples of this source an ack
acknowledges). The grouping counts the tuples it sent to each worker and the tuples acked by each; for every
slot it remembers the worker its last tuple went to and that worker's sent count right after it. At a
membership change a slot whose owner changes drains if its last tuple went to the old owner and that worker's
acked count is still below the mark; the slot goes to the new owner from the first tuple after the acked count
reaches the mark (acks come back in sending order on each channel, so then everything of the slot sent there
before the change is served).

What differs from Pulsar: Pulsar holds back (does not dispatch) the messages of a draining slot; a grouping must
route every tuple at once, so here they keep going to the old owner while the slot drains, and the switch waits
only for what was sent before the change: tuples of the slot routed to the old owner during the drain may still be
queued there when the slot moves. The mark is fixed at the change, so a hot key cannot hold its slot forever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import registry
from ..checks import as_key_hashes, check_now, check_report, check_workers, per_worker
from ..contract import Adaptive
from ..feedback import AckReport
from ..hashing import bucket, mix64
from ..jit import hot
from ..params import Param, at_least_one
from ..ring import build_ring

SLOT_SALT = np.uint64(0x4B45595F53484152)  # a key's slot, mix64(key, SLOT_SALT) (apart from F_i and ring keys)
SLOTS = 65_536  # Pulsar's key hash range (2 << 15)
NONE = -1  # no worker: a slot not draining, or never routed
# slots of the statistics counters
MESSAGES, DRAINED_TUPLES, DRAINS, DRAINS_ENDED = 0, 1, 2, 3


def _slot_space(value: int, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: between 2 and 2^24 slots (the slot tables are kept in memory per source)."""
    return None if 2 <= value <= 1 << 24 else "must be in [2, 2^24]"


PARAMS = (
    Param(
        "points",
        int,
        100,
        at_least_one,
        "ring points per worker (Pulsar's subscriptionKeySharedConsistentHashingReplicaPoints)",
    ),
    Param("slots", int, SLOTS, _slot_space, "slots of the key hash space (Pulsar: 65,536)"),
)


def ring_slots(workers: int, points: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """The ring on the slot space: sorted distinct slots holding a point, and the worker owning each.

    A slot holding points of several workers belongs to the lowest index, the one that joined first.
    """
    positions, owners = build_ring(workers, points)
    at = ((positions >> np.uint64(32)) * np.uint64(slots) >> np.uint64(32)).astype(np.int64)  # hashing.bucket
    order = np.lexsort((owners, at))
    at, owners = at[order], owners[order]
    first = np.concatenate(([True], at[1:] != at[:-1]))  # the lowest owner of each slot comes first
    return at[first], owners[first].astype(np.int32)


def slot_owners(workers: int, points: int, slots: int) -> np.ndarray:
    """Owner (int32) of every slot: the worker of the first ring point at or after it, wrapping to the first."""
    at, owners = ring_slots(workers, points, slots)
    following = np.searchsorted(at, np.arange(slots, dtype=np.int64), side="left")
    following[following == at.size] = 0
    return owners[following]


@hot
def route_key_shared(keys, out, owner, drain_from, drain_mark, last_to, last_mark, sent, acked, counters):
    """Each tuple to its slot's owner, or to the worker its slot drains from until that worker's acks reach the mark."""
    slots = owner.size
    for j in range(keys.size):
        s = bucket(mix64(keys[j], SLOT_SALT), slots)
        w = owner[s]
        d = drain_from[s]
        if d != NONE:
            if acked[d] >= drain_mark[s]:
                drain_from[s] = NONE  # drained: the new owner takes the slot from this tuple on
                counters[DRAINS_ENDED] += 1
            else:
                w = d
                counters[DRAINED_TUPLES] += 1
        sent[w] += 1
        last_to[s] = w
        last_mark[s] = sent[w]
        out[j] = w
    counters[MESSAGES] += keys.size


class KeyShared(Adaptive):
    """One source's Key_Shared selector: slots on a consistent-hashing ring, draining slots kept until acked."""

    name = "key_shared"

    def __init__(self, workers: int, seed: int, params: Mapping[str, Any]) -> None:
        super().__init__(workers, seed, params)
        slots = self.params["slots"]
        self._owner = slot_owners(self.workers, self.params["points"], slots)
        self._drain_from = np.full(slots, NONE, dtype=np.int32)  # worker a slot drains from, NONE when not
        self._drain_mark = np.zeros(slots, dtype=np.int64)  # its sent count the acks must reach
        self._last_to = np.full(slots, NONE, dtype=np.int32)  # worker the slot's last tuple went to
        self._last_mark = np.zeros(slots, dtype=np.int64)  # that worker's sent count right after it
        self._sent = np.zeros(self.workers, dtype=np.int64)  # tuples routed to each worker
        self._acked = np.zeros(self.workers, dtype=np.int64)  # tuples the acks of each worker acknowledged
        self._counters = np.zeros(4, dtype=np.int64)
        self._moved = 0  # slots whose owner the last membership change changed

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Worker (int32) of each key hash, in order; time plays no part (`now` is checked only)."""
        keys = as_key_hashes(keys)
        check_now(now)
        out = np.empty(keys.size, dtype=np.int32)
        if keys.size:
            route_key_shared(
                keys,
                out,
                self._owner,
                self._drain_from,
                self._drain_mark,
                self._last_to,
                self._last_mark,
                self._sent,
                self._acked,
                self._counters,
            )
        return out

    def feedback(self, report: AckReport) -> None:
        """Count the tuples each worker's acks acknowledged: draining slots wait for these counts."""
        check_report(report, self.workers)
        if len(report):
            acked = np.bincount(report.workers, weights=np.rint(report.acked), minlength=self.workers)
            self._acked += acked.astype(np.int64)

    def resize(self, workers: int) -> None:
        """Workers [0, workers) from now on: the ring gains or loses the top workers' points, and every slot whose
        owner changes either moves at once or drains from the worker that holds its unacknowledged tuples."""
        workers = check_workers(workers)
        if workers == self.workers:
            return
        owner = slot_owners(workers, self.params["points"], self.params["slots"])
        draining = self._drain_from != NONE
        drainer = np.where(draining, self._drain_from, 0)
        draining &= self._acked[drainer] < self._drain_mark  # still waiting for acks
        draining &= owner != self._drain_from  # a slot given back to the worker it drains from stops draining
        # a slot not draining whose owner changes drains if its last tuple went to the old owner, still unacked
        last = np.where(self._last_to != NONE, self._last_to, 0)
        pending = (self._last_to == self._owner) & (self._acked[last] < self._last_mark)
        starts = ~draining & (owner != self._owner) & pending
        from_ = np.where(draining, self._drain_from, np.where(starts, self._owner, NONE))
        mark = np.where(draining, self._drain_mark, self._last_mark)
        gone = from_ >= workers  # a worker that left is gone: its slots move at once (Pulsar: on disconnect)
        from_[gone] = NONE
        self._drain_from = from_.astype(np.int32)
        self._drain_mark = np.where(self._drain_from != NONE, mark, 0)
        self._last_to[self._last_to >= workers] = NONE  # a worker that rejoins starts its counts again
        self._counters[DRAINS] += int(np.count_nonzero(starts & ~gone))
        self._moved = int(np.count_nonzero(owner != self._owner))
        self._owner = owner
        self._sent = per_worker(self._sent, workers, 0)
        self._acked = per_worker(self._acked, workers, 0)
        self.workers = workers

    def owners(self, keys: np.ndarray) -> np.ndarray:
        """The ring's owner (int32) of each key hash now, whether or not its slot is draining (no state changes)."""
        return self._owner[key_slots(keys, self.params["slots"])]

    def draining_slots(self) -> int:
        """Slots that still drain from a worker whose acks have not reached the slot's mark."""
        draining = self._drain_from != NONE
        drainer = np.where(draining, self._drain_from, 0)
        return int(np.count_nonzero(draining & (self._acked[drainer] < self._drain_mark)))

    def stats(self) -> dict:
        """Messages, tuples sent to a draining slot's old owner, drains started and ended, slots moved last."""
        return {
            "messages": int(self._counters[MESSAGES]),
            "drained_tuples": int(self._counters[DRAINED_TUPLES]),
            "drains": int(self._counters[DRAINS]),
            "drains_ended": int(self._counters[DRAINS_ENDED]),
            "draining_slots": self.draining_slots(),
            "moved_slots": self._moved,
        }

    def local_loads(self) -> np.ndarray:
        """Tuples this source sent to each worker (the counts of a removed worker are dropped)."""
        return self._sent.astype(np.float64)


def key_slots(keys: np.ndarray, slots: int = SLOTS) -> np.ndarray:
    """The slot of each key hash, as routing computes it (vectorized, for `owners` and tests)."""
    keys = as_key_hashes(keys)
    out = np.empty(keys.size, dtype=np.int64)
    _fill_slots(keys, slots, out)
    return out


@hot
def _fill_slots(keys, slots, out):
    """The slot of each key hash, as routing computes it."""
    for j in range(keys.size):
        out[j] = bucket(mix64(keys[j], SLOT_SALT), slots)


registry.register(
    "key_shared",
    KeyShared.factory,
    params=PARAMS,
    doc="Pulsar's Key_Shared subscription (4.0): key slots on a consistent-hashing ring, 100 points per worker; a "
    "moved slot drains on its old owner until its tuples sent before the change are acked (PIP-379)",
)
