"""One source of the topology as plain, clock-driven code: routing, per-destination buffers, credits, feedback.

Both engines drive this same object: the simulator from its event kernel, a Ray source actor from the wall clock.
It does no I/O; `step(now)` returns the buffers to put on the wire and `next_wakeup(now)` says when to call again.

The model follows Flink's network stack (Storm 2's batching is the same idea):
* Routing. Input is routed in arrival order, at most `batch_size` tuples per `route` call, and each tuple joins the
  output buffer of its worker. Acks that landed since the last step reach the grouping before it routes again.
* Batch close. A buffer goes out when it holds `batch_size` tuples, or at the first flush tick after its oldest
  tuple arrived, or when the source has no more input. Flush ticks come every `linger_s` (k x linger_s from the
  start, shifted by the source's `phase_s`), for every buffer at once, as Flink's output flusher does with its buffer
  timeout (and Storm 2 with its flush interval): no tuple waits in a buffer longer than `linger_s`, and a source
  wakes once per tick, not once per buffer. linger_s = 0 sends every buffer at once. Storm's flush timer is one
  per worker process, so every source flushes at the same ticks (`flush_phase` "aligned", phase 0); Flink starts
  one flusher thread per task, so each source keeps its own phase ("spread": source i at i / sources of a linger).
* Credits. Each (source, worker) channel may have `credits` buffers in flight (Flink's credit-based flow control);
  an ack returns one. A full buffer whose channel has no credit blocks the source: it routes nothing more until an
  ack comes (backpressure), while buffers of other channels still go out on time.
* Spout pending (optional). At most `spout_pending` tuples of a source may be routed and not yet acked, whatever
  channel they took (Storm's topology.max.spout.pending): the source routes nothing more until acks bring it below.
  With it a run is a closed loop of sources x spout_pending tuples, whose latency is that population over the
  throughput (Little's law), as on a Storm cluster that sets it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from topo.spec import TopologySpec

from groupings.feedback import AckReport
from topo.model.lateness import Lateness

ACK_FIELDS = ("queue_len", "load", "utilization", "service_ms", "signals", "acked")


@dataclass(slots=True)
class Buffer:
    """One output buffer on the wire: which of the source's input positions go to `worker`."""

    source: int
    worker: int
    batch_id: int  # per source, in send order
    index: np.ndarray  # int64 positions into the source's input, in routing order
    sent_s: float


def flush_phase_s(spec: TopologySpec, index: int) -> float:
    """Where source `index`'s flush ticks fall within a linger (s): 0 for every source when aligned (Storm's one
    flush timer per process), evenly spread over the linger when each source flushes on its own (Flink's flusher
    thread per task)."""
    if spec.flush_phase == "spread":
        return index / spec.sources * spec.linger_ms / 1e3
    return 0.0


def check_routed(chosen: np.ndarray, size: int, pool: int, active: int, draining: frozenset = frozenset()) -> None:
    """Reject a routing that has the wrong shape, leaves the pool, or uses a worker that left (unless draining)."""
    if chosen.shape != (size,):
        raise ValueError(f"the grouping returned {chosen.shape} workers for {size} keys")
    if not size:
        return
    low, high = int(chosen.min()), int(chosen.max())
    if low < 0 or high >= pool:
        bad = low if low < 0 else high
        raise ValueError(f"the grouping routed a tuple to worker {bad}, outside [0, {pool})")
    if high >= active:
        stray = [w for w in np.unique(chosen[chosen >= active]).tolist() if w not in draining]
        if stray:
            raise ValueError(f"the grouping routed a tuple to worker {stray[0]}; {active} are active")


class SourceNode:
    """A spout: its share of the input, its grouping, one output buffer and one credit count per worker."""

    def __init__(
        self,
        index: int,
        grouping,
        keys: np.ndarray,
        arrivals: np.ndarray | None,
        *,
        pool: int,
        active: int,
        batch_size: int,
        linger_s: float,
        credits: int,
        end_s: float | None = None,
        draining: Callable[[], frozenset] | None = None,
        spout_pending: int | None = None,
        phase_s: float = 0.0,
    ) -> None:
        self.index = index
        self.grouping = grouping
        self.keys = keys
        self.saturating = arrivals is None  # input always waiting: a tuple arrives when it is routed
        self.arrival = np.empty(len(keys)) if arrivals is None else np.asarray(arrivals, np.float64)
        self.pool, self.active = pool, active
        self.batch_size, self.linger_s, self.credits, self.end_s = batch_size, linger_s, credits, end_s
        self.spout_pending = spout_pending
        tell = getattr(grouping, "set_buffer_tuples", None)
        if tell is not None:  # a grouping that counts a channel's load in buffers (Flink's adaptive partitioner)
            tell(batch_size)
        self.phase_s = phase_s  # where this source's flush ticks fall within a linger (its flusher's own clock)
        self.pending = 0  # tuples routed and not yet acked (buffered or in flight)
        self.max_pending_tuples = 0
        self.draining = draining or frozenset
        self.routed = 0  # input positions [0, routed) have been routed
        # compiled: loaded with the source, not with the package
        from topo.model.buffers import OutputBuffers
        from topo.model.stepping import Stepper

        self._buffers = OutputBuffers(pool, len(keys), self.arrival)
        self._stepper = Stepper(self._buffers, batch_size)
        self._held = self._buffers.held  # tuples in each buffer
        self._oldest = self._buffers.oldest  # arrival of each buffer's oldest tuple
        self.in_flight = np.zeros(pool, np.int64)  # buffers sent and not acked, per channel
        self.max_in_flight = np.zeros(pool, np.int64)
        self._inbox: list[tuple] = []  # (worker, queue_len, load, utilization, service_ms, signal, acked) not fed back
        # a grouping that says it ignores feedback gets none: no report built per step for nothing
        self.takes_feedback = bool(getattr(grouping, "takes_feedback", True))
        # tuples in each buffer in flight, oldest first (a channel's acks come back in send order), and tuples of
        # buffers released without feedback, which the channel's next ack reports as acked
        self._sizes: list[deque[int]] = [deque() for _ in range(pool)]
        self._released = np.zeros(pool, np.int64)
        # a grouping that weighs what each worker has taken from its channel (Flink's adaptive partitioner)
        self._sees_channels = getattr(grouping, "see_channels", None)
        self._sent = np.zeros(pool, np.int64)  # tuples sent on each channel
        self._sent_at_ack = np.zeros(pool, np.int64)  # ... when its latest ack landed
        self._taken = np.zeros(pool, np.int64)  # ... when the ack before it landed: what its worker has taken
        self.batches = 0  # buffers sent
        self.route_calls = 0
        self.acks = 0
        self.blocked = False
        self.blocked_s = 0.0  # time spent with a full buffer and no credit (backpressure)
        self._blocked_at = 0.0
        self.clock = -np.inf  # the latest time a step ran
        self.lag_max_s = 0.0  # the longest a tuple waited at the source before it was routed
        self.lag_sum_s = 0.0
        self._due: float | None = None  # when the node said it would step next (its last `next_wakeup`)
        self.late = Lateness()  # tuples that waited for a step that came after that (never in the simulator)

    @classmethod
    def of_spec(cls, index: int, grouping, keys: np.ndarray, arrivals: np.ndarray | None, spec: TopologySpec, *,
                pool: int, active: int, draining: Callable[[], frozenset] | None = None) -> SourceNode:
        """Source `index`'s node with `spec`'s buffer size, linger, credits, end and max spout pending, as every
        engine builds it."""
        return cls(index, grouping, keys, arrivals, pool=pool, active=active, batch_size=spec.batch_size,
                   linger_s=spec.linger_ms / 1e3, credits=spec.max_pending, end_s=spec.duration, draining=draining,
                   spout_pending=spec.max_spout_pending, phase_s=flush_phase_s(spec, index))

    # --- what the engine asks

    @property
    def exhausted(self) -> bool:
        """True once no more input will be routed: all of it is routed, or the run's end has come."""
        if self.routed >= len(self.keys):
            return True
        if self.end_s is None:
            return False
        if self.saturating:
            return self.clock >= self.end_s
        return bool(self.arrival[self.routed] > self.end_s) or self.clock > self.end_s

    @property
    def done(self) -> bool:
        """True once everything this source will ever send is sent and acked."""
        return self.exhausted and not self._channels()[0]

    def stats(self, duration_s: float) -> dict:
        """What the source did, for the run summary's headroom: buffers, blocked time, input lag."""
        return {
            "buffers": self.batches,
            "route_calls": self.route_calls,
            "blocked_s": self.blocked_s,
            "blocked_fraction": self.blocked_s / duration_s if duration_s > 0 else 0.0,
            "input_lag_max_ms": self.lag_max_s * 1e3,
            "input_lag_mean_ms": self.lag_sum_s / self.routed * 1e3 if self.routed else 0.0,
            "routed": self.routed,
            "late": self.late.stats(),
            "max_in_flight": self.max_in_flight.tolist(),
            "max_pending_tuples": self.max_pending_tuples,
        }

    def buffered(self) -> int:
        """Tuples routed and waiting in output buffers."""
        return int(self._held.sum())

    def step(self, now: float) -> list[Buffer]:
        """Route what has arrived by `now` (unless backpressured) and return the buffers that go out now."""
        self.clock = max(self.clock, now)
        due, self._due = self._due, None
        if due is not None and now - due >= 1e-3 and not (self.blocked or self.saturating):
            self._count_late(now, due)
        self._deliver_feedback(now)
        out: list[Buffer] = []
        while True:
            self._send_due(now, out, full_only=True)  # a full buffer goes out as soon as it fills
            if self._full_without_credit():
                self._block(now)
                break
            self._unblock(now)
            take = min(self._available(now) - self.routed, self.batch_size)
            if take > 0 and self.spout_pending is not None and self.pending >= self.spout_pending:
                self._block(now)  # as many tuples pending as Storm's max spout pending allows: wait for acks
                break
            if take <= 0:
                break
            if self.spout_pending is not None:
                take = min(take, self.spout_pending - self.pending)
            self._route(take, now)
        self._send_due(now, out)  # then those lingered out, or all of them once the input has ended
        return out

    def waits_for_acks(self) -> bool:
        """True if an ack could let something out before the next wake-up: the source is blocked, a buffer waits
        for its channel's credit, or the input has ended and the last buffers are out. Otherwise an ack only brings
        feedback, which the next routing takes."""
        return bool(self.blocked or self.exhausted or self._channels()[1])

    def next_wakeup(self, now: float) -> float | None:
        """When `step` next has something to do without an ack arriving first (None: only an ack can help)."""
        times = []
        _, _, sendable, _, most = self._channels()
        if sendable:
            times.append(self._tick_after(now))
        if not self.exhausted and not self.blocked and not self.saturating:
            first = float(self.arrival[self.routed])
            # the next unrouted tuple must make the tick after it (never before it arrives: ticks are rounded)
            times.append(max(first, self._tick_at_or_after(first)))
            # no buffer can fill before this many more tuples have arrived
            last = min(self.routed + self.batch_size - int(most), len(self.keys)) - 1
            times.append(float(self.arrival[max(last, self.routed)]))
            if self.end_s is not None:
                times.append(self.end_s)  # the source stops at the end and flushes what it holds
        self._due = max(now, min(times)) if times else None
        return self._due

    def _tick_at_or_after(self, t: float) -> float:
        if not self.linger_s > 0:
            return t
        # the first tick is one linger after the source's phase
        k = max(1, math.ceil((t - self.phase_s) / self.linger_s - 1e-9))
        return float(k * self.linger_s + self.phase_s)

    def _tick_after(self, now: float) -> float:
        if not self.linger_s > 0:
            return now
        return float((math.floor((now - self.phase_s) / self.linger_s + 1e-9) + 1) * self.linger_s + self.phase_s)

    def _last_tick(self, now: float) -> float:
        if not self.linger_s > 0:
            return now
        k = math.floor((now - self.phase_s) / self.linger_s + 1e-9)
        return float(k * self.linger_s + self.phase_s) if k >= 1 else -math.inf

    def on_ack(self, worker: int, fields: tuple[float, float, float, float, int], now: float) -> bool:
        """An ack from `worker` landed at `now`: its channel gets a credit back, and the piggybacked fields wait for
        the grouping's next routing. True if the source should step now (the credit lets a waiting buffer out)."""
        self.in_flight[worker] -= 1
        if self._sees_channels is not None:
            # a worker shared by sources takes all of a channel's data when it comes back to it: by the time it acks
            # our buffer, it has taken what we had sent when it came back to us, about when its previous ack left
            self._taken[worker] = self._sent_at_ack[worker]
            self._sent_at_ack[worker] = self._sent[worker]
        self.acks += 1
        size = self._sizes[worker].popleft() if self._sizes[worker] else 0
        self.pending -= size
        acked = self._released[worker] + size
        self._released[worker] = 0
        if self.takes_feedback:
            self._inbox.append((worker, *fields, int(acked)))
        waiting = self._held[worker] > 0 and self.in_flight[worker] == self.credits - 1 and self._is_due(worker, now)
        return bool(self.blocked or waiting or self.done)

    def release(self, worker: int) -> None:
        """Give a credit back without feedback (the engine learnt otherwise that the buffer is safe)."""
        self.in_flight[worker] -= 1
        if self._sizes[worker]:
            size = self._sizes[worker].popleft()
            self._released[worker] += size
            self.pending -= size

    def resize(self, active: int) -> None:
        """From the next routing on, workers [0, `active`) make up the topology."""
        self.grouping.resize(active)
        self.active = active

    def finish(self, now: float) -> None:
        """Feed the last acks to the grouping (so its stats saw every one) and close the blocked-time account."""
        self._deliver_feedback(now)
        self._unblock(now)

    # --- inside a step

    def _available(self, now: float) -> int:
        """Input positions that have arrived by `now` (and, with an end, by the end)."""
        if self.saturating:
            return self.routed if self.exhausted else len(self.keys)
        upto = now if self.end_s is None else min(now, self.end_s)
        return max(self.routed, self._stepper.arrived_by(upto))

    def _route(self, take: int, now: float) -> None:
        begin, stop = self.routed, self.routed + take
        if self._sees_channels is not None:
            self._sees_channels(self._taken)
        chosen = np.asarray(self.grouping.route(self.keys[begin:stop], now), dtype=np.int32)
        self.route_calls += 1
        if chosen.shape != (take,):
            check_routed(chosen, take, self.pool, self.active)  # (raises)
        # the tuples join their buffers, and a source that falls behind its input shows in their lag: one compiled
        # call, where numpy took a call for each of the lag, its max, its sum and the workers' range
        if self.saturating:
            self.arrival[begin:stop] = now
        joined, _, _, most, total = self._stepper.route(chosen, begin, now, self.saturating, self.pool, self.active)
        if joined:  # a worker outside the pool (raises), or one that left: only a draining one may take tuples
            check_routed(chosen, take, self.pool, self.active, self.draining())
            joined, _, _, most, total = self._stepper.route(chosen, begin, now, self.saturating, self.pool, self.pool)
        if not self.saturating:
            self.lag_max_s = max(self.lag_max_s, most)
            self.lag_sum_s += total
        self.routed = stop
        self.pending += take
        self.max_pending_tuples = max(self.max_pending_tuples, self.pending)

    def _count_late(self, now: float, due: float) -> None:
        """The step due at `due` came at `now` (the engine's loop stalled, not backpressure): every tuple that
        arrived meanwhile waited from its own flush tick (or `due`) until now, at least."""
        arrived = self._available(now)
        if arrived > self.routed:
            latest = self._stepper.count_late(self.routed, arrived, now, due, self.linger_s, self.phase_s,
                                              self.late.counts)
            self.late.max_ms = max(self.late.max_ms, latest)

    def _is_due(self, w: int, now: float) -> bool:
        """Worker w's buffer goes out: it is full, or its oldest tuple saw the last flush tick."""
        return bool(self._held[w] >= self.batch_size or self._oldest[w] <= self._last_tick(now) or self.exhausted)

    def _send_due(self, now: float, out: list[Buffer], full_only: bool = False) -> None:
        # the channels with a buffer due and a credit, cut in one compiled pass (a step may look at hundreds)
        workers, sizes, positions = self._buffers.cut_due(self._last_tick(now), full_only, self.exhausted,
                                                          self.batch_size, self.credits, self.in_flight,
                                                          self.max_in_flight)
        start = 0
        for w, size in zip(workers.tolist(), sizes.tolist(), strict=True):
            self._sizes[w].append(size)
            if self._sees_channels is not None:  # (only a grouping that reads it pays for the count)
                self._sent[w] += size
            out.append(Buffer(self.index, w, self.batches, positions[start : start + size], now))
            self.batches += 1
            start += size

    def _full_without_credit(self) -> bool:
        return bool(self._channels()[3])

    def _channels(self) -> tuple[bool, bool, bool, bool, int]:
        """(busy, waiting for credit, sendable, full without credit, most held), in one compiled pass."""
        return self._buffers.channels(self.in_flight, self.credits, self.batch_size)

    def _block(self, now: float) -> None:
        if not self.blocked:
            self.blocked, self._blocked_at = True, now

    def _unblock(self, now: float) -> None:
        if self.blocked:
            self.blocked = False
            self.blocked_s += now - self._blocked_at

    def _deliver_feedback(self, now: float) -> None:
        """Hand every ack that has landed so far to the grouping, oldest first, as one AckReport."""
        if not self._inbox:
            return
        # a worker that left meanwhile is no longer the grouping's concern
        acks = [a for a in self._inbox if a[0] < self.active]
        self._inbox = []
        if acks:
            self.grouping.feedback(ack_report(acks, now))


def ack_report(acks: list[tuple], now: float) -> AckReport:
    """The AckReport of (worker, queue_len, load, utilization, service_ms, signal[, acked]) rows, in order."""
    col = list(zip(*acks, strict=True))
    return AckReport(
        workers=np.asarray(col[0], np.int32),
        queue_len=np.asarray(col[1], np.float64),
        load=np.asarray(col[2], np.float64),
        utilization=np.asarray(col[3], np.float64),
        service_ms=np.asarray(col[4], np.float64),
        signals=np.asarray(col[5], np.int8),
        now=now,
        acked=np.asarray(col[6], np.float64) if len(col) > 6 else None,
    )
