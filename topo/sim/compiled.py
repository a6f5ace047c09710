"""Hands a simulation to the compiled event loop (`topo.sim.loop`) when nothing in it needs Python between events,
and writes the sources' counters back, so that the outputs are built from the same objects either way."""

from __future__ import annotations

from typing import Any

import numpy as np

from topo.model.pairwise import new_stack
from topo.sim import acks, feedback, gedik, inbox, loop, stacking
from topo.sim import heap as events

# sources x workers x credits beyond which the Python loop runs: the compiled loop keeps a slot per credit, and room
# in its event heap for a step that spends every credit of a source (the Python loop's deques grow as needed)
MAX_RING_CELLS = 1 << 20
FISH_KERNEL = -1  # `kernel_of`'s answer for FISH, which routes with its own compiled function, not a kernel


def kernel_of(sim: Any) -> int | None:
    """The number (`kernels.KERNELS`) of the compiled kernel every source of `sim` (a `simulator.Simulation`)
    routes with (`FISH_KERNEL` when every source runs FISH, `gedik.GEDIK_KERNEL` when every source runs Gedik's
    partitioning functions), or None when the run needs the Python loop: a grouping that learns from acks other
    than CG and FISH (`feedback.mode_of`), a controller other than Gedik's, or a change of the world scheduled."""
    from groupings.compiled.grouping import Grouping
    from groupings.compiled.kernels import KERNELS

    spec = sim.spec
    if sim._by_count or (sim.controller is None and sim.kernel.pending()):
        return None
    if sim.active != sim.pool.workers or len(sim.sources) * sim.pool.workers * spec.max_pending > MAX_RING_CELLS:
        return None
    mode = feedback.mode_of(sim)
    if mode is None:
        return None
    if sim.controller is not None:
        return gedik.GEDIK_KERNEL if mode == inbox.NONE and gedik.runs_compiled(sim) else None
    # the states are stacked one row per source: every field must have one shape across the sources
    routers = [feedback.routing(source.node.grouping, mode) for source in sim.sources]
    if mode != inbox.FISH and any(type(router) is not Grouping or router.takes_feedback for router in routers):
        return None  # (a grouping of the caller's own has no compiled kernel)
    if len({str(stacking.shapes(router._state)) for router in routers}) != 1:
        return None
    if mode == inbox.FISH:
        return FISH_KERNEL
    kernels = {router._strategy.kernel for router in routers}
    if mode == inbox.CG and len({source.node.grouping.total_virtual_workers for source in sim.sources}) != 1:
        return None
    if len(kernels) != 1 or (kernel := kernels.pop()) not in KERNELS:
        return None
    return KERNELS.index(kernel)


def run(sim: Any, kernel: int, report_every: int) -> None:
    """Run the simulation's events in compiled code: the same events, order and arithmetic as `Kernel.run` over
    the simulator's actions, leaving the sources, the pool and the batch rows as the Python loop leaves them."""
    spec, pool = sim.spec, sim.pool
    nodes = [source.node for source in sim.sources]
    S, W = len(nodes), pool.workers
    offsets = np.zeros(S + 1, np.int64)
    np.cumsum([len(node.keys) for node in nodes], out=offsets[1:])
    delayed = bool(sim.delay_s)
    src = (offsets, *_joined(sim.sources, offsets), np.empty(offsets[-1] if delayed else 0, np.int64))
    chan = tuple(np.stack([_attr(node, name) for node in nodes]) for name in CHANNELS)
    ring = (np.zeros((S, W, max(1, spec.max_pending)), np.int64), np.zeros((S, W), np.int64),
            np.zeros((S, W), np.int64))
    mode = feedback.mode_of(sim)
    learners = [feedback.routing(node.grouping, mode) for node in nodes]
    # FISH and Gedik route with their own state (`fb`); kg's stands in for the compiled strategies' the loop takes
    own = mode == inbox.FISH or kernel == gedik.GEDIK_KERNEL
    states = [feedback.stand_in("kg")._state] if own else [grouping._state for grouping in learners]
    stack = stacking.stacked(states)
    si = np.zeros((S, 9), np.int64)
    sf = np.zeros((S, 7))
    sf[:, loop.PHASE] = [node.phase_s for node in nodes]
    sf[:, loop.CLOCK] = -np.inf
    sf[:, loop.WAKE_AT] = np.inf
    g = np.zeros(10, np.int64)
    g[loop.QUEUED] = pool.size
    margin = W * max(1, spec.max_pending) + 4
    cfg_i = np.array([S, W, sim.active, spec.batch_size, spec.max_pending,
                      -1 if spec.max_spout_pending is None else spec.max_spout_pending,
                      int(nodes[0].saturating), margin, mode], np.int64)
    cfg_f = np.array([spec.linger_ms / 1e3, np.nan if spec.duration is None else spec.duration, sim.delay_s])
    pools = pool.arrays
    rows = np.empty((max(1024, 2 * margin), 7))
    # the loop allocates nothing (`loop.run_events`): room for one routing call and one source's cut
    batch = spec.batch_size
    scratch = (np.empty(batch, np.int32), np.empty(batch), np.empty(2 * W, np.int64), np.empty(2 * W, np.int64),
               np.empty(2 * W * batch, np.int64), new_stack())
    heap = events.new_heap(2 * margin + 4 * S)  # it grows (between events) as buffers in flight need
    # (margin: room for every credit of a source's channels)
    controlled = kernel == gedik.GEDIK_KERNEL
    fb = (*feedback.pack(sim, nodes, margin, mode),
          gedik.pack([node.grouping for node in nodes], batch) if controlled else gedik.stand_in())
    g[loop.DELIVERIES] = getattr(sim.delegation, "deliveries", 0)
    if controlled:  # the controller's first period, scheduled before the sources' first steps, moves in
        at, _, g[loop.ORDER], _, _ = sim.kernel._queue.pop()
        loop.control_at(heap, g, at)
    loop.start(heap, g, src, chan, si, sf, cfg_i, cfg_f)
    now = 0.0
    while events.size(heap) or g[loop.RESUME]:
        if events.room(heap) < margin:
            heap = events.grown(heap)
        if len(rows) - g[loop.ROWS] < margin:
            rows.resize((2 * len(rows), 7), refcheck=False)  # in place (realloc): nothing else holds it yet
        if mode and acks.full(fb[0], g[loop.MARKS]):
            fb = (acks.grown(fb[0]), *fb[1:])
        queued = pool.size
        now = loop.run_events(kernel, stack, heap, g, now, src, chan, ring, si, sf,
                              cfg_i, cfg_f, pools, rows, scratch, fb, queued + report_every)
        pool.size = int(g[loop.QUEUED])
        sim.written()
        if g[loop.ERROR]:
            _raise(int(g[loop.ERROR]), int(g[loop.ERROR_AT]), W)
        if g[loop.CONTROL]:  # `Simulation._control`, on the loop's clock and heap
            g[loop.CONTROL] = 0
            sim.control_period(now)
            if not loop.exhausted(src, si, sf, cfg_i, cfg_f):
                loop.control_at(heap, g, now + sim.controller.period_s)
            fb = (*fb[:-1], (fb[-1][0], sim.controller.function().tables))
        if g[loop.RESUME]:  # a step stopped for Gedik's counters to grow
            fb = (*fb[:-1], gedik.pack([node.grouping for node in nodes], batch))
        if events.size(heap) and sim.progress is not None and pool.size >= queued + report_every:
            sim.progress(pool.size)
    sim.kernel.now = now
    sim.kernel.processed += int(g[loop.PROCESSED])
    rows.resize((g[loop.ROWS], 7), refcheck=False)  # the room left for more given back (nothing views it yet)
    sim.batches = rows
    feedback.unpack(sim, nodes, fb, mode, int(g[loop.DELIVERIES]))
    for s, (source, node) in enumerate(zip(sim.sources, nodes, strict=True)):
        for name, rows_of in zip(CHANNELS, chan, strict=True):
            _attr(node, name)[:] = rows_of[s]
        if not own:
            stacking.unstack(stack, states[s], s)
        _write_back(node, si[s], sf[s], *(part[s] for part in ring))
        source._token, source._wake_at = int(si[s, loop.TOKEN]), float(sf[s, loop.WAKE_AT])
        if controlled:
            node.grouping.messages = node.routed  # what `GedikGrouping.route` counts: every key it routed


# a source's channel arrays, as `loop` takes them: one row per source
CHANNELS = ("_buffers._head", "_buffers._tail", "_held", "_oldest", "in_flight", "max_in_flight", "_buffers.opened")


def _joined(sources: list, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """The sources' keys, arrivals and buffer links, each as one array (the loop's): the sources' own arrays
    become views of it, one array at a time, so nothing is held twice or copied back (one source's are its own)."""
    def join(parts: list[np.ndarray], rebind) -> np.ndarray:
        whole = parts[0] if len(parts) == 1 else np.concatenate(parts)
        for s, source in enumerate(sources):
            rebind(source, whole[offsets[s] : offsets[s + 1]])
        return whole

    def arrival(source, view):
        source.node.arrival = source.node._buffers.arrival = view  # a saturating source stamps it as it routes

    return (join([source.node.keys for source in sources], lambda source, view: setattr(source.node, "keys", view)),
            join([source.node.arrival for source in sources], arrival),
            join([source.node._buffers._after for source in sources],
                 lambda source, view: setattr(source.node._buffers, "_after", view)))


def _attr(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _write_back(node, si: np.ndarray, sf: np.ndarray, ring: np.ndarray, head: np.ndarray, length: np.ndarray) -> None:
    """The counters the compiled loop kept for a source, back on its `SourceNode`."""
    node.routed, node.pending = int(si[loop.ROUTED]), int(si[loop.PENDING])
    node.max_pending_tuples, node.batches = int(si[loop.MAX_PENDING]), int(si[loop.BATCHES])
    node.route_calls, node.acks, node.blocked = int(si[loop.ROUTE_CALLS]), int(si[loop.ACKS]), bool(si[loop.BLOCKED])
    node.blocked_s, node._blocked_at, node.clock = float(sf[loop.BLOCKED_S]), float(sf[loop.BLOCKED_AT]), float(
        sf[loop.CLOCK])
    node.lag_max_s, node.lag_sum_s = float(sf[loop.LAG_MAX]), float(sf[loop.LAG_SUM])
    for w in range(len(node._sizes)):
        r = ring.shape[1]
        node._sizes[w].extend(int(ring[w, (head[w] + k) % r]) for k in range(int(length[w])))


def _raise(error: int, at: int, workers: int) -> None:
    if error == loop.E_STREAM:
        raise RuntimeError("more tuples queued than the stream holds")
    raise ValueError(f"the grouping routed a tuple to worker {at}, outside [0, {workers})")
