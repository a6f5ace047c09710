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

from .compiled.grouping import Grouping, Strategy
from .contract import Partitioner, Replicated
from .dchoices import find_optimal_choices
from .feedback import AckReport, WorkerReport
from .hashing import hash_keys
from .params import Param
from .registry import describe, make, make_controller, make_delegation, names, register
from .spacesaving import SpaceSaving

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

# last, so that adaptive modules may use everything above while they register themselves
from . import adaptive  # noqa: E402
