"""Changes of the world during a run: worker capacities and the number of active workers.

On the command line a schedule is `AT:VALUE;AT:VALUE...` where AT is a message count (`6000000`, `6e6`) or a
time in seconds (`2.5s`); e.g. `--capacity-schedule "6e6:1,1,5,5;12e6:5,5,1,1"` or `--scale-schedule "3s:12"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from topo.spec import SpecError

MESSAGES = "messages"
SECONDS = "seconds"


@dataclass(frozen=True)
class Change:
    """One scheduled change: at a message count or a time, set capacities (tuple) or active workers (int)."""

    at: float
    unit: str  # MESSAGES or SECONDS
    value: tuple[float, ...] | int

    def describe(self) -> str:
        """The change as the user wrote it (for summaries)."""
        at = f"{self.at:g}s" if self.unit == SECONDS else f"{int(self.at)}"
        value = ",".join(f"{v:g}" for v in self.value) if isinstance(self.value, tuple) else str(self.value)
        return f"{at}:{value}"


def _parse_at(text: str, option: str) -> tuple[float, str]:
    text = text.strip()
    unit = SECONDS if text.endswith("s") else MESSAGES
    number = text[:-1] if unit == SECONDS else text
    try:
        at = float(number)
    except ValueError:
        raise SpecError(f"{option}: '{text}' is neither a message count nor seconds such as 2.5s") from None
    if not at >= 0 or (unit == MESSAGES and at != int(at)):
        raise SpecError(f"{option}: '{text}' must be a whole message count or a time such as 2.5s, >= 0")
    return at, unit


def _entries(text: str, option: str) -> list[tuple[float, str, str]]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        at, sep, value = part.partition(":")
        if not sep or not value.strip():
            raise SpecError(f"{option}: '{part}' is not AT:VALUE (e.g. 6e6:1,1,5 or 2.5s:1,1,5)")
        out.append((*_parse_at(at, option), value.strip()))
    if not out:
        raise SpecError(f"{option}: empty schedule")
    units = {unit for _, unit, _ in out}
    if len(units) > 1:
        raise SpecError(f"{option}: mixes message counts and seconds; use one of them")
    ats = [at for at, _, _ in out]
    if ats != sorted(ats):
        raise SpecError(f"{option}: changes must be listed in time order")
    return out


def parse_capacity_schedule(text: str | None, workers: int) -> tuple[Change, ...]:
    """'6e6:1,1,5;12e6:5,1,1' -> capacity changes, each with one positive value per worker."""
    if not text:
        return ()
    changes = []
    for at, unit, value in _entries(text, "--capacity-schedule"):
        try:
            caps = tuple(float(v) for v in value.split(","))
        except ValueError:
            raise SpecError(f"--capacity-schedule: '{value}' is not a list of numbers") from None
        if len(caps) != workers:
            raise SpecError(f"--capacity-schedule: '{value}' lists {len(caps)} capacities for {workers} workers")
        if not all(c > 0 for c in caps):
            raise SpecError(f"--capacity-schedule: '{value}' has a capacity that is not positive")
        changes.append(Change(at, unit, caps))
    return tuple(changes)


def parse_scale_schedule(text: str | None) -> tuple[Change, ...]:
    """'3s:12;6s:8' -> changes of the number of active workers (joining and leaving at the top index)."""
    if not text:
        return ()
    changes = []
    for at, unit, value in _entries(text, "--scale-schedule"):
        try:
            n = int(value)
        except ValueError:
            raise SpecError(f"--scale-schedule: '{value}' is not a whole number of workers") from None
        if n < 1:
            raise SpecError(f"--scale-schedule: '{value}': at least one worker must stay")
        changes.append(Change(at, unit, n))
    return tuple(changes)
