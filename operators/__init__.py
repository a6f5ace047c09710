"""What a worker computes: operators with mergeable partial state, looked up by name."""

from __future__ import annotations

from operators.base import Operator, group_by_worker
from operators.wordcount import WordCount, WordCountState

_REGISTRY: dict[str, type[Operator]] = {WordCount.name: WordCount}

__all__ = ["Operator", "WordCount", "WordCountState", "group_by_worker", "make", "names"]


def names() -> list[str]:
    """Names of the available operators."""
    return sorted(_REGISTRY)


def make(name: str, **params) -> Operator:
    """A new operator by name (ValueError with one line if the name is unknown)."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown operator '{name}' (known: {', '.join(names())})") from None
    return cls(**params)
