"""Plain per-tuple Python versions of the strategies: the baseline for speed, and an oracle for the kernels.

They follow the same algorithms with the same hash family, random generator, tie rules, SpaceSaving eviction
rule and resize rules, so for a given seed they route exactly like the compiled code, one tuple at a time.
`py_grouping(name, ...)` builds the one for any strategy that has a plain version (the nine compiled ones,
lasg, flink_adaptive, kafka_adaptive and key_shared).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

import numpy as np

from .feedback import AckReport
from .ring import build_ring

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
        from .compiled.grouping import STRATEGIES
        from .params import resolve

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


class PyLoadAwareShuffle:
    """Storm's load-aware shuffle grouping ("lasg"), one tuple at a time in plain Python."""

    def __init__(self, workers: int, seed: int = 0, **params: Any) -> None:
        from .params import resolve
        from .registry import lookup

        self.name, self.n, self.seed = "lasg", workers, seed
        self.params = resolve("lasg", lookup("lasg").params, workers, params)
        self.linear = self.params["weights"] == "linear"
        self.weights = [100] * workers
        self.reported = [0.0] * workers
        self.rng = seed & MASK64
        self.clock = 0.0
        self.tick = 0
        self.cursor = -1
        self.choices: list[int] = []
        self._update(1)
        self._rebuild()

    def _draw(self, k: int) -> int:
        self.rng = (self.rng + GOLDEN) & MASK64
        return bucket(mix64(self.rng, 0), k)

    def _update(self, steps: int) -> None:
        if self.linear:
            self.weights = [int(101.0 - 100.0 * x) for x in self.reported]
            return
        least = min(self.reported)
        for _ in range(steps):
            self.weights = [
                min(100, w + 1) if x <= least + 0.05 else max(0, w - 10)
                for w, x in zip(self.weights, self.reported, strict=True)
            ]

    def _rebuild(self) -> None:
        size = max(self.params["slots"], self.n)
        total = sum(self.weights)
        if total == 0:
            choices = [i % self.n for i in range(size)]
        else:
            choices = []
            for w, weight in enumerate(self.weights):
                choices += [w] * int(weight / total * size)
            choices = choices[:size] or [max(range(self.n), key=lambda w: (self.weights[w], -w))]
            while len(choices) < size:
                choices.append(choices[self._draw(len(choices))])
        for i in range(size - 1, 0, -1):
            j = self._draw(i + 1)
            choices[i], choices[j] = choices[j], choices[i]
        self.choices, self.cursor = choices, -1

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Refresh if the clock passed a refresh instant, then give each tuple the next entry of the array."""
        if now is not None and now > self.clock:
            self.clock = now
        tick = math.floor(self.clock / self.params["refresh"])
        if tick > self.tick:
            self._update(min(tick - self.tick, 100))
            self.tick = tick
            self._rebuild()
        out = []
        for _ in keys:
            self.cursor = self.cursor + 1 if self.cursor + 1 < len(self.choices) else 0
            out.append(self.choices[self.cursor])
        return np.array(out, dtype=np.int32)

    def feedback(self, report: AckReport) -> None:
        """The newest load heard from each worker, clipped to [0, 1]."""
        self.clock = max(self.clock, report.now)
        for w, x in zip(report.workers.tolist(), report.load.tolist(), strict=True):
            self.reported[w] = min(max(x, 0.0), 1.0)

    def resize(self, workers: int) -> None:
        """A newcomer starts at load 0 and its weight; the array is rebuilt with the weights as they are."""
        if workers == self.n:
            return
        keep = min(workers, self.n)
        self.weights = self.weights[:keep] + [101 if self.linear else 100] * (workers - keep)
        self.reported = self.reported[:keep] + [0.0] * (workers - keep)
        self.n = workers
        self._rebuild()


class PyFlinkAdaptive:
    """Flink's adaptive partitioner ("flink_adaptive"), one tuple at a time in plain Python."""

    def __init__(self, workers: int, seed: int = 0, **params: Any) -> None:
        from .params import resolve
        from .registry import lookup

        self.name, self.n, self.seed = "flink_adaptive", workers, seed
        self.params = resolve("flink_adaptive", lookup("flink_adaptive").params, workers, params)
        self.backlog = [0] * workers
        self.cursor = -1

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Each tuple to the first idle, else the least backlogged (first on ties), of the next channels."""
        out = []
        for _ in keys:
            best = -1
            for i in range(1, min(self.params["max_traverse"], self.n) + 1):
                c = (self.cursor + i) % self.n
                if self.backlog[c] == 0:
                    best = c
                    break
                if best < 0 or self.backlog[c] < self.backlog[best]:
                    best = c
            self.backlog[best] += 1
            self.cursor = best
            out.append(best)
        return np.array(out, dtype=np.int32)

    def feedback(self, report: AckReport) -> None:
        """Acked tuples leave their channel's backlog, never below zero."""
        self.backlog = [max(0, b - a) for b, a in zip(self.backlog, _acked_by(report, self.n), strict=True)]

    def resize(self, workers: int) -> None:
        """A newcomer has no backlog; a cursor past the end starts before channel 0 again."""
        self.backlog = (self.backlog + [0] * workers)[:workers]
        self.cursor = self.cursor if self.cursor < workers else -1
        self.n = workers


class PyKafkaAdaptive:
    """The Kafka producer's built-in partitioner ("kafka_adaptive"), one tuple at a time in plain Python."""

    def __init__(self, workers: int, seed: int = 0, **params: Any) -> None:
        from .params import resolve
        from .registry import lookup

        self.name, self.n, self.seed = "kafka_adaptive", workers, seed
        self.params = resolve("kafka_adaptive", lookup("kafka_adaptive").params, workers, params)
        self.batch = self.params["batch"]
        self.timeout_s = self.params["availability_timeout_ms"] / 1e3
        self.backlog = [0] * workers
        self.since = [0.0] * workers
        self.rng = seed & MASK64
        self.clock = 0.0
        self.sticky = -1
        self.produced = 0

    def _draw(self, k: int) -> int:
        self.rng = (self.rng + GOLDEN) & MASK64
        return bucket(mix64(self.rng, 0), k)

    def _next(self) -> int:
        if not self.params["adaptive"]:
            return self._draw(self.n)
        queues = {
            w: -(-b // self.batch)
            for w, b in enumerate(self.backlog)
            if not (self.timeout_s > 0 and b > 0 and self.clock - self.since[w] > self.timeout_s)
        }
        if not queues:
            return self._draw(self.n)
        top = max(queues.values())
        r = self._draw(sum(top + 1 - q for q in queues.values()))
        running = 0
        for w, q in queues.items():
            running += top + 1 - q
            if running > r:
                return w
        raise AssertionError("the running sum ends above the draw")

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Each tuple to the sticky channel; after `batch` tuples there, draw the next one."""
        if now is not None and now > self.clock:
            self.clock = now
        out = []
        for _ in keys:
            if self.sticky < 0:
                self.sticky, self.produced = self._next(), 0
            w = self.sticky
            if self.backlog[w] == 0:
                self.since[w] = self.clock
            self.backlog[w] += 1
            self.produced += 1
            out.append(w)
            if self.produced >= self.batch:
                self.sticky, self.produced = self._next(), 0
        return np.array(out, dtype=np.int32)

    def feedback(self, report: AckReport) -> None:
        """Acked tuples leave their channel's backlog; an acking channel counts as available from the report's time."""
        self.clock = max(self.clock, report.now)
        if not len(report):
            return
        self.backlog = [max(0, b - a) for b, a in zip(self.backlog, _acked_by(report, self.n), strict=True)]
        for w in report.workers.tolist():
            self.since[w] = report.now

    def resize(self, workers: int) -> None:
        """A newcomer has no backlog; a sticky channel that left is dropped."""
        self.backlog = (self.backlog + [0] * workers)[:workers]
        self.since = (self.since + [self.clock] * workers)[:workers]
        if self.sticky >= workers:
            self.sticky, self.produced = -1, 0
        self.n = workers


class PyKeyShared:
    """Pulsar's Key_Shared selector with draining slots ("key_shared"), one tuple at a time in plain Python."""

    SLOT_SALT = 0x4B45595F53484152
    RING_POINT_SALT = 0x52494E47504F494E

    def __init__(self, workers: int, seed: int = 0, **params: Any) -> None:
        from .params import resolve
        from .registry import lookup

        self.name, self.n, self.seed = "key_shared", workers, seed
        self.params = resolve("key_shared", lookup("key_shared").params, workers, params)
        self.at, self.owners = self._ring(workers)
        self.sent, self.acked = [0] * workers, [0] * workers
        self.drain: dict[int, tuple[int, int]] = {}  # slot -> (worker it drains from, that worker's sent mark)
        self.last: dict[int, tuple[int, int]] = {}  # slot -> (worker of its last tuple, that worker's sent count)

    def _ring(self, workers: int) -> tuple[list[int], list[int]]:
        """Sorted slots holding a point, and their owners: the lowest worker with a point there."""
        owner: dict[int, int] = {}
        for w in range(workers):
            for i in range(self.params["points"]):
                s = bucket(mix64((w << 32) | i, self.RING_POINT_SALT), self.params["slots"])
                owner[s] = min(owner.get(s, w), w)
        at = sorted(owner)
        return at, [owner[s] for s in at]

    @staticmethod
    def _owner(at: list[int], owners: list[int], s: int) -> int:
        """Owner of the first point at or after slot s, wrapping to the first point."""
        i = bisect_left(at, s)
        return owners[i if i < len(at) else 0]

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """The owner of each key's slot, or the worker the slot drains from while its acks are short of the mark."""
        out = []
        for k in keys.tolist():
            s = bucket(mix64(k, self.SLOT_SALT), self.params["slots"])
            w = self._owner(self.at, self.owners, s)
            if s in self.drain:
                d, mark = self.drain[s]
                if self.acked[d] >= mark:
                    del self.drain[s]
                else:
                    w = d
            self.sent[w] += 1
            self.last[s] = (w, self.sent[w])
            out.append(w)
        return np.array(out, dtype=np.int32)

    def feedback(self, report: AckReport) -> None:
        """Tuples acknowledged per worker add up."""
        for w, a in zip(report.workers.tolist(), report.acked.tolist(), strict=True):
            self.acked[w] += round(a)

    def resize(self, workers: int) -> None:
        """Slots whose owner changes drain from the old owner while it holds their unacked tuples, else move."""
        if workers == self.n:
            return
        at, owners = self._ring(workers)
        drain = {}
        for s, (last_to, last_mark) in self.last.items():  # a slot never routed has nothing to drain
            old, new = self._owner(self.at, self.owners, s), self._owner(at, owners, s)
            d, mark = self.drain.get(s, (-1, 0))
            if d >= 0 and self.acked[d] < mark and new != d:
                pass  # still draining, with the mark of the change that started it
            elif new != old and last_to == old and self.acked[old] < last_mark:
                d, mark = old, last_mark
            else:
                continue
            if d < workers:  # a worker that left is gone: its slots move at once
                drain[s] = (d, mark)
        self.drain = drain
        self.last = {s: v for s, v in self.last.items() if v[0] < workers}
        keep = min(workers, self.n)
        self.sent = self.sent[:keep] + [0] * (workers - keep)
        self.acked = self.acked[:keep] + [0] * (workers - keep)
        self.at, self.owners, self.n = at, owners, workers


def _acked_by(report: AckReport, workers: int) -> list[int]:
    """Tuples each worker's acks in the report acknowledge, counted one ack at a time."""
    acked = [0] * workers
    for w, a in zip(report.workers.tolist(), report.acked.tolist(), strict=True):
        acked[w] += round(a)
    return acked


def py_grouping(name: str, workers: int, seed: int = 0, **params: Any) -> Any:
    """The plain Python version of strategy `name`."""
    if name == "lasg":
        return PyLoadAwareShuffle(workers, seed, **params)
    if name == "flink_adaptive":
        return PyFlinkAdaptive(workers, seed, **params)
    if name == "kafka_adaptive":
        return PyKafkaAdaptive(workers, seed, **params)
    if name == "key_shared":
        return PyKeyShared(workers, seed, **params)
    return PyGrouping(name, workers, seed, **params)


REFERENCE_NAMES = (
    "kg",
    "sg",
    "pkg",
    "potc",
    "porc",
    "chbl",
    "dc",
    "wc",
    "rr",
    "lasg",
    "flink_adaptive",
    "kafka_adaptive",
    "key_shared",
)
