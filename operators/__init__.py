"""What a worker computes: operators with mergeable partial state, looked up by name."""

from __future__ import annotations

import inspect

from operators.base import Operator, group_by_worker
from operators.naivebayes import NaiveBayes, NaiveBayesState
from operators.topk import TopK, TopKState
from operators.wordcount import WordCount, WordCountState

_REGISTRY: dict[str, type[Operator]] = {cls.name: cls for cls in (WordCount, NaiveBayes, TopK)}

__all__ = [
    "NaiveBayes",
    "NaiveBayesState",
    "Operator",
    "TopK",
    "TopKState",
    "WordCount",
    "WordCountState",
    "group_by_worker",
    "make",
    "names",
    "parameters",
]


def names() -> list[str]:
    """Names of the available operators."""
    return sorted(_REGISTRY)


def _lookup(name: str) -> type[Operator]:
    """The operator class registered under `name` (ValueError with one line if there is none)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown operator '{name}' (known: {', '.join(names())})") from None


def parameters(name: str) -> dict[str, object]:
    """The parameters an operator takes, with their defaults."""
    signature = inspect.signature(_lookup(name).__init__)
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name: p.default for p in list(signature.parameters.values())[1:] if p.kind in named}


def _coerce(name: str, param: str, text: str, default: object) -> object:
    """A parameter given as text (e.g. from `--set k=5`) as the type of its default."""
    try:
        if isinstance(default, bool):
            if text.strip().lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text.strip().lower() in ("true", "1")
        if isinstance(default, int):
            number = float(text)
            # '1e4' is a whole number too; '2.5' is not
            if not number.is_integer():
                raise ValueError(text)
            return int(number)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        kind = {bool: "true or false", int: "a whole number"}.get(type(default), "a number")
        raise ValueError(f"{name}: {param} must be {kind} (got '{text}')") from None
    return text


def make(name: str, **params: object) -> Operator:
    """A new operator by name; unknown names, unknown parameters and bad values give a one-line ValueError."""
    cls = _lookup(name)
    known = parameters(name)
    unknown = sorted(set(params) - set(known))
    if unknown:
        takes = ", ".join(known) if known else "no parameters"
        raise ValueError(f"{name}: unknown parameter '{unknown[0]}' (takes: {takes})")
    values = {p: _coerce(name, p, v, known[p]) if isinstance(v, str) else v for p, v in params.items()}
    return cls(**values)
