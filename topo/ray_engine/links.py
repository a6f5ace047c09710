"""A source's links to the worker processes, as a part of the source (`source.Source` mixes it in).

Buffers go out as one frame per worker process and step; acks come back through one long poll per process that
answers with every ack of this source's buffers served so far. Between the processes of Storm's model on one node
both go over the wire (`wire.Wire`); otherwise (a lone source actor, another node, a peer that died and has not
told its new address yet) they are Ray calls. In
Storm's process model a source and some workers share a process: then the buffers are handed to that process
as they are (`protocol.Handover`), with no Ray call, no serialization and no event loop in between, and everything
else (credits, acks, replay) stays the same. In sleep mode the process's scheduler drives the source's loop
(`attached`, `detached`) and the source takes its process's acks from its outbox on each pass; on its own thread
(recovery, the drain, cpu mode) it waits on a long poll there, a future its workers complete. Every poll is a
`concurrent.futures.Future` (`ObjectRef.future()` for a Ray call), so one wait covers in-process and remote
processes alike.
"""

from __future__ import annotations

import concurrent.futures
import time

from ray.exceptions import RayActorError

from topo.ray_engine.protocol import Handover, pack_frame
from topo.ray_engine.recovery import FAILED, PENDING
from topo.ray_engine.wire import WireLost

FIRST = concurrent.futures.FIRST_COMPLETED


def _landed(poll: concurrent.futures.Future) -> None:
    poll.landed = time.time()  # the loop may take the answer later (at its next step)


class Links:
    """Needs the source's `workers`, `_hosts`, `local`, `hand_over`, `driver`, `_pending`, `_polls`, `_buffer`,
    `_in_flight`, `_suspects`, `count`, `index`, `epoch` and `_acked`."""

    def _send(self, entries: list) -> None:
        """Put buffers on the wire, one frame per worker process; each stays in the replay buffer until committed,
        and its ack comes back through that process's long poll."""
        frames: dict[int, list] = {}
        for entry in entries:
            frames.setdefault(self.workers[entry.worker].host_index, []).append(entry)
        now = time.time()
        for h, group in frames.items():
            if self.local is not None and self.local[1] == h:
                self.hand_over(Handover(self.index, group), now)  # in-process: no Ray call, nothing packed
                self.count.frames["process"] += 1
            else:
                frame = pack_frame(self.index, group)
                wire = self._wire()
                if wire is not None and wire.send_frame(h, frame, now, self._resolver(h)):
                    self.count.frames["wire"] += 1
                else:
                    self._hosts[h].host.process.remote(frame, now)  # a failure shows on the poll
                    self.count.frames["ray"] += 1
            waiting = self._pending.setdefault(h, {})
            for entry in group:
                entry.state, entry.sent_s = PENDING, now
                entry.sends += 1
                self._buffer[entry.batch_id] = entry
                self._in_flight[entry.worker] += 1
                waiting[(entry.worker, entry.batch_id)] = entry
            if h not in self._polls and not (self.driver is not None and self.local[1] == h):
                self._polls[h] = self._long_poll(h)  # (a driven source takes its process's acks itself)

    def _long_poll(self, h: int) -> concurrent.futures.Future:
        """Process h's next answer with this source's acks, as a future that notes when it landed."""
        if self.local is not None and self.local[1] == h:
            poll = self.local[0].outboxes.poll(self.index, self.epoch)  # in-process: a future the workers complete
        else:
            wire = self._wire()
            poll = None if wire is None else wire.poll(h, self.index, self.epoch, self._resolver(h))
            if poll is None:
                poll = self._hosts[h].host.acks.remote(self.index, self.epoch).future()
            if self.driver is not None:
                poll.add_done_callback(self._poke)  # the scheduler that drives this source takes it in a pass
        poll.add_done_callback(_landed)
        return poll

    def _wire(self):
        """The wire of this source's process to its peers on the node (`wire.Wire`), or None: Ray carries all."""
        return getattr(self.local[0], "wire", None) if self.local is not None else None

    def _resolver(self, h: int):
        """How the wire learns process h's address again after h died: a Ray call, answered once h is back."""
        return lambda: self._hosts[h].host.wire_address.remote().future()

    def _poke(self, _poll: concurrent.futures.Future) -> None:
        driver = self.driver
        if driver is not None:
            driver.poke(self.index)

    def _all_inflight(self) -> list:
        """The long polls of the processes that owe this source an ack."""
        return [poll for h, poll in self._polls.items() if self._pending.get(h)]

    def _wait(self, polls: list, timeout: float | None = None) -> None:
        """Block until one of `polls` has acks (or the timeout), then take every answer that is ready."""
        clock = time.perf_counter()
        if not polls:
            time.sleep(timeout if timeout is not None else 0.001)
            self.waited_s += time.perf_counter() - clock
            return
        concurrent.futures.wait(polls, timeout=timeout, return_when=FIRST)
        self.waited_s += time.perf_counter() - clock
        for poll in polls:
            if poll.done():
                self._take(poll)

    def _poll(self) -> None:
        """Take every answer that has arrived, without blocking."""
        for poll in self._all_inflight():
            if poll.done():
                self._take(poll)

    def _take(self, poll: concurrent.futures.Future, h: int | None = None, again: bool = True) -> None:
        """A long poll answered: feed its acks to the node, and poll that process again."""
        if h is None:
            h = next(h for h, p in self._polls.items() if p is poll)
            del self._polls[h]
        waiting = self._pending.get(h, {})
        try:
            acks = poll.result()
        except (RayActorError, WireLost):
            # the process died: every buffer it owed an ack may be lost
            for entry in waiting.values():
                self._lost(entry)
            waiting.clear()
            return
        self._take_acks(h, acks, getattr(poll, "landed", None) or time.time())
        if again:
            self._polls[h] = self._long_poll(h)

    def _lost(self, entry) -> None:
        """A buffer sent and taken off its process's waiting list, whose ack will never come: its worker is
        suspect, and its recovery re-sends the buffer unless the worker holds it."""
        entry.state = FAILED
        self._in_flight[entry.worker] -= 1
        self.count.failures += 1
        self._suspects.add(entry.worker)

    def _take_acks(self, h: int, acks: list, landed: float) -> None:
        """Feed process h's acks, landed at `landed` (time.time()), to the node."""
        waiting = self._pending.get(h, {})
        for ack in acks:
            entry = waiting.pop((ack.worker, ack.batch_id), None)
            if entry is not None:
                self._acked(entry, ack, landed)

    # --- driven by the process's scheduler (Storm's process model, sleep mode)

    def attached(self, driver) -> None:
        """The scheduler of this source's process drives it from now on (on the scheduler's thread): the acks of
        this process's workers come from its outbox, not through a poll."""
        h = self.local[1]
        poll = self._polls.pop(h, None)
        self.driver = driver
        for remote in self._polls.values():
            # a poll made on the source's own thread (a re-send while it recovered) has no one to tell the driver:
            # without this, a source waiting only for those acks would wait forever (a done poll pokes at once)
            remote.add_done_callback(self._poke)
        if not self.local[0].outboxes.drive(self.index, poll) and poll is not None:
            self._take(poll, h, again=False)  # answered before the hand-over (the answer may still be on its way)
        self._take_acks(h, self.take_local(self.index), time.time())

    def detached(self) -> None:
        """The source runs its own loop again: it polls its process for acks."""
        h = self.local[1]
        self.local[0].outboxes.undrive(self.index)
        self.driver = None
        if self._pending.get(h) and h not in self._polls:
            self._polls[h] = self._long_poll(h)
