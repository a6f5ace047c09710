"""Grouping parameters, declared once with type, default and rule; values may come as command-line strings."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Number = int | float


@dataclass(frozen=True)
class Param:
    """One tunable of a strategy: its type, its default (possibly derived from the others) and its rule."""

    name: str
    kind: type  # int or float
    default: Callable[[int, Mapping[str, Number]], Number]  # (workers, values given so far) -> default
    check: Callable[[Number, int, Mapping[str, Number]], str | None]  # -> why the value is bad, or None
    doc: str

    def coerce(self, value: Any) -> Number:
        """The value as this parameter's type; numeric strings are accepted, anything else is a ValueError."""
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"parameter {self.name} must be a number, not {value!r}")
        if isinstance(value, str):
            text = value.strip()
            try:
                value = int(text) if self.kind is int and text.lstrip("+-").isdigit() else float(text)
            except ValueError:
                raise ValueError(f"parameter {self.name} must be a number (got {value!r})") from None
        if isinstance(value, (int, np.integer)):
            return self.kind(int(value))
        if isinstance(value, (float, np.floating)):
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"parameter {self.name} must be finite (got {value})")
            if self.kind is int:
                if not value.is_integer():
                    raise ValueError(f"parameter {self.name} must be an integer (got {value})")
                return int(value)
            return value
        raise ValueError(f"parameter {self.name} must be a number (got {type(value).__name__} {value!r})")


def resolve(strategy: str, declared: tuple[Param, ...], workers: int, given: Mapping[str, Any]) -> dict:
    """Effective parameter values: the given ones coerced and checked, the rest filled with defaults."""
    known = {p.name for p in declared}
    unknown = sorted(set(given) - known)
    if unknown:
        valid = ", ".join(sorted(known)) or "none"
        raise ValueError(f"unknown parameter {unknown[0]!r} for grouping {strategy} (valid: {valid})")
    values: dict[str, Number] = {}
    for p in declared:  # declaration order: a default or rule may depend on the values before it
        values[p.name] = p.coerce(given[p.name]) if p.name in given else p.default(workers, values)
        problem = p.check(values[p.name], workers, values)
        if problem:
            raise ValueError(f"parameter {p.name} of grouping {strategy} {problem} (got {values[p.name]})")
    return values


def positive(value: Number, workers: int, values: Mapping[str, Number]) -> str | None:
    """Rule: strictly positive."""
    return None if value > 0 else "must be > 0"


def at_least_one(value: Number, workers: int, values: Mapping[str, Number]) -> str | None:
    """Rule: a count of at least 1."""
    return None if value >= 1 else "must be at least 1"


def fraction(value: Number, workers: int, values: Mapping[str, Number]) -> str | None:
    """Rule: in (0, 1]."""
    return None if 0 < value <= 1 else "must be in (0, 1]"


def covers_theta(value: Number, workers: int, values: Mapping[str, Number]) -> str | None:
    """Rule: enough SpaceSaving counters to catch every key at or above theta (k >= 1/theta)."""
    need = math.ceil(1.0 / values["theta"] - 1e-9)
    return None if value >= need else f"must be at least 1/theta = {need}"


def eps_param(default: float, doc: str) -> Param:
    """The slack/target eps, > 0."""
    return Param("eps", float, lambda n, v: default, positive, doc)


THETA = Param(
    "theta", float, lambda n, v: 1.0 / (5 * n), fraction, "head threshold on frequency; default 1/(5n)"
)
COUNTERS = Param(
    "counters",
    int,
    # four times 1/theta: estimates then err by at most theta/4, so the head boundary is sharp
    lambda n, v: max(64, math.ceil(4.0 / v["theta"] - 1e-9)),
    covers_theta,
    "SpaceSaving counters; default max(64, 4/theta)",
)
REFRESH = Param(
    "refresh", int, lambda n, v: 10_000, at_least_one, "most messages between two recomputations of d"
)
REPLICAS = Param("replicas", int, lambda n, v: 64, at_least_one, "ring points per worker")
