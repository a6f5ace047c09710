"""Stream partitioners ("groupings") for one stream edge: pure numpy + compiled kernels, no I/O.

    g = groupings.make("pkg", workers=10, seed=source_index)
    workers = g.route(groupings.hash_keys(["a", "b", "a"]))

Each strategy is a candidate set (one hash, two hashes, d hashes, all workers, ring walk, salted rehash,
random per message) combined with a selector (least local load, first with spare capacity, round robin);
D-Choices, W-Choices and Round-Robin add a head/tail split driven by a SpaceSaving heavy-hitter summary.
"""

from .dchoices import find_optimal_choices
from .grouping import Grouping, Strategy
from .hashing import hash_keys
from .registry import make, names
from .spacesaving import SpaceSaving

__all__ = ["Grouping", "SpaceSaving", "Strategy", "find_optimal_choices", "hash_keys", "make", "names"]
