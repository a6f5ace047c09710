"""One server thread for all the sleeping workers of a process.

In sleep mode a worker's service is a deadline: a batch of n tuples ready at r, behind a batch done at d, is done
at max(r, d) + n x service (the ideal FIFO server), whatever else the process does. A thread per worker that
sleeps until its deadline costs a thread switch, and a fight for the GIL, per buffer; with dozens of workers in a
process that was a quarter of the process's Python time. The scheduler takes the frames a process receives,
queues their buffers itself, keeps every busy worker's deadline in a heap, sleeps until the earliest one (or the
next frame), and completes every worker whose deadline has passed in one wake-up. One thread does all of it, so
the hot path takes no lock another thread holds, and waits for the GIL once per wake-up, not once per buffer; the
acks of a wake-up leave together at its end (`after_pass`), so a source wakes once per pass, not once per ack.
When it gets to a deadline late, the ack leaves late (the workers report how late, `late_ms`); the batch's
service does not move. Cpu mode keeps a thread per worker: burning is real work and needs threads of its own.

The same thread drives the process's sources (Storm's process model), as a Storm worker's executors share its
threads: a source hands its steady loop over (`drive`), and the scheduler steps it when the source said it would
(its next deadline, on the same heap's clock) or when an ack reached it (`poke`), in the same pass as the
completions that acked it. No source thread then fights the scheduler for the GIL, and an ack between executors
of one process is an append to a list. Between two sources' steps it completes the workers whose deadline has
passed meanwhile: dozens of sources stepping on one flush tick take milliseconds, and would hold every ack due in
them. A source takes its loop back for what blocks (recovery, rewinds, the drain).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

HAND_BACK = -1.0  # a driven source's answer when it needs its own thread again


class Scheduler:
    """Serves the sleeping workers of one process, each in order of its own FIFO queue."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._woken: list[int] = []  # idle workers that got work from another thread since the last look
        self._frames: list[Callable[[], None]] = []  # frames to queue, each as the call that queues it
        self._mine: list[int] = []  # idle workers that got work from this thread
        self._ident: int | None = None
        self._poked: set[int] = set()  # driven sources that have acks, poked from another thread
        self._poked_mine: set[int] = set()  # driven sources that have acks, poked from this thread
        self.driven: dict[int, Any] = {}  # source -> the source whose loop this thread runs
        self._due: dict[int, float | None] = {}  # driven source -> its next deadline (perf_counter), None: on acks
        self.workers: dict[int, Any] = {}
        self.after_pass: Callable[[], None] = lambda: None  # once per wake-up, after every completion of it
        # how busy this thread was: its CPU clock, the time and its CPU seconds when it first had work, and when its
        # last pass ended (one thread steps a process's sources and serves its workers: at full use, the engine's limit)
        self._cpu_clock: int | None = None
        self._first: tuple[float, float] | None = None
        self._last = 0.0

    def start(self, workers: dict[int, Any]) -> None:
        """Serve `workers` (index -> `worker.Worker`) from now on, once each one has registered."""
        self.workers = workers
        threading.Thread(target=self._run, name="scheduler", daemon=True).start()

    def deliver(self, queue: Callable[[], None]) -> None:
        """A frame of buffers for this process's workers (from any thread): `queue()`, called on the scheduler's
        thread, puts its buffers in their workers' queues."""
        with self._cond:
            self._frames.append(queue)
            if len(self._frames) == 1 and not self._woken:
                self._cond.notify()

    def drive(self, source: Any) -> None:
        """Run `source`'s loop on this thread (called from the source's own thread, which blocks) until the source
        hands it back: its input is done, or it has something to recover."""
        source.handed_back.clear()
        self.deliver(partial(self._attach, source))
        source.handed_back.wait()
        failure, source.failure = source.failure, None
        if failure is not None:
            raise failure  # on the source's own thread, as its loop would have raised it

    def poke(self, source: int) -> None:
        """Driven `source` has acks waiting (from any thread)."""
        if self.on_thread():
            self._poked_mine.add(source)
            return
        with self._cond:
            self._poked.add(source)
            self._cond.notify()

    def _attach(self, source: Any) -> None:
        self.driven[source.index] = source
        self._due[source.index] = time.perf_counter()  # steps in this pass
        source.attached(self)

    def _step_sources(self, heap: list[tuple[float, int]]) -> None:
        """Step every driven source that is due, or has acks; hand back those that need their thread. Between two
        sources, finish the workers whose deadline has passed meanwhile: dozens of sources on one flush tick take
        milliseconds, and a worker's ack must not wait for the last of them."""
        poked = self._poked_mine
        if self._poked:
            with self._cond:
                poked |= self._poked
                self._poked = set()
        self._poked_mine = set()
        now = time.perf_counter()
        for s, due in list(self._due.items()):
            if s in poked or (due is not None and due <= now):
                try:
                    due = self._due[s] = self.driven[s].tick()
                except Exception as error:  # a bug of one source must not stop the process's workers
                    self.driven[s].failure, due = error, HAND_BACK
                if due == HAND_BACK:
                    source = self.driven.pop(s)
                    del self._due[s]
                    source.detached()
                    source.handed_back.set()
                if heap and heap[0][0] <= time.perf_counter():
                    self._finish_due(heap)

    def on_thread(self) -> bool:
        """True when called from the scheduler's own thread."""
        return threading.get_ident() == self._ident

    def wake(self, worker: int) -> None:
        """An idle worker has work (a batch, or a pause)."""
        if self.on_thread():
            self._mine.append(worker)  # queued by the scheduler itself: no lock, no notify
            return
        with self._cond:
            self._woken.append(worker)
            if len(self._woken) == 1 and not self._frames:
                self._cond.notify()

    def busy_share(self) -> float | None:
        """The share of its time this thread spent on the CPU, from when it first had work to when its last pass ended
        (None: it had none, or this platform cannot read a thread's CPU clock from another thread)."""
        if self._cpu_clock is None or self._first is None or self._last <= self._first[0]:
            return None
        return (time.clock_gettime(self._cpu_clock) - self._first[1]) / (self._last - self._first[0])

    def _run(self) -> None:
        self._ident = threading.get_ident()
        if hasattr(time, "pthread_getcpuclockid"):  # (Linux: yes; macOS: no)
            self._cpu_clock = time.pthread_getcpuclockid(self._ident)
        for worker in self.workers.values():
            worker.register()  # before serving anything, so every ack and flush names a registered incarnation
        due: list[tuple[float, int]] = []  # (perf_counter deadline, worker) of every worker in service
        while True:
            with self._cond:
                if not (self._woken or self._frames or self._mine or self._poked or self._poked_mine):
                    deadline = min([d for d in self._due.values() if d is not None], default=None)
                    if due and (deadline is None or due[0][0] < deadline):
                        deadline = due[0][0]
                    timeout = None if deadline is None else deadline - time.perf_counter()
                    if timeout is None or timeout > 0:
                        self._cond.wait(timeout)
                woken, self._woken = self._woken, []
                frames, self._frames = self._frames, []
            if self._first is None and self._cpu_clock is not None:
                self._first = (time.perf_counter(), time.clock_gettime(self._cpu_clock))
            for queue in frames:
                queue()
            woken += self._mine
            self._mine = []
            for w in woken:
                self._start(w, due)
            self._finish_due(due)
            if self._due or self._poked or self._poked_mine:
                self._step_sources(due)
                self.after_pass()  # a source's step may be acked at once (a duplicate of a replay)
            self._last = time.perf_counter()

    def _finish_due(self, due: list[tuple[float, int]]) -> None:
        """Finish every worker whose deadline has passed (starting its next batch), and send their acks."""
        now = time.perf_counter()
        while due and due[0][0] <= now:
            self._start(heapq.heappop(due)[1], due)
        self.after_pass()

    def _start(self, w: int, due: list[tuple[float, int]]) -> None:
        """Finish what worker w has in service and start its next batch; one whose deadline has already passed
        completes at once."""
        advance = self.workers[w].advance
        deadline = advance()
        while deadline is not None and deadline <= time.perf_counter():
            deadline = advance()
        if deadline is not None:
            heapq.heappush(due, (deadline, w))
