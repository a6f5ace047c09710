"""Stream partitioners ("groupings") for one stream edge: pure numpy + compiled kernels, no I/O.

    g = groupings.make("pkg", workers=10, seed=source_index)
    workers = g.route(groupings.hash_keys(["a", "b", "a"]), now=0.0)
    g.feedback(report)  # an AckReport: what the acks that reached this source carried
    g.resize(11)        # a worker joins at index 10

Each compiled strategy is a candidate set (one hash, two hashes, d hashes, all workers, ring walk, salted
rehash, random per message) combined with a selector (least local load, first with spare capacity, round
robin); D-Choices, W-Choices and Round-Robin add a head/tail split driven by a SpaceSaving heavy-hitter summary.
Adaptive strategies live in `groupings.adaptive`, one module each, and register themselves on import.
"""

from .contract import Partitioner, Replicated
from .feedback import AckReport, WorkerReport
from .params import Param
from .registry import describe, make, make_controller, make_delegation, names, register

# the numba-compiled parts load on first use (importing numba takes about 0.4 s, and a worker process that never
# routes a tuple, or a command line that refuses its arguments, should not pay it); the registry loads every
# strategy module the first time it is asked for a name
_LAZY = {
    "Grouping": ".compiled.grouping",
    "Strategy": ".compiled.grouping",
    "find_optimal_choices": ".dchoices",
    "hash_keys": ".hashing",
    "SpaceSaving": ".spacesaving",
}

__all__ = [
    "AckReport",
    "adaptive",
    "Grouping",
    "Param",
    "Partitioner",
    "Replicated",
    "SpaceSaving",
    "Strategy",
    "WorkerReport",
    "describe",
    "find_optimal_choices",
    "hash_keys",
    "make",
    "make_controller",
    "make_delegation",
    "names",
    "register",
]


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    if name in ("adaptive", "compiled"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
