"""Plain per-tuple Python versions of the strategies: the baseline for speed, and an oracle for the kernels.

They follow the same algorithms with the same hash family, random generator, tie rules, SpaceSaving eviction
rule and resize rules, so for a given seed they route exactly like the compiled code, one tuple at a time.
`py_grouping(name, ...)` builds the one for any strategy that has a plain version (the nine compiled ones,
lasg, flink_adaptive, kafka_adaptive and key_shared).
"""

from __future__ import annotations

from typing import Any

from .feedback import PyFlinkAdaptive, PyKafkaAdaptive, PyKeyShared, PyLoadAwareShuffle
from .plain import PyGrouping, PySpaceSaving, bucket, mix64, optimal_choices

__all__ = ["REFERENCE_NAMES", "PyGrouping", "PySpaceSaving", "bucket", "mix64", "optimal_choices", "py_grouping"]


def py_grouping(name: str, workers: int, seed: int = 0, **params: Any) -> Any:
    """The plain Python version of strategy `name`."""
    if name == "lasg":
        return PyLoadAwareShuffle(workers, seed, **params)
    if name == "flink_adaptive":
        return PyFlinkAdaptive(workers, seed, **params)
    if name == "kafka_adaptive":
        return PyKafkaAdaptive(workers, seed, **params)
    if name == "key_shared":
        return PyKeyShared(workers, seed, **params)
    return PyGrouping(name, workers, seed, **params)


REFERENCE_NAMES = (
    "kg",
    "sg",
    "pkg",
    "potc",
    "porc",
    "chbl",
    "dc",
    "wc",
    "rr",
    "lasg",
    "flink_adaptive",
    "kafka_adaptive",
    "key_shared",
)
