"""The command lines' values: each option's text turned into a value, or one clear line (`UsageError`)."""

from __future__ import annotations

import argparse

DEFAULT_LOAD = 0.8  # no --rate: this share of what the workers serve together


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


def seed_value(text: str) -> int:
    """A --seed: numpy seeds only with whole numbers >= 0, so anything else is refused before a run starts."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return value


def time_scale_value(text: str) -> float | str:
    """A --time-scale: 'auto', or a number >= 1."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 1 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 1 or auto, got '{text}'")
    return value


def parse_capacities(text: str | None) -> tuple[float, ...] | None:
    """'1,1,0.3' -> (1.0, 1.0, 0.3); one clear error for anything else."""
    if text is None:
        return None
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"--capacities '{text}': expected comma-separated numbers such as 1,1,0.3") from None
    return values


def parse_params(items: list[str]) -> dict[str, str]:
    """['eps=0.3', 'vw=10'] -> {'eps': '0.3', 'vw': '10'}; values stay strings, the grouping coerces them."""
    params: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"--set '{item}': expected KEY=VALUE, e.g. --set eps=0.01")
        params[key.strip()] = value.strip()
    return params


def parse_chaos(items: list[str]) -> tuple[tuple[str, int | None, float], ...]:
    """['kill-worker:2@5', 'kill-aggregator@3'] -> (('kill-worker', 2, 5.0), ('kill-aggregator', None, 3.0))."""
    from topo.chaos import parse_event

    return tuple(parse_event(item) for item in items)


def parse_rate(text: str | None, capacities: tuple[float, ...] | None, workers: int, cost_ms: float) -> float | None:
    """'max' -> None (saturating); a number -> tuples/s; no value -> DEFAULT_LOAD of the workers' total capacity."""
    if text is None:
        if not cost_ms > 0:
            return None
        total = sum(capacities) if capacities is not None else float(workers)
        return DEFAULT_LOAD * total / (cost_ms / 1e3)
    if text.strip().lower() == "max":
        return None
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--rate '{text}': expected tuples per second (e.g. 17600) or 'max'") from None
