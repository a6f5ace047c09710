"""Plain per-tuple versions of the strategies that learn from acks: Storm's load-aware shuffle, Flink's and
Kafka's adaptive partitioners, and Pulsar's Key_Shared selector with its draining slots."""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any

import numpy as np

from ..feedback import AckReport
from .plain import GOLDEN, MASK64, bucket, mix64


class PyLoadAwareShuffle:
    """Storm's load-aware shuffle grouping ("lasg"), one tuple at a time in plain Python."""

    def __init__(self, workers: int, seed: int = 0, **params: Any) -> None:
        from ..params import resolve
        from ..registry import lookup

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
        from ..params import resolve
        from ..registry import lookup

        self.name, self.n, self.seed = "flink_adaptive", workers, seed
        self.params = resolve("flink_adaptive", lookup("flink_adaptive").params, workers, params)
        self.routed, self.acked = [0] * workers, [0] * workers
        self.size = max(1, self.params["buffer_tuples"])
        self.cursor = -1

    @property
    def backlog(self) -> list[int]:
        """The tuples unacked on each channel."""
        return [r - min(a, r) for r, a in zip(self.routed, self.acked, strict=True)]

    def _load(self, c: int) -> tuple[int, int]:
        """(buffers held, tuples unread) of channel c."""
        r, a = self.routed[c], min(self.acked[c], self.routed[c])
        return -(-r // self.size) - a // self.size, r - a

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        """Each tuple to the first idle, else the least loaded (first on ties), of the next channels."""
        out = []
        for _ in keys:
            best = -1
            for i in range(1, min(self.params["max_traverse"], self.n) + 1):
                c = (self.cursor + i) % self.n
                if self._load(c)[0] == 0:
                    best = c
                    break
                if best < 0 or self._load(c) < self._load(best):
                    best = c
            self.routed[best] += 1
            self.cursor = best
            out.append(best)
        return np.array(out, dtype=np.int32)

    def feedback(self, report: AckReport) -> None:
        """Acked tuples leave their channel's load, never more than it was sent."""
        self.acked = [min(a + got, r) for a, got, r in zip(self.acked, _acked_by(report, self.n), self.routed,
                                                              strict=True)]

    def resize(self, workers: int) -> None:
        """A newcomer has no backlog; a cursor past the end starts before channel 0 again."""
        self.routed = (self.routed + [0] * workers)[:workers]
        self.acked = (self.acked + [0] * workers)[:workers]
        self.cursor = self.cursor if self.cursor < workers else -1
        self.n = workers


class PyKafkaAdaptive:
    """The Kafka producer's built-in partitioner ("kafka_adaptive"), one tuple at a time in plain Python."""

    def __init__(self, workers: int, seed: int = 0, **params: Any) -> None:
        from ..params import resolve
        from ..registry import lookup

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
        from ..params import resolve
        from ..registry import lookup

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
