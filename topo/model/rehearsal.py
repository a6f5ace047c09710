"""A rehearsal: a throwaway source node routed, and every buffer acked at once, before any clock starts.

numba compiles a function once per tuple of argument types, and an array's type includes whether it may be written:
the Ray engine's sources read their share of the stream from Ray's object store, which hands out read-only arrays,
where the simulator's are writable. A rehearsal on arrays of the run's own kind makes numba load (or, with a cold
cache, compile) exactly what the run's steps will call, so a run's clock never counts a compilation. `topo.warm`
rehearses every grouping on read-only arrays, so that the cache holds what Ray's sources load.
"""

from __future__ import annotations

import numpy as np

from topo.model.source import SourceNode

IDLE_ACK = (0.0, 0.0, 0.5, 1.0, 0)  # an ack's fields: empty queue, half loaded, 1 ms per tuple, no signal
MAX_STEPS = 10_000  # a rehearsal's steps at most: enough for a few hundred tuples at any rate


def rehearse(node: SourceNode) -> int:
    """Step `node` through its whole input, acking every buffer as it leaves; the steps taken. Time jumps to the
    node's next wake-up, so a slow input costs no more steps than a fast one."""
    now, steps = 0.0, 0
    while not node.done and steps < MAX_STEPS:
        for buffer in node.step(now):
            node.on_ack(buffer.worker, IDLE_ACK, now)
        steps += 1
        wake = node.next_wakeup(now)
        now = max(now + 1e-3, wake if wake is not None else now)
    return steps


def read_only(array: np.ndarray | None) -> np.ndarray | None:
    """`array` as Ray's object store hands it to an actor: a view that may not be written."""
    if array is None:
        return None
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view
