"""Plain per-tuple versions of the compiled strategies (kg ... rr) and of SpaceSaving, with the hash family,
random generator and tie rules of the kernels, so that for a given seed they route exactly as the kernels do."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..feedback import AckReport
from ..ring import build_ring

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
RING_KEY_SALT = 0x52494E474B4559
FIRST_REFRESH = 1000


def mix64(h: int, salt: int) -> int:
    """Hash function number `salt` applied to a 64-bit hash (splitmix64 finalizer)."""
    z = h ^ ((salt * GOLDEN + 0x632BE59BD9B4E019) & MASK64)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def bucket(h: int, n: int) -> int:
    """Map a 64-bit hash onto [0, n) by multiply-shift."""
    return ((h >> 32) * n) >> 32


def optimal_choices(p: list[float], tail_mass: float, n: int, eps: float) -> int:
    """FindOptimalChoices (Proposition 4.1 of the D-Choices paper), written out plainly."""
    if n <= 2:
        return n
    if not p:
        return 2
    head_mass = 0.0
    for x in p:
        head_mass += x
    d = max(2, math.ceil(p[0] * n - 1e-12))
    while d < n:
        prefix = 0.0
        ok = True
        for h in range(1, len(p) + 1):
            prefix += p[h - 1]
            b = n - n * ((n - 1.0) / n) ** float(h * d)
            covered = b / n
            if prefix + covered ** float(d) * (head_mass - prefix) + covered**2.0 * tail_mass > b * (1.0 / n + eps):
                ok = False
                break
        if ok:
            return d
        d += 1
    return n


class PySpaceSaving:
    """SpaceSaving with counters sorted by count in blocks of equal count; evicts the front of the lowest block."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.keys = [0] * k
        self.counts = [0] * k
        self.order = list(range(k))
        self.pos = list(range(k))
        self.block = [0] * k
        self.start = [0] * k
        self.end = [0] * k
        self.end[0] = k - 1
        self.free = list(range(k - 1, 0, -1))
        self.slot_of: dict[int, int] = {}
        self.seen = 0

    def offer(self, key: int) -> int:
        """Count `key`; return its counter slot."""
        self.seen += 1
        slot = self.slot_of.get(key)
        if slot is None:
            slot = self.order[0]
            if self.counts[slot] > 0:
                del self.slot_of[self.keys[slot]]
            self.keys[slot] = key
            self.slot_of[key] = slot
        self._increment(slot)
        return slot

    def _increment(self, slot: int) -> None:
        order, pos, counts = self.order, self.pos, self.counts
        b = self.block[slot]
        e = self.end[b]
        other = order[e]
        p = pos[slot]
        order[p], pos[other] = other, p
        order[e], pos[slot] = slot, e
        counts[slot] += 1
        if self.start[b] == e:
            self.free.append(b)
        else:
            self.end[b] = e - 1
        if e + 1 < self.k and counts[order[e + 1]] == counts[slot]:
            nb = self.block[order[e + 1]]
            self.start[nb] = e
        else:
            nb = self.free.pop()
            self.start[nb] = self.end[nb] = e
        self.block[slot] = nb

    def head(self, theta: float) -> list[float]:
        """Estimated frequencies at or above theta, descending."""
        out = []
        for i in range(self.k - 1, -1, -1):
            c = self.counts[self.order[i]]
            if c == 0 or c < theta * self.seen:
                break
            out.append(c / self.seen)
        return out


class PyGrouping:
    """One strategy routed tuple by tuple in plain Python."""

    def __init__(self, name: str, workers: int, seed: int = 0, **params: Any) -> None:
        from ..compiled.grouping import STRATEGIES
        from ..params import resolve

        if name not in STRATEGIES:
            raise ValueError(f"unknown grouping {name!r}")
        self.name, self.n, self.seed = name, workers, seed
        self.params: Mapping[str, Any] = resolve(name, STRATEGIES[name].params, workers, params)
        self.loads: list[float] = [0] * workers
        self.m = 0
        self.shift = 0.0  # sum of the loads minus m, set by a resize
        self.rr = 0
        self.offset = seed % workers
        self.rng = seed & MASK64
        self.max_probes = max(1024, 64 * workers)
        self.d = 2
        self.next_refresh = min(FIRST_REFRESH, self.params.get("refresh", 1))
        if name == "chbl":
            self._build_ring()
        if "counters" in self.params:
            self.summary = PySpaceSaving(self.params["counters"])

    def _build_ring(self) -> None:
        points, owners = build_ring(self.n, self.params["replicas"])
        self.points, self.owners = [int(x) for x in points], [int(x) for x in owners]

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Route every key in order (these strategies ignore time)."""
        step = getattr(self, "_" + self.name)
        return np.array([step(int(k)) for k in keys], dtype=np.int32)

    def feedback(self, report: AckReport) -> None:
        """These strategies ignore feedback."""

    def resize(self, workers: int) -> None:
        """Drop the loads of removed workers, start new ones at the mean load; the ring grows or shrinks."""
        if workers == self.n:
            return
        if workers < self.n:
            self.loads = self.loads[:workers]
        else:
            mean = math.floor(math.fsum(self.loads) / self.n)
            self.loads = self.loads + [mean] * (workers - self.n)
        self.n = workers
        self.offset = self.seed % workers
        self.max_probes = max(1024, 64 * workers)
        self.shift = math.fsum(self.loads) - float(self.m)
        if self.name == "chbl":
            self._build_ring()
        if "counters" in self.params:
            self.next_refresh = self.m

    # selectors --------------------------------------------------------------------------------------------

    def _send(self, w: int) -> int:
        self.loads[w] += 1
        self.m += 1
        return w

    def _least(self, candidates: list[int]) -> int:
        best = candidates[0]
        for w in candidates[1:]:
            if self.loads[w] < self.loads[best]:
                best = w
        return self._send(best)

    def _all(self) -> list[int]:
        return [(self.offset + i) % self.n for i in range(self.n)]

    def _next_rr(self) -> int:
        i = self.rr if self.rr < self.n else 0
        self.rr = i + 1
        return (self.offset + i) % self.n

    def _first_spare(self, candidate) -> int:
        cap = math.ceil((1.0 + self.params["eps"]) * (self.m + self.shift + 1) / self.n)
        for i in range(len(self.points) if self.name == "chbl" else self.max_probes):
            w = candidate(i)
            if self.loads[w] < cap:
                return self._send(w)
        return self._send(min(range(self.n), key=lambda b: (self.loads[b], b)))

    def _hashes(self, key: int, d: int) -> list[int]:
        return [bucket(mix64(key, i + 1), self.n) for i in range(d)]

    # strategies -------------------------------------------------------------------------------------------

    def _kg(self, key: int) -> int:
        return self._least(self._hashes(key, 1))

    def _sg(self, key: int) -> int:
        return self._send(self._next_rr())

    def _pkg(self, key: int) -> int:
        if not self.params["distinct"]:
            return self._least(self._hashes(key, self.params["choices"]))
        picks: list[int] = []  # Storm's rule: a choice already taken moves on to the next worker
        for b in self._hashes(key, min(self.params["choices"], self.n)):
            while b in picks:
                b = (b + 1) % self.n
            picks.append(b)
        return self._least(picks)

    def _potc(self, key: int) -> int:
        self.rng = (self.rng + GOLDEN) & MASK64
        return self._least(self._hashes(mix64(self.rng, 0), 2))

    def _porc(self, key: int) -> int:
        return self._first_spare(lambda i: bucket(mix64(key, i + 1), self.n))

    def _chbl(self, key: int) -> int:
        start = bisect_left(self.points, mix64(key, RING_KEY_SALT)) % len(self.points)
        return self._first_spare(lambda i: self.owners[(start + i) % len(self.points)])

    def _in_head(self, key: int) -> bool:
        slot = self.summary.offer(key)
        return self.summary.counts[slot] >= self.params["theta"] * self.summary.seen

    def _dc(self, key: int) -> int:
        if not self._in_head(key):
            w = self._least(self._hashes(key, 2))
        elif self.d >= self.n:
            w = self._least(self._all())
        else:
            w = self._least(self._hashes(key, self.d))
        if self.m >= self.next_refresh:
            p = self.summary.head(self.params["theta"])
            tail = 1.0
            for x in p:
                tail -= x
            self.d = optimal_choices(p, max(tail, 0.0), self.n, self.params["eps"])
            self.next_refresh = self.m + min(self.params["refresh"], max(FIRST_REFRESH, self.m))
        return w

    def _wc(self, key: int) -> int:
        return self._least(self._all()) if self._in_head(key) else self._least(self._hashes(key, 2))

    def _rr(self, key: int) -> int:
        return self._send(self._next_rr()) if self._in_head(key) else self._least(self._hashes(key, 2))
