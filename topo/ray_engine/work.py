"""How a worker of the Ray engine spends a tuple's service time: waiting for it, or real CPU work under a cap.

The contract shared with the simulator: a worker of capacity c serves a tuple in cost_ms / c of wall time.

`sleep` mode waits without burning, so dozens of workers fit on two cores. The worker keeps a running deadline
(start + i * service) and reports each tuple's deadline as its finish time; a batch sleeps once, until its last
deadline, so sleep granularity never accumulates.

`cpu` mode does genuine work, as the paper's Storm executors capped with cpulimit did. A capacity-c worker may
use c * core_share of one core (core_share: what a capacity-1.0 worker gets): each tuple burns
cost_ms * core_share of CPU time, measured on the thread clock, then the worker sleeps until the tuple's
deadline, so CPU used / wall time stays at the cap over every service period (every `MIN_SLEEP_S` or so for
tiny tuples, whose sleeps are pooled) and the wall time per tuple is cost_ms / c.

Lateness: a worker may run late (a sleep that overshoots, a burn that got less than a full core). It catches up
at most `SLACK_S` of its own lateness by skipping sleeps, and never takes credit for time it sat idle between
batches. A caller that says when a batch was ready (`serve(n, ready=...)`) lets the worker also catch up the time
it spent between batches that were already waiting (logging, state updates, acks), up to `CATCHUP_S`: that
bookkeeping is the emulator's, not the operator's, so a saturated worker still serves at its capacity.
On an oversubscribed machine a cpu worker gets less than its share: its burns take longer than their CPU
time, lateness beyond the slack is lost, and its measured capacity drops below the configured one. That is real
and is reported (`measured_capacity`, and `cpu_availability` and `lost_s` in `stats`), not hidden.

Where the kernel can enforce a cap itself (root, a writable cgroup cpu controller), `apply_cgroup_quota` puts a
worker process under a real CPU quota, the way cpulimit capped the paper's executors.

Not thread-safe: one emulator per worker, called from one thread at a time.
"""

from __future__ import annotations

import math
import operator
import time

import numpy as np

from topo.ray_engine.work_cgroup import apply_cgroup_quota, cgroup_quota_possible, release_cgroup_quota

__all__ = ["CATCHUP_S", "MIN_SLEEP_S", "MODES", "SLACK_S", "ServiceEmulator", "apply_cgroup_quota",
           "cgroup_quota_possible", "ideal_finish", "release_cgroup_quota", "sleep_until", "spread_ms"]

MODES = ("sleep", "cpu")
# how much of its own lateness a worker may catch up: a few sleep overshoots, not a burst that breaks the cap
SLACK_S = 0.001
# how much time spent between queued batches a worker may catch up: per-batch bookkeeping, not a long preemption
CATCHUP_S = 0.01
# shortest sleep a cpu worker takes between tuples: a sleep costs tens of microseconds of CPU itself
MIN_SLEEP_S = 0.0002

MAX_CORE_SHARE = 0.4  # the most of a core a capacity-1.0 worker burns in cpu mode when the spec sets no share
# what the workers may burn together at full load, as a share of the cores Ray offers, when the spec sets no share:
# the sources' loops and Ray's own processes need the rest. Measured on 2 cores with the 4-worker deployment
# (capacities 1, 1, 0.3, 0.3 at 80% load): 0.26 cores burnt kept 95% of the configured capacity, 0.31 cores 89%
# and 1.04 cores (the former fixed share, 0.4) 75%
CPU_BUDGET = 0.125


def core_share(spec, cores: float) -> tuple[float, str]:
    """The share of a core a capacity-1.0 worker burns in cpu mode, and how it was chosen: the spec's, or the most
    that keeps every worker's burning within CPU_BUDGET of `cores` at the largest total capacity the run has."""
    if spec.core_share is not None:
        return spec.core_share, "--core-share"
    vectors = [spec.capacity_list, *(list(c.value) for c in spec.capacity_schedule)]
    total = max(sum(v) for v in vectors)
    top = max(max(v) for v in vectors)
    share = min(MAX_CORE_SHARE, CPU_BUDGET * cores / total, 1.0 / top)
    return share, (f"min({MAX_CORE_SHARE:g}, {CPU_BUDGET:g} x {cores:g} cores / total capacity {total:g}, "
                   f"1 / largest capacity {top:g})")


def spread_ms(seconds: list[float]) -> dict:
    """p50, p99 and max of durations in seconds, in milliseconds, and how many (zeros when there are none)."""
    if not seconds:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0, "count": 0}
    p50, p99 = np.percentile(seconds, [50, 99]) * 1e3
    return {"p50": float(p50), "p99": float(p99), "max": float(max(seconds) * 1e3), "count": len(seconds)}


def ideal_finish(starts: np.ndarray, services: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The finish times of batches served by `begin_ideal`, one after another: batch i's k-th tuple (from 1) at
    starts[i] + k x services[i]."""
    sizes = np.asarray(sizes, np.int64)
    firsts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    rank = np.arange(int(sizes.sum())) - firsts + 1
    return np.repeat(np.asarray(starts, np.float64), sizes) + np.repeat(np.asarray(services, np.float64), sizes) * rank


def _positive(name: str, value: float) -> float:
    """`value` as a float if it is positive and finite, else a one-line ValueError naming it."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return number


def sleep_until(deadline: float) -> float:
    """Sleep until the perf_counter clock reaches `deadline`; return the clock on waking."""
    now = time.perf_counter()
    while now < deadline:
        time.sleep(deadline - now)
        now = time.perf_counter()
    return now


class ServiceEmulator:
    """One worker's server: serves tuples one after another at cost_ms / capacity each, by sleeping or capped CPU."""

    def __init__(self, mode: str, cost_ms: float, capacity: float, core_share: float = 0.4) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        try:
            cost = float(cost_ms)
        except (TypeError, ValueError):
            raise ValueError(f"cost_ms must be a number of milliseconds >= 0, got {cost_ms!r}") from None
        if not (cost >= 0 and math.isfinite(cost)):
            raise ValueError(f"cost_ms must be a finite number of milliseconds >= 0, got {cost_ms!r}")
        share = _positive("core_share", core_share)
        if share > 1:
            raise ValueError(f"core_share is a share of one core, so at most 1, got {core_share!r}")
        self.mode = mode
        self.cost_ms = cost
        self.core_share = share
        # wall-clock seconds = perf_counter + epoch: the precision of perf_counter, on time.time()'s scale
        self._epoch = time.time() - time.perf_counter()
        self._burner = None
        if mode == "cpu" and cost > 0:
            from topo.ray_engine.work_cpu import (
                Burner,  # compiled at import (0.6 s): a sleeping worker's process never needs it
            )

            self._burner = Burner()
        self._deadline = 0.0  # the running deadline: when the last tuple was due (perf_counter seconds)
        self._returned = 0.0  # when the last batch returned, to tell own lateness from idle time
        self._busy_until = 0.0  # the last finish time, so overlapping busy intervals count once
        self._tuples = 0
        self._busy_s = 0.0
        self._cpu_s = 0.0
        self._burn_cpu_s = 0.0
        self._burn_wall_s = 0.0
        self._lost_s = 0.0  # lateness beyond the slack: time the machine did not give this worker
        self._cpu_carry = 0.0  # CPU spent past the last target, taken from the next tuple's budget
        self._open: tuple | None = None  # (start, last finish, thread CPU before, ideal) of the batch begun
        self._late_s: list[float] = []  # ideal sleep mode: per batch, how long after its deadline `end` came
        self.set_capacity(capacity)

    @property
    def capacity(self) -> float:
        """The configured relative capacity."""
        return self._capacity

    @property
    def service_s(self) -> float:
        """Wall seconds one tuple takes at the configured capacity."""
        return self._service_s

    def set_capacity(self, capacity: float) -> None:
        """Change the capacity; tuples served from now on take cost_ms / capacity each."""
        value = _positive("capacity", capacity)
        if self.mode == "cpu" and value * self.core_share > 1:
            raise ValueError(f"cpu mode: capacity {value:g} x core_share {self.core_share:g} asks for "
                             f"{value * self.core_share:g} cores, but one worker burns on one core (at most 1)")
        self._capacity = value
        self._service_s = self.cost_ms / 1000.0 / value
        self._budget_s = self.cost_ms / 1000.0 * self.core_share

    def serve(self, n: int, ready: float | None = None) -> np.ndarray:
        """Serve `n` tuples one after another and return each one's finish time (time.time() seconds).

        `ready`: when the batch was there to serve (time.time() seconds); time the worker spent past it on other
        things counts as its own lateness, and is caught up (up to `CATCHUP_S`)."""
        finish, due = self.begin(n, ready)
        sleep_until(due)
        self.end()
        return finish

    def begin(self, n: int, ready: float | None = None) -> tuple[np.ndarray, float]:
        """`serve` without its wait: (each tuple's finish time in time.time() seconds, the perf_counter deadline to
        reach before calling `end`). Sleep mode only computes its deadlines here, so one thread can serve many
        workers by waiting for the earliest of theirs; cpu mode burns here, and its deadline has passed."""
        try:
            count = operator.index(n)
        except TypeError:
            raise ValueError(f"n must be a whole number of tuples, got {n!r}") from None
        if count < 0:
            raise ValueError(f"n must be >= 0, got {count}")
        self._open = None
        if count == 0:
            return np.empty(0), 0.0
        if self.cost_ms == 0:
            self._tuples += count
            return np.full(count, time.time()), 0.0
        called = time.perf_counter()
        cpu_before = time.thread_time() if self._burner is not None else None
        start = self._start(called, None if ready is None else float(ready) - self._epoch)
        if self._burner is None:
            deadlines = start + self._service_s * np.arange(1, count + 1)
            self._deadline = due = float(deadlines[-1])
            # a tuple cannot finish before it was handed over, even while the worker catches up
            finish = np.maximum(deadlines, called)
        else:
            # lateness credited at the start may be caught up during the batch, not only `SLACK_S` of it
            finish = self._burn(count, start, cpu_before, max(SLACK_S, called - start))
            due = 0.0
        self._tuples += count
        self._open = (start, float(finish[-1]), cpu_before, False)
        return finish + self._epoch, due

    def begin_ideal(self, n: int, ready: float) -> tuple[float, float, float]:
        """Sleep mode's ideal FIFO server: a batch of `n` tuples, there since `ready` (time.time() seconds), starts
        once it was there and the batch before was done, however late the emulator gets to it (that lateness delays
        the ack, and is reported apart, in `late_ms`), and its tuples finish one service time apart. Returns (its
        start in time.time() seconds, the service time, the perf_counter deadline to reach before `end`); the finish
        times are `ideal_finish`'s, computed when they are needed. Plain floats: this is the per-buffer hot path."""
        if self._burner is not None:
            raise ValueError("the ideal server is sleep mode's; cpu mode burns, with `begin`")
        self._tuples += n
        service = self._service_s if self.cost_ms else 0.0
        start = max(self._deadline, ready - self._epoch)
        self._deadline = due = start + service * n
        self._open = (start, due, None, True) if n and service else None
        return start + self._epoch, service, due

    def hold(self, seconds: float) -> float:
        """Stop serving for `seconds` from now (or from the last deadline, if later): no batch starts before the
        perf_counter time returned."""
        self._deadline = max(self._deadline, time.perf_counter()) + seconds
        self._busy_until = max(self._busy_until, self._deadline)  # a stopped server is not busy meanwhile
        return self._deadline

    def end(self) -> None:
        """Account the batch `begin` started, once its deadline has passed."""
        if self._open is None:
            return
        start, last, cpu_before, ideal = self._open
        self._open = None
        if cpu_before is not None:  # a sleeping worker spends no CPU of its own on the operator
            self._cpu_s += time.thread_time() - cpu_before
        returned = time.perf_counter()
        if ideal:
            self._late_s.append(max(returned - last, 0.0))  # the emulator's lateness, not the worker's time
        end = last if ideal else max(last, returned - SLACK_S)
        # busy = the union of service intervals: a batch that catches up overlaps the previous one's tail
        self._busy_s += end - max(start, self._busy_until)
        self._busy_until = end
        self._returned = returned

    def _start(self, now: float, ready: float | None) -> float:
        """When the next tuple's service starts: right after the last deadline if the worker was only a bit late."""
        if ready is None:
            # lateness when the last batch returned is the worker's own (overshoot, preemption); idle time is not
            late, limit = max(self._returned - self._deadline, 0.0), SLACK_S
        else:
            # the batch was waiting since `ready`: everything after it (and after the last deadline) is own lateness
            late, limit = max(now - max(self._deadline, ready), 0.0), CATCHUP_S
        self._lost_s += max(late - limit, 0.0)  # lateness beyond what may be caught up is lost
        return max(self._deadline, now - min(late, limit))

    def _burn(self, count: int, start: float, cpu_before: float, slack: float) -> np.ndarray:
        """Cpu mode: each tuple burns its CPU budget, then the worker sleeps to its deadline so the cap holds."""
        burner, service, budget = self._burner, self._service_s, self._budget_s
        assert burner is not None
        finish = np.empty(count)
        # a running CPU target: the emulator's own overhead (sleeps cost CPU too) counts against the budget
        cpu_target = cpu_before - self._cpu_carry
        deadline = start
        last = count - 1
        for i in range(count):
            deadline = start + service
            cpu_target += budget
            began = time.perf_counter()
            self._burn_cpu_s += burner.burn_until(cpu_target)
            now = time.perf_counter()
            self._burn_wall_s += now - began
            if now < deadline:
                finish[i] = deadline
                # short sleeps cost about as much CPU as they save, so tiny tuples sleep a few at a time
                if i == last or deadline - now > MIN_SLEEP_S:
                    now = sleep_until(deadline)
            else:
                finish[i] = now
            if now - slack > deadline and i < last:
                self._lost_s += now - slack - deadline
                start = now - slack
            else:
                start = deadline
        self._deadline = deadline
        self._cpu_carry = min(max(time.thread_time() - cpu_target, 0.0), budget)
        return finish

    def measured_capacity(self) -> float:
        """Capacity implied by the wall time per tuple measured so far (the configured one before any is)."""
        if self._busy_s <= 0 or self.cost_ms == 0:
            return self._capacity
        return self.cost_ms * self._tuples / (self._busy_s * 1000.0)

    def busy_seconds(self) -> float:
        """Wall seconds spent serving so far."""
        return self._busy_s

    def stats(self) -> dict:
        """Counters and measurements of this worker's server, ready for a run summary."""
        return {
            "mode": self.mode,
            "capacity": self._capacity,
            "cost_ms": self.cost_ms,
            "core_share": self.core_share,
            # the share of one core this worker may use; a sleeping worker uses none
            "share": self._capacity * self.core_share if self.mode == "cpu" else 0.0,
            "tuples": self._tuples,
            "busy_s": self._busy_s,
            "cpu_s": self._cpu_s,
            "measured_capacity": self.measured_capacity(),
            "lost_s": self._lost_s,
            "cpu_per_tuple_ms": 1000.0 * self._cpu_s / self._tuples if self._tuples else 0.0,
            # CPU got / wall time while burning: 1.0 on an idle machine, lower when the machine is oversubscribed
            "cpu_availability": self._burn_cpu_s / self._burn_wall_s if self._burn_wall_s > 0 else 1.0,
            # ideal sleep mode: how late after its deadline each batch was done (its ack left), in ms
            "late_ms": spread_ms(self._late_s),
        }
