"""What a worker measures of itself and piggybacks on every ack, as plain clock-driven code shared by both engines.

The engine tells the meter when tuples arrive in the worker's input queue and when a buffer's service ends (with
the worker's running total of busy seconds); `ack` then answers with the fields of the ack to one source:
queue length and fill, utilization over the last window, time per tuple, and the worker delegation's signal.

One window definition: the running totals are marked at every arrival and every service end, and a window spans
from the oldest mark kept, which is the last one at least `window_s` old, but never fewer than `min_marks` marks
back. When buffers arrive less often than once a window (a slow worker fed in a closed loop), a window of one
time slot would often hold no arrival at all and read a saturated worker as idle.
"""

from __future__ import annotations

from collections import deque

DEFAULT_WINDOW_S = 0.1  # utilization window when the strategy has no worker delegation to ask
MIN_MARKS = 9  # a window spans at least four arrivals and four service ends, however long they take
UNREAD = (0.0, 0.0, 0.0, 0.0, 0)  # the fields of an ack that nothing reads (no feedback, no delegation)


class WindowMeter:
    """Tuples arrived, busy seconds and tuples served over roughly the last `window_s`, from running totals."""

    def __init__(self, window_s: float, now: float, min_marks: int = MIN_MARKS) -> None:
        self.window_s = window_s
        self.min_marks = max(2, min_marks)
        self._marks: deque[tuple[float, int, float, int]] = deque([(now, 0, 0.0, 0)])

    def mark(self, now: float, arrived: int, busy_s: float, served: int) -> None:
        """Record the running totals at `now`."""
        marks = self._marks
        marks.append((now, arrived, busy_s, served))
        if len(marks) > self.min_marks:
            cut = now - self.window_s
            while len(marks) > self.min_marks and marks[1][0] <= cut:
                marks.popleft()

    def since(self, now: float, arrived: int, busy_s: float, served: int) -> tuple[float, int, float, int]:
        """(span, arrived, busy seconds, served) between the oldest mark kept and the totals given for `now`."""
        t, a, b, s = self._marks[0]
        return now - t, arrived - a, busy_s - b, served - s


class AckMeter:
    """One worker's load as its acks report it: queue, utilization, time per tuple and the delegation signal."""

    def __init__(self, index: int, service_s: float, queue_capacity: int, delegation=None, now: float = 0.0,
                 window_s: float = DEFAULT_WINDOW_S, read: bool = True) -> None:
        self.index = index
        # False: nothing reads an ack's fields (no grouping's feedback, no delegation, no metrics): the meter only
        # counts, keeps no window and answers `UNREAD`, as the simulator measures nothing then
        self.read = read
        self.service_s = service_s  # configured wall seconds per tuple (the capacity's), before any is measured
        self.queue_capacity = max(1, queue_capacity)
        self.delegation = delegation  # Consistent Grouping's worker delegation, or None
        self.measure = getattr(delegation, "measure", "busy")
        # a delegation's window is its own time slot; without one, `window_s`
        self.meter = WindowMeter(getattr(delegation, "window_s", window_s), now)
        self.accepted = 0
        self.served = 0
        self.busy_s = 0.0
        self.signals = {"increase": 0, "decrease": 0}

    @property
    def queue_len(self) -> int:
        """Tuples accepted and not yet served."""
        return self.accepted - self.served

    def arrive(self, now: float, tuples: int) -> None:
        """`tuples` joined the input queue at `now`."""
        self.accepted += tuples
        if self.read:
            self.meter.mark(now, self.accepted, self.busy_s, self.served)

    def serve(self, now: float, tuples: int, busy_s: float) -> None:
        """`tuples` were served by `now`; `busy_s` is the worker's running total of busy seconds."""
        self.served += tuples
        self.busy_s = busy_s
        if self.read:
            self.meter.mark(now, self.accepted, self.busy_s, self.served)

    def ack(self, now: float, source: int, active: int) -> tuple[float, float, float, float, int]:
        """(queue_len, load, utilization, service_ms, signal) of the ack leaving now for `source`."""
        if not self.read:
            return UNREAD
        span, arrived, busy, served = self.meter.since(now, self.accepted, self.busy_s, self.served)
        utilization = min(1.0, max(0.0, busy / span)) if span > 0 else 0.0
        offered = arrived * self.service_s / span if span > 0 else 0.0
        queue_len = self.queue_len
        service_ms = busy / served * 1e3 if served and busy > 0 else self.service_s * 1e3
        signal = 0
        if self.delegation is not None and self.index < active:
            measure = self.measure
            watched = (utilization if measure == "busy" else offered if measure == "offered" else
                       queue_len / self.queue_capacity)
            signal = int(self.delegation.signal(self.index, source, now, float(watched)))
            if signal:
                self.signals["increase" if signal > 0 else "decrease"] += 1
        return float(queue_len), min(1.0, queue_len / self.queue_capacity), utilization, service_ms, signal


def queue_capacity(sources: int, credits: int, batch_size: int) -> int:
    """The most tuples a worker can ever hold: every source's credits' worth of full buffers."""
    return max(1, sources * credits * batch_size)
