"""A tiny discrete-event kernel: a simulated clock and a priority queue of timed actions (SimPy's core).

The model registers actions ("send this source's next batch", "this ack reaches its source") at simulated
times; `run` pops them in time order and calls them, and each action may schedule more. Actions due at the
same time run by priority, then in the order they were scheduled, so a run is fully deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from itertools import count

# priorities for actions due at the same instant: the world changes first, a worker finishes a buffer and its ack
# lands before anything new arrives, and a source steps last, once every ack of that instant has landed
WORLD = 0
DONE = 1
ACK = 2
ARRIVE = 3
SEND = 4


class Kernel:
    """A simulated clock and the actions waiting to happen, run in (time, priority, arrival) order."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.processed = 0
        self._queue: list[tuple[float, int, int, Callable[..., None], tuple]] = []
        self._order = count()

    def schedule(self, at: float, action: Callable[..., None], *args: object, priority: int = SEND) -> None:
        """Have `action(*args)` run at simulated time `at` (never earlier than now)."""
        if at < self.now:
            raise ValueError(f"cannot schedule at {at!r}, before the current time {self.now!r}")
        heapq.heappush(self._queue, (at, priority, next(self._order), action, args))

    def pending(self) -> int:
        """Number of actions still waiting."""
        return len(self._queue)

    def run(self, until: float | None = None) -> None:
        """Run actions in time order until none is left (or the next one is later than `until`)."""
        queue = self._queue
        while queue:
            if until is not None and queue[0][0] > until:
                self.now = until
                return
            at, _, _, action, args = heapq.heappop(queue)
            self.now = at
            self.processed += 1
            action(*args)
