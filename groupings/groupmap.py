"""Keys to groups to workers: one versioned map for CG's virtual workers, ALBIC's key groups and Gedik's functions.

Every strategy that adapts without re-hashing keys puts a fixed layer of groups between keys and workers and
changes only which worker owns each group: CG's virtual workers (PoRC picks one per key, the map is what the
idle/busy signals move), ALBIC's key groups (a fixed hash picks one, the MILP places them). Gedik's partitioning
function is not an array of groups, but it is versioned the same way. `Versions` keeps the current value and the
one it replaced, since an engine migrating state looks every moved key up under both; `GroupMap` is the array
of owners as such a value, with the edits the papers make to it (move, join, leave, apportion). Owner arrays are
never changed in place, so a version, once installed, stays what it was.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from collections.abc import Sequence
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


class Versions(Generic[T]):
    """The current version of a partitioning and the one it replaced (only those two are kept)."""

    def __init__(self, value: T, version: int = 0) -> None:
        self.version = int(version)  # bumped by every install
        self.current = value
        self._previous: tuple[int, T] | None = None

    def install(self, value: T) -> int:
        """Make `value` the current version (the one it replaces stays readable); returns the new version."""
        self._previous = (self.version, self.current)
        self.current = value
        self.version += 1
        return self.version

    @property
    def previous(self) -> T | None:
        """The version the current one replaced, None before the first install."""
        return None if self._previous is None else self._previous[1]

    def kept(self) -> list[int]:
        """Version numbers that `get` answers for: the current one, then the previous one if any."""
        return [self.version] + ([self._previous[0]] if self._previous is not None else [])

    def get(self, version: int | None = None) -> T:
        """The value of `version` (default: current); ValueError for a version no longer kept."""
        if version is None or version == self.version:
            return self.current
        if self._previous is not None and version == self._previous[0]:
            return self._previous[1]
        raise ValueError(f"version {version} is not kept (kept: {self.kept()})")

    def copy(self) -> Versions[T]:
        """An independent holder of the same versions (values are never changed in place, so they are shared)."""
        return copy.copy(self)


class GroupMap(Versions[np.ndarray]):
    """Owner (int32 worker) of each group, the groups each worker holds in the order it got them, and the owner
    array the last edit replaced. Every edit installs a new version."""

    def __init__(self, owner: Sequence[int] | np.ndarray, workers: int | None = None) -> None:
        owner = np.array(owner, dtype=np.int32)
        if owner.ndim != 1 or owner.size == 0 or owner.min() < 0:
            raise ValueError("a group map needs at least one group, each owned by a worker id >= 0")
        n = int(owner.max()) + 1 if workers is None else int(workers)
        if n < int(owner.max()) + 1:
            raise ValueError(f"owners go up to {int(owner.max())}, beyond {n} workers")
        super().__init__(owner)
        self._held: list[deque[int]] = [deque() for _ in range(n)]
        for g, w in enumerate(owner.tolist()):
            self._held[w].append(g)

    @classmethod
    def striped(cls, groups: int, workers: int) -> GroupMap:
        """Group g on worker g mod n: equal shares, interleaved (CG's start, ALBIC's even spread)."""
        if groups < workers or workers < 1:
            raise ValueError(f"{groups} groups cannot give each of {workers} workers one")
        return cls(np.arange(groups) % workers, workers)

    @classmethod
    def blocks(cls, shares: Sequence[int]) -> GroupMap:
        """Worker w holds the next shares[w] groups, in order (a map rebuilt to given shares)."""
        if len(shares) == 0 or min(shares) < 0 or sum(shares) == 0:
            raise ValueError("blocks need one non-negative share per worker, not all zero")
        return cls(np.repeat(np.arange(len(shares)), shares), len(shares))

    # --- reading

    @property
    def groups(self) -> int:
        """Number of groups (fixed for the life of the map)."""
        return int(self.current.size)

    @property
    def workers(self) -> int:
        """Workers the map knows of (some may hold no group)."""
        return len(self._held)

    def lookup(self, groups: np.ndarray, version: int | None = None) -> np.ndarray:
        """Owner (int32) of each group under `version` (default: current)."""
        return self.get(version)[groups]

    def held(self, worker: int) -> list[int]:
        """The groups `worker` holds, in the order it got them."""
        return list(self._held[worker])

    def holdings(self) -> np.ndarray:
        """How many groups each worker holds."""
        return np.array([len(h) for h in self._held], dtype=np.int64)

    def holds(self, worker: int) -> int:
        """How many groups `worker` holds (one worker's `holdings`, without counting every other's)."""
        return len(self._held[worker])

    # --- edits (each installs one new version)

    def move(self, donor: int, receiver: int) -> int:
        """The donor's longest-held group goes to the receiver (first come, first served); returns the group."""
        if not self._held[donor]:
            raise ValueError(f"worker {donor} holds no group to give")
        owner = self.current.copy()
        g = self._give(owner, self._held[donor].popleft(), receiver)
        self._install_edit(owner)
        return g

    def join(self, workers: int) -> int:
        """Workers up to `workers` join; each newcomer takes groups, one at a time from the worker holding the most
        (lowest id on ties), until it has the average (rounded down). Returns the groups moved."""
        old = self.workers
        if workers < old:
            raise ValueError(f"join grows the workers (from {old}, got {workers})")
        self._held.extend(deque() for _ in range(workers - old))
        owner, moves = self.current.copy(), 0
        average = self.groups // workers
        for new in range(old, workers):
            while len(self._held[new]) < average:
                donor = max(range(workers), key=lambda u: (len(self._held[u]), -u))
                self._give(owner, self._held[donor].popleft(), new)
                moves += 1
        self._install_edit(owner)
        return moves

    def leave(self, remaining: int) -> int:
        """Workers `remaining` and up leave, the last first; each of their groups goes, one at a time, to the
        remaining worker holding the fewest (lowest id on ties). Returns the groups moved."""
        if not 1 <= remaining <= self.workers:
            raise ValueError(f"between 1 and {self.workers} workers may remain (got {remaining})")
        leaving = self._held[remaining:]
        del self._held[remaining:]
        owner, moves = self.current.copy(), 0
        for held in reversed(leaving):
            while held:
                receiver = min(range(remaining), key=lambda u: (len(self._held[u]), u))
                self._give(owner, held.popleft(), receiver)
                moves += 1
        self._install_edit(owner)
        return moves

    def install(self, owner: np.ndarray) -> int:
        """A whole new placement of the same groups (ALBIC's plan): groups that stay keep their place in their
        owner's order, groups that moved join the end of their new owner's, lowest first."""
        owner = np.ascontiguousarray(owner, dtype=np.int32)
        if owner.shape != self.current.shape or owner.min() < 0:
            raise ValueError(f"a placement gives each of the {self.groups} groups a worker id >= 0")
        while len(self._held) <= int(owner.max()):
            self._held.append(deque())
        for w, held in enumerate(self._held):
            self._held[w] = deque(g for g in held if owner[g] == w)
        for g in np.flatnonzero(owner != self.current).tolist():
            self._held[int(owner[g])].append(g)
        return super().install(owner)

    def restore(self, owner: np.ndarray, held: list[list[int]], version: int, previous: np.ndarray | None) -> None:
        """Take a state edited elsewhere (a compiled copy of the edits): the owners, each worker's groups in the
        order it got them, the version, and the owners the last edit replaced (None: no edit since, keep them)."""
        if previous is not None:
            self._previous = (version - 1, previous)
        self.current, self.version = owner, version
        self._held = [deque(h) for h in held]

    def _install_edit(self, owner: np.ndarray) -> int:
        # the edit has already updated the holdings
        return Versions.install(self, owner)

    def copy(self) -> GroupMap:
        """An independent map with the same versions."""
        out = copy.copy(self)
        out._held = [deque(h) for h in self._held]
        return out

    def _give(self, owner: np.ndarray, group: int, worker: int) -> int:
        owner[group] = worker
        self._held[worker].append(group)
        return group


def apportion(weights: Sequence[float], total: int, floor: int) -> list[int]:
    """Integer shares summing to `total`, each at least `floor`, the rest split by weight (largest remainder)."""
    spare = total - floor * len(weights)
    if spare < 0:
        raise ValueError(f"{total} groups cannot give {len(weights)} workers {floor} each")
    mass = sum(weights)
    exact = [w * spare / mass for w in weights] if mass > 0 else [spare / len(weights)] * len(weights)
    shares = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (shares[i] - exact[i], i))
    for i in by_remainder[: spare - sum(shares)]:
        shares[i] += 1
    return [floor + s for s in shares]
