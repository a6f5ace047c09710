"""How late a source routed its tuples, beyond when the model would have: the engine's own stalls at the source.

The model routes a tuple at the step its source asked for (`SourceNode.next_wakeup`), or when an ack gives it a
credit back. The simulator steps exactly then, so nothing it routes is late. On Ray a source's loop steps when its
thread or its process's scheduler gets to it, and a loop that stalls (a busy process, a collection, a slow start)
routes the tuples that waited meanwhile late. Each tuple's lateness is the time from the later of its step's due
time and its own flush tick to the step that routed it; tuples under a millisecond late count as on time. The
counts go into log-spaced bins, so a run of any length keeps a few hundred integers per source, and the run's
p99 is taken over every source's tuples at once.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

EDGES_MS = np.geomspace(1.0, 1e5, 101)  # bin lower edges: 1 ms to 100 s, 20 bins a decade (the last is open)
ON_TIME_MS = float(EDGES_MS[0])


class Lateness:
    """Tuples routed late, counted by how late (ms) in the bins of `EDGES_MS`, and the latest."""

    def __init__(self) -> None:
        self.counts = np.zeros(len(EDGES_MS), np.int64)
        self.max_ms = 0.0

    def add(self, late_ms: np.ndarray) -> None:
        """Count the tuples of one routing, each `late_ms` late (those under `ON_TIME_MS` are on time)."""
        late = late_ms[late_ms >= ON_TIME_MS]
        if late.size:
            self.counts += np.bincount(np.searchsorted(EDGES_MS, late, side="right") - 1, minlength=len(EDGES_MS))
            self.max_ms = max(self.max_ms, float(late.max()))

    def stats(self) -> dict:
        """The counts as [lower edge ms, tuples] of the bins that have any, and the latest (ms)."""
        bins = np.flatnonzero(self.counts)
        return {"bins": [[float(EDGES_MS[b]), int(self.counts[b])] for b in bins], "max_ms": self.max_ms}


def late_p99_ms(sources: Iterable[dict]) -> float:
    """The p99 lateness (ms) over every tuple the sources routed (`routed` and `late` of each source's stats), as
    the lower edge of its bin so that it never overstates: 0.0 when fewer than 1% of tuples were late at all."""
    total, bins = 0, {}
    for s in sources:
        total += s.get("routed", 0)
        for edge, count in (s.get("late") or {}).get("bins", ()):
            bins[edge] = bins.get(edge, 0) + count
    later = 0
    for edge in sorted(bins, reverse=True):
        later += bins[edge]
        if later > 0.01 * total:
            return float(edge)
    return 0.0


def late_max_ms(sources: Iterable[dict]) -> float:
    """The latest any source routed a tuple (ms)."""
    return max(((s.get("late") or {}).get("max_ms", 0.0) for s in sources), default=0.0)


def scaled(late: dict, k: float) -> dict:
    """`late` in a time K times slower: every edge and the latest divided by k (the bins' counts are the same)."""
    return {"bins": [[edge / k, count] for edge, count in late["bins"]], "max_ms": late["max_ms"] / k}
