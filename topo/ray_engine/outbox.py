"""A worker process's acks on their way back: each source's outbox, and the one poll of it that waits.

A source asks a process for its acks with a long poll (a Ray call, a message on the wire, or a future in the same
process); the process answers it with every ack of that source served so far, as soon as there is one. A source
that the process's scheduler drives takes its outbox itself (`take`) and is poked instead of answered.

Every poll names its source's incarnation (`epoch`). A poll of an incarnation that died answers nothing once a
newer one is known, so it never takes its successor's acks: its answer would go to a caller that is gone, and the
acks with it. A newer incarnation is known from its first poll, or from its first frame (`newer`): a restarted
source's first frame may be served before its first poll arrives (the frame on the wire, the poll through Ray),
and until then the poll that waits is its dead predecessor's.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any


class Outboxes:
    """The acks of every source not taken yet, and each source's waiting poll; safe to use from any thread."""

    def __init__(self, poke: Callable[[int], None]) -> None:
        self._poke = poke  # a driven source has acks: its scheduler steps it
        self._lock = threading.Lock()  # filled by the workers' server threads, taken by the sources' threads
        self._outbox: dict[int, list] = defaultdict(list)  # source -> acks not yet taken
        self._waiters: dict[int, concurrent.futures.Future] = {}  # source -> its poll waiting for an ack
        self._epochs: dict[int, int] = defaultdict(int)  # source -> its newest incarnation known here
        # sources the scheduler drives (they take their acks): kept under the lock, as `post` on any thread must
        # know at once whether to answer a poll or poke the scheduler
        self.driven: set[int] = set()

    def post(self, acks: list[tuple[int, Any]]) -> None:
        """Put (source, ack) pairs in their sources' outboxes, in order, and hand each source's poll, if one waits,
        its whole outbox once; a source the scheduler drives is poked instead, and takes its outbox itself."""
        answers, pokes = [], []
        with self._lock:
            for source, ack in acks:
                self._outbox[source].append(ack)
            for source in {source for source, _ in acks}:
                waiter = self._waiters.pop(source, None)
                if waiter is not None:
                    answers.append((waiter, self._outbox[source]))
                    self._outbox[source] = []
                elif source in self.driven:
                    pokes.append(source)
        for waiter, out in answers:
            waiter.set_result(out)  # outside the lock: the waiter's callbacks may run here
        for source in pokes:
            self._poke(source)

    def take(self, source: int) -> list:
        """Every ack for `source` not taken yet (a source the scheduler drives, on the scheduler's thread)."""
        with self._lock:
            out, self._outbox[source] = self._outbox[source], []
        return out

    def newer(self, source: int, epoch: int) -> None:
        """A frame of `source`'s incarnation `epoch` came in: a poll of an earlier incarnation that still waits is
        a dead one's, and is answered with nothing before this incarnation's acks could reach it."""
        if epoch <= self._epochs.get(source, 0):  # (the common case, without the lock: epochs only grow)
            return
        with self._lock:
            stale = self._advance(source, epoch)
        if stale is not None:
            stale.set_result([])

    def _advance(self, source: int, epoch: int) -> concurrent.futures.Future | None:
        """Know incarnation `epoch` of `source` (lock held); the dead incarnation's poll to let go, if one waits."""
        if epoch <= self._epochs[source]:
            return None
        self._epochs[source] = epoch
        return self._waiters.pop(source, None)

    def poll(self, source: int, epoch: int = 0) -> concurrent.futures.Future:
        """A future of every ack for `source` not taken yet, done once there is at least one (from any thread: a
        source of this process waits on it directly). A poll of an incarnation older than the newest known (its
        caller died, the call lives on) answers nothing, so it never takes its successor's acks."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            stale = self._advance(source, epoch)
            if epoch < self._epochs[source]:
                out: list | None = []
            elif self._outbox[source]:
                out, self._outbox[source] = self._outbox[source], []
            else:
                # one poll waits per source: an earlier one still waiting is answered with nothing rather than
                # dropped, as a future no one completes would hang whoever waits on it (the acks stay here)
                out, stale = None, self._waiters.pop(source, None) or stale
                self._waiters[source] = future
        if stale is not None:
            stale.set_result([])
        if out is not None:
            future.set_result(out)
        return future

    def drive(self, source: int, poll: concurrent.futures.Future | None) -> bool:
        """From now on the scheduler drives `source`, which takes its acks with `take`. True when its `poll` was
        still waiting (it will not be answered); else the poll has its answer, or is about to."""
        with self._lock:
            self.driven.add(source)
            if poll is not None and self._waiters.get(source) is poll:
                del self._waiters[source]
                return True
        return False

    def undrive(self, source: int) -> None:
        """`source` polls for its acks again."""
        with self._lock:
            self.driven.discard(source)
