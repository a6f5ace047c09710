"""Worker delegation (Consistent Grouping): each worker judges its own load and asks its sources for more or less.

The engine calls `signal` whenever an ack leaves a worker for a source, passing the worker's utilization; the
answer (+1 INCREASE, -1 DECREASE or 0) is piggybacked on that ack, so no signal is ever broadcast.

    * Utilization: what the engine measures over the last `window_s` (= the time slot t0), of the kind named by
      `measure` (see MEASURES). The default, offered utilization (load given / capacity), is the paper's
      definition of busy and idle (load >= theta_b c_w); the busy fraction stays at 1 while a worker drains a
      backlog, so a worker watching it keeps shedding load after it is already balanced (measured: a capacity
      change left CG at imbalance 0.29 with it and 0.20 with offered load). The paper's Storm deployment used
      input-queue fill, which needs bounded queues.
    * Decision: below `idle` the worker is idle (INCREASE), above `busy` it is busy (DECREASE), in between it
      is content and says nothing. After an idle or busy decision the worker waits one time slot t0 before it
      decides again; while content it keeps watching on every ack, so it reacts as soon as it crosses a
      threshold.
    * Delivery: a decision rides on the first ack to each source after it was taken, so every source hears it
      at most once; the next decision (a content one included) replaces it, also for sources that never heard.

The paper's time slot is minutes (workloads changing by the hour); an emulated run lasts seconds, so the default
t0 = 0.02 s, which still averages over hundreds of tuples per decision and leaves a hundred adaptation rounds in a
run of a few seconds.
"""

from __future__ import annotations

import math

from .checks import check_workers
from .feedback import DECREASE, INCREASE, NO_SIGNAL

DEFAULT_T0 = 0.02  # seconds: simulated runs last seconds, so a slot of 20 ms still averages hundreds of tuples
DEFAULT_IDLE = 0.75  # utilization thresholds of the paper's simulations
DEFAULT_BUSY = 0.85
_CLOCK_SLACK = 1e-9  # clock rounding (0.1 + 0.2 < 0.3...) must not cost a worker a whole time slot


MEASURES = {
    "busy": "busy fraction of the worker's server over the last time slot",
    "offered": "arrival rate x time per tuple over the last time slot (a backlog being drained does not count)",
    "queue": "input-queue fill, tuples queued / queue capacity (the paper's Storm deployment)",
}


# the signals as Python ints: compared and returned on every ack, where numpy's int8 scalars cost a call each
_INCREASE, _DECREASE, _NONE = int(INCREASE), int(DECREASE), int(NO_SIGNAL)


def decide(utilization: float, idle: float, busy: float) -> int:
    """A worker's local verdict: INCREASE below `idle`, DECREASE above `busy`, NO_SIGNAL when content."""
    if utilization < idle:
        return _INCREASE
    if utilization > busy:
        return _DECREASE
    return _NONE


class WorkerDelegation:
    """The decisions of every worker of one stream edge, and which sources have heard each of them."""

    def __init__(
        self,
        workers: int,
        t0: float = DEFAULT_T0,
        idle: float = DEFAULT_IDLE,
        busy: float = DEFAULT_BUSY,
        measure: str = "busy",
    ) -> None:
        workers = check_workers(workers)
        if not (math.isfinite(t0) and t0 > 0):
            raise ValueError(f"the time slot t0 must be a positive number of seconds (got {t0})")
        if not 0 < idle <= busy < 1:
            raise ValueError(f"thresholds must satisfy 0 < idle <= busy < 1 (got idle={idle}, busy={busy})")
        self.workers = workers
        self.t0 = float(t0)
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)} (got {measure!r})")
        self.window_s = self.t0  # the engine measures utilization over one time slot
        self.measure = measure  # which utilization the engine passes to `signal` (see MEASURES)
        self.idle = float(idle)
        self.busy = float(busy)
        self.deliveries = 0
        # per worker, as lists: `signal` runs on every ack, and a list's item is a Python number, a numpy array's a
        # boxed scalar (a third of the call's time at 8 x 64 on Ray)
        self._next_decision: list[float] = []  # earliest time each worker may decide again
        self._pending: list[int] = []  # its current decision (0: nothing to say)
        self._heard: list[set[int]] = []  # sources that got the current decision
        self._idle_decisions: list[int] = []
        self._busy_decisions: list[int] = []
        self._grow(self.workers)

    def _grow(self, count: int) -> None:
        """Append `count` workers that have decided nothing yet and may decide at their first ack."""
        self._next_decision.extend([-math.inf] * count)
        self._pending.extend([int(NO_SIGNAL)] * count)
        self._heard.extend(set() for _ in range(count))
        self._idle_decisions.extend([0] * count)
        self._busy_decisions.extend([0] * count)

    def signal(self, worker: int, source: int, now: float, utilization: float) -> int:
        """The signal (+1, -1 or 0) `worker` piggybacks on the ack it sends `source` at time `now`."""
        if worker < 0 or source < 0:
            raise ValueError(f"worker and source must be >= 0 (got worker {worker}, source {source})")
        if worker >= self.workers:
            return _NONE  # a removed worker draining its queue has nothing to ask for
        heard = self._heard[worker]
        if now >= self._next_decision[worker] - _CLOCK_SLACK * self.t0:
            verdict = decide(utilization, self.idle, self.busy)
            self._pending[worker] = verdict
            heard.clear()
            if verdict != _NONE:
                self._next_decision[worker] = now + self.t0  # one idle/busy decision per time slot
                if verdict == _INCREASE:
                    self._idle_decisions[worker] += 1
                else:
                    self._busy_decisions[worker] += 1
        verdict = self._pending[worker]
        if verdict == _NONE or source in heard:
            return _NONE
        heard.add(source)
        self.deliveries += 1
        return verdict

    def resize(self, workers: int) -> None:
        """Workers join or leave at the top index; a joining worker starts with nothing to say."""
        workers = check_workers(workers)
        if workers > self.workers:
            self._grow(workers - self.workers)
        else:
            for column in (self._next_decision, self._pending, self._heard, self._idle_decisions,
                           self._busy_decisions):
                del column[workers:]
        self.workers = workers

    def stats(self) -> dict:
        """Decisions taken per worker, signals delivered, and what each worker is saying now."""
        return {
            "t0": self.t0,
            "idle_decisions": list(self._idle_decisions),
            "busy_decisions": list(self._busy_decisions),
            "deliveries": self.deliveries,
            "pending": list(self._pending),
        }

    def __repr__(self) -> str:
        return f"WorkerDelegation(workers={self.workers}, t0={self.t0}, idle={self.idle}, busy={self.busy})"
