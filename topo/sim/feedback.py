"""What the compiled event loop (`topo.sim.loop`) needs of a run whose grouping learns from acks, packed from the
simulator's Python objects before the loop and written back into them after it (`fb`, laid out in `loop`).

Two groupings learn in compiled code (`inbox`): Consistent Grouping (its pairing and map, `groupings.adaptive.
pairing`, on the signals of the workers' delegation) and FISH (each worker's time per tuple). For them the workers'
`AckMeter`s (and CG's `WorkerDelegation`) run in the loop too (`acks`). Any other grouping that takes feedback
keeps the Python loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from topo.model.pairwise import new_stack
from topo.sim import acks, inbox, stacking


def mode_of(sim: Any) -> int | None:
    """`inbox.CG` or `inbox.FISH` when every source's grouping is that one, `inbox.NONE` when none takes feedback,
    None when the run needs the Python loop (another learner, a mix, or a delegation other than CG's)."""
    from groupings.adaptive.cg import ConsistentGrouping
    from groupings.adaptive.fish import Fish
    from groupings.delegation import WorkerDelegation

    kinds = {type(source.node.grouping) for source in sim.sources}
    if kinds == {ConsistentGrouping}:
        mode = inbox.CG
        if sim.delegation is not None and type(sim.delegation) is not WorkerDelegation:
            return None
    elif kinds == {Fish}:
        mode = inbox.FISH
    elif any(source.node.takes_feedback for source in sim.sources):
        return None
    else:
        mode = inbox.NONE
    if mode != inbox.CG and sim.delegation is not None:
        return None
    return mode


def routing(grouping: Any, mode: int) -> Any:
    """The compiled strategy a source's grouping routes with (CG: its PoRC; FISH routes with its own state)."""
    return grouping.compiled_route()[0] if mode == inbox.CG else grouping


def pack(sim: Any, nodes: list, room: int, mode: int) -> tuple:
    """`loop`'s `fb`: the meters, room for `room` acks per source in its inbox and on the wire, and the state of
    the grouping that learns (empty arrays of the same types for the others, so that one compiled loop serves)."""
    S = len(nodes)
    if mode == inbox.NONE:  # one idle meter stands in
        from topo.model import AckMeter

        S, room = 1, 1
        meters = acks.pack([AckMeter(0, 1.0, 1)], np.zeros(1), None, 1, 0)
    else:
        meters = acks.pack(sim.meters, sim._busy_s, sim.delegation, S, sim.spec.max_pending)
    cg = [node.grouping for node in nodes] if mode == inbox.CG else [stand_in("cg")]
    paired = stacking.stacked([grouping.pairing_arrays() for grouping in cg])
    sent = np.stack([grouping.compiled_route()[1] for grouping in cg]).astype(np.int64)
    fish = [node.grouping for node in nodes] if mode == inbox.FISH else [stand_in("fish")]
    learnt = (stacking.stacked([grouping._state for grouping in fish]),
              np.stack([grouping._measured for grouping in fish]),
              np.stack([grouping._heard for grouping in fish]).astype(np.uint8),
              np.empty(fish[0].workers), new_stack())
    return (meters, np.zeros((S, room, 5)), np.zeros((S, room, 2), np.int64), np.zeros((S, 2), np.int64), paired,
            sent, np.zeros((S, room, 4)), np.zeros((S, room), np.int64), np.zeros((S, 2), np.int64), np.zeros(4),
            learnt)


def unpack(sim: Any, nodes: list, fb: tuple, mode: int, deliveries: int) -> None:
    """Write the loop's meters, inboxes and the learning grouping's state back into the simulator's objects."""
    if mode == inbox.NONE:
        return
    acks.unpack(fb[0], sim.meters, sim._busy_s, sim.delegation, deliveries)
    for s, node in enumerate(nodes):
        node._inbox = _inbox(fb, s)  # what landed after the last step: `SourceNode.finish` hands it over
        grouping = node.grouping
        if mode == inbox.CG:
            grouping.compiled_route()[1][:] = fb[5][s]
            grouping.take_pairing_arrays(*(part[s] for part in fb[4]))
        else:
            stacking.unstack(fb[10][0], grouping._state, s)
            grouping._measured[:], grouping._heard[:] = fb[10][1][s], fb[10][2][s].astype(bool)


def _inbox(fb: tuple, s: int) -> list[tuple]:
    """Source s's acks since its last step, as `SourceNode._inbox` holds them."""
    inbox_f, inbox_i = fb[1][s, : fb[3][s, 0]], fb[2][s, : fb[3][s, 0]]
    return [(int(i[0]), float(f[0]), float(f[1]), float(f[2]), float(f[3]), int(i[1]), int(f[4]))
            for f, i in zip(inbox_f, inbox_i, strict=True)]


def stand_in(name: str) -> Any:
    """A two-worker instance of a grouping: its state's types stand in for a grouping the run does not use."""
    from groupings import registry

    return registry.make(name, 2, seed=0)
