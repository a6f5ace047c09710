"""Chaos events of a Ray run: which actor dies, and when (`--chaos`).

`kill-worker:I@S` and `kill-source:I@S` kill one worker's or source's process S seconds into the run;
`kill-aggregator@S` and `kill-controller@S` kill the one aggregator or controller; `kill-any@S` kills an actor
drawn with the run's seed among all of them. Each can be repeated. Events are (action, target, at) tuples, the
target None for the actors a run has only one of; parsing and checking need no Ray.
"""

from __future__ import annotations

import numpy as np

from topo.errors import SpecError

KILL_WORKER, KILL_SOURCE = "kill-worker", "kill-source"
KILL_AGGREGATOR, KILL_CONTROLLER, KILL_ANY = "kill-aggregator", "kill-controller", "kill-any"
INDEXED = (KILL_WORKER, KILL_SOURCE)  # actions that name an index
ACTIONS = (*INDEXED, KILL_AGGREGATOR, KILL_CONTROLLER, KILL_ANY)
GRAMMAR = "kill-worker:I@S, kill-source:I@S, kill-aggregator@S, kill-controller@S or kill-any@S"
KIND = {KILL_WORKER: "worker", KILL_SOURCE: "source", KILL_AGGREGATOR: "aggregator",
        KILL_CONTROLLER: "controller"}


def parse_event(text: str) -> tuple[str, int | None, float]:
    """'kill-source:1@5' -> ('kill-source', 1, 5.0); 'kill-aggregator@3s' -> ('kill-aggregator', None, 3.0)."""
    head, sep, at = text.strip().partition("@")
    action, _, target = head.partition(":")
    action = action.strip()
    try:
        seconds = float(at.strip().rstrip("s")) if sep else float("nan")
        index = int(target) if target.strip() else None
    except ValueError:
        raise SpecError(f"--chaos '{text}': expected {GRAMMAR} (S in seconds), e.g. kill-worker:2@5") from None
    return check_event((action, index, seconds))


def check_event(event: tuple) -> tuple[str, int | None, float]:
    """An event whose action, target and time are well formed (their bounds are checked by `check_events`)."""
    action, target, at = event
    if action not in ACTIONS:
        raise SpecError(f"--chaos {action!r}: the action must be one of {', '.join(ACTIONS)}")
    if (target is None) == (action in INDEXED):
        form = f"{action}:I@S" if action in INDEXED else f"{action}@S"
        raise SpecError(f"--chaos {action}: expected {form}")
    if not (isinstance(at, (int, float)) and np.isfinite(at) and at >= 0):
        raise SpecError(f"--chaos {action}: the time must be a number of seconds >= 0 (got {at})")
    return action, None if target is None else int(target), float(at)


def check_events(events, workers: int, sources: int, controller: bool | None = None) -> list[tuple]:
    """Every event checked against the topology (indices in range; a controller only where there is one), by time."""
    out = []
    for event in events:
        action, target, at = parse_event(event) if isinstance(event, str) else check_event(tuple(event))
        bound = {KILL_WORKER: workers, KILL_SOURCE: sources}.get(action)
        if bound is not None and not 0 <= target < bound:
            raise SpecError(f"--chaos {action}:{target}@{at:g}: there are {bound} {KIND[action]}s (0..{bound - 1})")
        if action == KILL_CONTROLLER and controller is False:
            raise SpecError(f"--chaos {action}: this grouping has no controller (only gedik and albic do)")
        out.append((action, target, at))
    return sorted(out, key=lambda e: e[2])


def resolve_any(events: list[tuple], seed: int, workers: int, sources: int, controller: bool) -> list[tuple]:
    """`kill-any` events replaced by an actor drawn with `seed` (the i-th event from its own stream)."""
    actors = ([(KILL_WORKER, w) for w in range(workers)] + [(KILL_SOURCE, s) for s in range(sources)]
              + [(KILL_AGGREGATOR, None)] + ([(KILL_CONTROLLER, None)] if controller else []))
    out = []
    for i, (action, target, at) in enumerate(events):
        if action == KILL_ANY:
            action, target = actors[int(np.random.default_rng([seed, i]).integers(len(actors)))]
        out.append((action, target, at))
    return out


def label(action: str, target: int | None) -> str:
    """'worker 2', 'aggregator': the actor an event names, as the summary writes it."""
    return KIND[action] if target is None else f"{KIND[action]} {target}"
