"""Grouping parameters, declared once with type, default and rule; values may come as command-line strings.

One declaration list per strategy serves its factory, its controller and its worker delegation alike: `resolve`
turns what the user gave (Python values or `--set key=value` strings) into one checked dict they all receive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Number = int | float
Value = int | float | bool | str

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_KINDS = (int, float, bool, str)


@dataclass(frozen=True)
class Param:
    """One tunable of a strategy: its type, its default (a value, or derived from the others) and its rule.

    `kind` is int, float, bool or str; a str parameter with `choices` takes one of them (case-insensitive).
    `default` is either the value itself or `(workers, values resolved so far) -> value`; `shown` is how help
    texts print a derived default ("1/(5n)"). `check(value, workers, values)` returns why a value is bad, or None.
    `duration` marks a span of time (seconds or milliseconds, as its name and help say): `--time-scale` stretches it.
    """

    name: str
    kind: type
    default: Value | Callable[[int, Mapping[str, Any]], Value]
    check: Callable[[Any, int, Mapping[str, Any]], str | None] | None = None
    doc: str = ""
    choices: tuple[str, ...] = ()
    shown: str = ""
    duration: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"parameter name {self.name!r} is not an identifier")
        if self.kind not in _KINDS:
            raise ValueError(f"parameter {self.name} has kind {self.kind!r}; use int, float, bool or str")
        if self.choices and self.kind is not str:
            raise ValueError(f"parameter {self.name}: only str parameters take choices")
        if not callable(self.default):
            self.coerce(self.default)  # a constant default must itself be a valid value

    def coerce(self, value: Any) -> Value:
        """The value as this parameter's type; strings are parsed, anything else unsuitable is a ValueError."""
        if self.kind is bool:
            return _as_bool(self.name, value)
        if self.kind is str:
            return self._as_choice(value)
        return _as_number(self.name, self.kind, value)

    def default_for(self, workers: int, values: Mapping[str, Any]) -> Value:
        """The default value for `workers` workers, given the values of the parameters declared before it."""
        return self.coerce(self.default(workers, values) if callable(self.default) else self.default)

    def _as_choice(self, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"parameter {self.name} must be a string (got {type(value).__name__} {value!r})")
        text = value.strip()
        if not self.choices:
            return text
        for choice in self.choices:
            if choice.lower() == text.lower():
                return choice
        raise ValueError(f"parameter {self.name} must be one of {'|'.join(self.choices)} (got {value!r})")


def _as_bool(name: str, value: Any) -> bool:
    """True/False from a bool, 0/1, or "true"/"false"/"yes"/"no"/"on"/"off"/"1"/"0"."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError(f"parameter {name} must be true or false (got {value!r})")


def _as_number(name: str, kind: type, value: Any) -> Number:
    """An int or float from a number or a numeric string; booleans, NaN and infinities are refused."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"parameter {name} must be a number, not {value!r}")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if kind is int and text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise ValueError(f"parameter {name} must be a number (got {value!r})") from None
    if isinstance(value, (int, np.integer)):
        return kind(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"parameter {name} must be finite (got {value})")
        if kind is int:
            if not value.is_integer():
                raise ValueError(f"parameter {name} must be an integer (got {value})")
            return int(value)
        return value
    raise ValueError(f"parameter {name} must be a number (got {type(value).__name__} {value!r})")


def resolve(strategy: str, declared: tuple[Param, ...], workers: int, given: Mapping[str, Any]) -> dict:
    """Effective parameter values: the given ones coerced and checked, the rest filled with defaults."""
    known = [p.name for p in declared]
    unknown = sorted(set(given) - set(known))
    if unknown:
        valid = ", ".join(sorted(known)) or "none"
        raise ValueError(f"unknown parameter {unknown[0]!r} for grouping {strategy} (valid: {valid})")
    values: dict[str, Any] = {}
    for p in declared:  # declaration order: a default or rule may depend on the values before it
        values[p.name] = p.coerce(given[p.name]) if p.name in given else p.default_for(workers, values)
        problem = p.check(values[p.name], workers, values) if p.check is not None else None
        if problem:
            raise ValueError(f"parameter {p.name} of grouping {strategy} {problem} (got {values[p.name]})")
    return values


def shown_default(p: Param, declared: tuple[Param, ...], workers: int | None = None) -> Value:
    """The default as help texts print it: the value for `workers`, or one that holds for any worker count."""
    if not callable(p.default):
        return p.coerce(p.default)
    if p.shown and workers is None:
        return p.shown
    samples = [workers] if workers is not None else [1, 7, 1000]
    seen = set()
    for n in samples:
        values: dict[str, Any] = {}
        for q in declared:
            try:
                values[q.name] = q.default_for(n, values)
            except (ArithmeticError, KeyError, TypeError, ValueError):
                values[q.name] = None
            if q is p:
                break
        seen.add(values[p.name])
    return seen.pop() if len(seen) == 1 else "depends on workers"


# --- rules ----------------------------------------------------------------------------------------------------


def positive(value: Number, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: strictly positive."""
    return None if value > 0 else "must be > 0"


def non_negative(value: Number, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: zero or more."""
    return None if value >= 0 else "must be >= 0"


def at_least_one(value: Number, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: a count of at least 1."""
    return None if value >= 1 else "must be at least 1"


def fraction(value: Number, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: in (0, 1]."""
    return None if 0 < value <= 1 else "must be in (0, 1]"


def covers_theta(value: Number, workers: int, values: Mapping[str, Any]) -> str | None:
    """Rule: enough SpaceSaving counters to catch every key at or above theta (k >= 1/theta)."""
    need = math.ceil(1.0 / values["theta"] - 1e-9)
    return None if value >= need else f"must be at least 1/theta = {need}"


# --- parameters shared by several strategies --------------------------------------------------------------------


def eps_param(default: float, doc: str) -> Param:
    """The slack/target eps, > 0."""
    return Param("eps", float, default, positive, doc)


THETA = Param("theta", float, lambda n, v: 1.0 / (5 * n), fraction, "head threshold on frequency", shown="1/(5n)")
COUNTERS = Param(
    "counters",
    int,
    # four times 1/theta: estimates then err by at most theta/4, so the head boundary is sharp
    lambda n, v: max(64, math.ceil(4.0 / v["theta"] - 1e-9)),
    covers_theta,
    "SpaceSaving counters",
    shown="max(64, 4/theta)",
)
REFRESH = Param("refresh", int, 10_000, at_least_one, "most messages between two recomputations of d")
REPLICAS = Param("replicas", int, 64, at_least_one, "ring points per worker")
