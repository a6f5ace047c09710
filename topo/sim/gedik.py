"""Gedik's partitioning functions in the compiled event loop (`topo.sim.loop`).

Each source routes by LOOKUP under the controller's current function and counts every key in its sliding lossy
counters, as `GedikGrouping.route` does. In the loop the sources' counters are one stack, a row per source, and
each grouping's counter is pointed at its rows, so the controller reads them live when the loop hands a period
over to Python (`compiled.run`), and nothing is copied back at the end. The loop allocates nothing, so the counters
get their room beforehand: after each routing call a source whose counters could not take another batch of new
keys stops there (`loop.RESUME`), and `pack` grows them before the step goes on. Growing sooner than
`GedikGrouping.route` (which grows once a counter is full) keeps the same entries in the same order: a counter's
capacity is not part of what it counts.
"""

from __future__ import annotations

from typing import Any

from groupings.adaptive.gedik_function import lookup_channel
from groupings.jit import hot
from groupings.lossy import SIZE, Lossy, count, grown
from topo.sim import stacking

GEDIK_KERNEL = -2  # `compiled.kernel_of`'s answer when every source runs Gedik's partitioning functions


def runs_compiled(sim: Any) -> bool:
    """True when every source of `sim` routes with Gedik's grouping under the run's one controller, and nothing
    but that controller's first period waits in the Python kernel."""
    from groupings.adaptive.gedik import GedikGrouping
    from groupings.adaptive.gedik_controller import GedikController

    if type(sim.controller) is not GedikController or sim.kernel.pending() != 1:
        return False
    if sim.kernel._queue[0][3] != sim._control:
        return False
    return all(type(s.node.grouping) is GedikGrouping and s.node.grouping.controller is sim.controller
               for s in sim.sources)


def pack(groupings: list, batch: int) -> tuple:
    """`loop`'s Gedik part of `fb`: (the groupings' counters stacked, one row per source, with room for `batch`
    new keys in each; the controller's current tables). The counters of `groupings` then count into the stack."""
    # one capacity for all (Python routing may have grown some already, each by doublings of the same start)
    room = max(max(int(g.counter.lossy.meta[:, SIZE].max()) for g in groupings) + batch,
               max(g.counter.lossy.keys.shape[1] for g in groupings))
    for g in groupings:
        while g.counter.lossy.keys.shape[1] < room:
            g.counter.lossy = grown(g.counter.lossy)
    stack = stacking.stacked([g.counter.lossy for g in groupings])
    for s, g in enumerate(groupings):
        g.counter.lossy = Lossy(*(rows[s] for rows in stack))
    return stack, groupings[0].controller.function().tables


def stand_in() -> tuple:
    """`pack` of a two-worker Gedik grouping: its types stand in for a run that does not route with Gedik's."""
    from topo.sim.feedback import stand_in as make

    return pack([make("gedik")], 1)


# compiled apart, not inlined into the loop: inlined, the loop took about 0.5 s more over 10M tuples (measured)
@hot
def route(keys, chosen, part, s, batch):
    """Source s's LOOKUP and lossy counting of `keys` into `chosen`; False when its counters may not have room
    for another `batch` of new keys (each key adds at most one entry to each counter)."""
    c, tables = part
    lossy = Lossy(c[0][s], c[1][s], c[2][s], c[3][s], c[4][s], c[5][s])
    for j in range(keys.size):
        chosen[j] = lookup_channel(keys[j], tables)
        count(lossy, keys[j])
    meta = lossy.meta
    most = 0
    for r in range(meta.shape[0]):
        most = max(most, meta[r, SIZE])
    return most + batch <= lossy.keys.shape[1]
