"""Arrival times of stream datasets: a pure function of (seed, seq range), so any split gives the same times.

- `rate`: message seq arrives at seq / rate seconds.
- `poisson`: an exact Poisson process of the given rate. Messages are cut into fixed blocks of `BLOCK`; block b
  draws, from its own generator, its duration T_b ~ Gamma(BLOCK, 1/rate) (the sum of BLOCK exponential gaps)
  and then BLOCK - 1 sorted uniforms: given that the last arrival of a block falls T_b after the block's start,
  the earlier ones are uniform order statistics on (0, T_b). A block starts at the sum of the earlier T_b, so a
  task only draws one gamma per earlier block.
- `bursts`: a unit-rate Poisson process in operational time mapped through the inverse of the cumulative
  intensity Λ(t) of a rate that is `rate` outside bursts and `rate * burst_factor` inside them. Each period of
  `burst_every` seconds ends with a burst of `burst_length` seconds (bursts cover [k*E - L, k*E), k >= 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from topo.data.streamspec import StreamError

ARRIVAL_STREAM = 3  # spawn-key prefix, distinct from the key sampler's (0, 1) and the drift permutation's (2)
BLOCK = 1 << 16  # messages per independently seeded block of arrival times
MODES = ("none", "rate", "poisson", "bursts")


def _block_rng(seed: int, block: int) -> np.random.Generator:
    """The generator of one block of arrival times."""
    return np.random.Generator(np.random.Philox(np.random.SeedSequence(seed, spawn_key=(ARRIVAL_STREAM, block))))


def poisson_times(seed: int, rate: float, start: int, stop: int) -> np.ndarray:
    """Arrival times (seconds) of messages [start, stop) of a seeded Poisson process of `rate` per second."""
    out = np.empty(stop - start, dtype=np.float64)
    if stop <= start:
        return out
    first, last = start // BLOCK, (stop - 1) // BLOCK
    scale = 1.0 / rate
    offset = _cumulative_offset(seed, scale, first)
    for block in range(first, last + 1):
        rng = _block_rng(seed, block)
        total = rng.gamma(BLOCK, scale)
        spacing = np.empty(BLOCK, dtype=np.float64)
        rng.random(out=spacing[:-1])
        spacing[:-1].sort()
        spacing[-1] = 1.0  # the block's last message arrives exactly at its end
        lo = block * BLOCK
        a, b = max(lo, start), min(lo + BLOCK, stop)
        out[a - start : b - start] = offset + total * spacing[a - lo : b - lo]
        offset += total
    return out


def _cumulative_offset(seed: int, scale: float, blocks: int) -> float:
    """Start time of block `blocks`: the sum of the durations of the blocks before it."""
    # the gamma is each block's first draw, so an earlier block costs one draw; cumsum adds in block order,
    # so every task gets bit-identical offsets
    totals = np.array([_block_rng(seed, b).gamma(BLOCK, scale) for b in range(blocks)], dtype=np.float64)
    return float(np.cumsum(totals)[-1]) if blocks else 0.0


def burst_times(operational: np.ndarray, rate: float, every: float, length: float, factor: float) -> np.ndarray:
    """Map unit-rate operational times through Λ^-1 of the bursty intensity (rate, rate*factor in bursts)."""
    calm_len = every - length
    calm_mass = rate * calm_len
    period_mass = calm_mass + rate * factor * length
    period = np.floor(operational / period_mass)
    rem = operational - period * period_mass
    within = np.where(rem < calm_mass, rem / rate, calm_len + (rem - calm_mass) / (rate * factor))
    return period * every + within


@dataclass(frozen=True)
class Arrivals:
    """How the messages of a dataset arrive; `times(start, stop)` is None for mode none (no ts column)."""

    mode: str = "none"
    rate: float | None = None
    burst_every: float | None = None
    burst_length: float | None = None
    burst_factor: float | None = None
    seed: int = 0

    def check(self) -> Arrivals:
        """This object, or StreamError naming the option that is wrong."""
        if self.mode not in MODES:
            raise StreamError(f"--arrivals '{self.mode}': unknown (expected one of: {', '.join(MODES)})")
        if self.mode == "none":
            if self.rate is not None:
                raise StreamError("--rate needs --arrivals rate, poisson or bursts")
            self._no_burst_options()
            return self
        if self.rate is None:
            raise StreamError(f"--arrivals {self.mode} needs --rate TPS (messages per second)")
        _positive("--rate", self.rate)
        if self.mode != "bursts":
            self._no_burst_options()
            return self
        for name, value in (("--burst-every", self.burst_every), ("--burst-length", self.burst_length),
                            ("--burst-factor", self.burst_factor)):
            if value is None:
                raise StreamError(f"--arrivals bursts needs {name}")
            _positive(name, value)
        if self.burst_length >= self.burst_every:
            raise StreamError(
                f"--burst-length {self.burst_length:g} must be shorter than --burst-every {self.burst_every:g}"
            )
        return self

    def _no_burst_options(self) -> None:
        """StreamError if a burst option is set for a mode without bursts."""
        if self.burst_every is not None or self.burst_length is not None or self.burst_factor is not None:
            raise StreamError("--burst-every, --burst-length and --burst-factor need --arrivals bursts")

    @property
    def mean_rate(self) -> float | None:
        """Long-run messages per second (None for mode none)."""
        if self.mode == "none":
            return None
        if self.mode != "bursts":
            return float(self.rate)
        every, length = float(self.burst_every), float(self.burst_length)
        return float(self.rate) * (every - length + self.burst_factor * length) / every

    def times(self, start: int, stop: int) -> np.ndarray | None:
        """Arrival time in seconds of messages [start, stop), or None when arrivals are not modelled."""
        if self.mode == "none":
            return None
        if self.mode == "rate":
            return np.arange(start, stop, dtype=np.float64) / self.rate
        if self.mode == "poisson":
            return poisson_times(self.seed, float(self.rate), start, stop)
        operational = poisson_times(self.seed, 1.0, start, stop)
        return burst_times(operational, float(self.rate), float(self.burst_every), float(self.burst_length),
                           float(self.burst_factor))

    def meta(self) -> dict:
        """The settings for `_meta.json`."""
        meta: dict = {"mode": self.mode}
        if self.mode == "none":
            return meta
        meta.update(rate=float(self.rate), seed=self.seed, mean_rate=self.mean_rate)
        if self.mode == "bursts":
            meta.update(burst_every=float(self.burst_every), burst_length=float(self.burst_length),
                        burst_factor=float(self.burst_factor))
        return meta


def _positive(name: str, value: float) -> None:
    """StreamError unless value is a finite number > 0."""
    if not (math.isfinite(value) and value > 0):
        raise StreamError(f"{name} {value:g}: must be a finite number > 0")
