"""Genuine CPU burning for the capped workers: a compiled spin whose length is calibrated in thread CPU time.

A tuple's CPU budget is burnt by a compiled xorshift loop (real arithmetic the scheduler accounts as CPU use, with
the interpreter out of the way), sized from a rate of iterations per CPU second that is re-measured on every chunk.
The clock is `time.thread_time`: it counts only this thread, so a Ray actor's own helper threads (gRPC, metrics)
do not eat the worker's budget, and time spent descheduled on a busy machine is not mistaken for work done.
"""

from __future__ import annotations

import time

import numba
import numpy as np

# below this much CPU left a tuple's burn is done: one more chunk would cost more than it adds
_DONE_S = 2e-6
# size chunks slightly short so the last one rarely overshoots the budget
_AIM = 0.97
# weight of the newest rate measurement: the rate drifts with clock frequency and cache state, not per tuple
_LEARN = 0.2
# chunks shorter than this measure mostly clock-call noise, so they do not update the rate
_MEASURABLE_S = 2e-5

_calibrated_rate: float | None = None


# an explicit signature: Python ints come back from the spin, and must not make it compile a second variant
@numba.njit("uint64(int64, uint64)", cache=True, nogil=True)
def _spin(iterations: int, state: int) -> int:
    """Run `iterations` xorshift64 steps from `state` and return the last one, so no step can be optimised away."""
    x = state | np.uint64(1)
    for _ in range(iterations):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
    return x


def calibrate(cpu_seconds: float = 0.005) -> float:
    """Spin iterations per CPU second on this machine, measured once per process (compiling the spin first)."""
    global _calibrated_rate
    if _calibrated_rate is None:
        state = _spin(1000, 88172645463325252)
        iterations, used = 100_000, 0.0
        # grow the probe until it is long enough for the thread clock to measure it well
        while used < cpu_seconds:
            iterations *= 2
            c0 = time.thread_time()
            state = _spin(iterations, state)
            used = time.thread_time() - c0
        _calibrated_rate = iterations / used
    return _calibrated_rate


class Burner:
    """Burns CPU time of the calling thread up to a running target, learning the spin rate as it goes."""

    def __init__(self) -> None:
        self.rate = calibrate()
        self._state = 0x9E3779B97F4A7C15

    def burn_until(self, target_cpu: float) -> float:
        """Spin until this thread's CPU clock (`time.thread_time`) reaches `target_cpu`; return the seconds burnt."""
        now = first = time.thread_time()
        while target_cpu - now > _DONE_S:
            iterations = int((target_cpu - now) * self.rate * _AIM) + 1
            self._state = _spin(iterations, self._state)
            after = time.thread_time()
            used = after - now
            if used > _MEASURABLE_S:
                self.rate += _LEARN * (iterations / used - self.rate)
            now = after
        return now - first
