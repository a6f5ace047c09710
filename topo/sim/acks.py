"""What an ack carries, in compiled code: the workers' `AckMeter`s and Consistent Grouping's `WorkerDelegation`, for
the compiled event loop (`topo.sim.loop`) of runs whose grouping learns from acks there (CG, FISH: `inbox`), and
the acks on their way back when the network has a delay (`send_back`, `land`).

The Python classes (`topo.model.worker.AckMeter`, `WindowMeter`; `groupings.delegation.WorkerDelegation`) stay the
model: this module runs the same arithmetic in the same order on their state, laid out as arrays, and
`tests/test_sim_loop.py` holds the two to the same runs. `pack` reads the objects' state into `Meters`, `unpack`
writes it back, so that the outputs are built from the same objects either way.

`Meters` (one tuple, as the loop takes it):
    cfg_f  = (window_s, t0, idle, busy)
    cfg_i  = (min_marks, queue_capacity, measure, delegated workers (-1: no delegation), marks capacity, and the
              most marks one event may add to a worker: a step may send it a buffer per credit, or one ends)
    count  = per worker (accepted, served, oldest mark, marks kept)
    busy   = per worker, busy seconds so far
    marks  = per worker, a ring of (t, busy) marks and one of (arrived, served) marks
    said   = per worker, (increase, decrease) signals its acks carried
    turn   = per worker, when it may decide again; decision = its current decision; decided = (idle, busy) decisions
    heard  = per worker and source, 1 once the source got the current decision
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from groupings.delegation import MEASURES

MEASURE_CODES = {name: code for code, name in enumerate(MEASURES)}  # busy, offered, queue
CLOCK_SLACK = 1e-9  # `groupings.delegation._CLOCK_SLACK`


class Meters(NamedTuple):
    cfg_f: np.ndarray
    cfg_i: np.ndarray
    count: np.ndarray
    busy: np.ndarray
    mark_f: np.ndarray
    mark_i: np.ndarray
    said: np.ndarray
    turn: np.ndarray
    decision: np.ndarray
    decided: np.ndarray
    heard: np.ndarray


def pack(meters: list, busy_s: np.ndarray, delegation: Any, sources: int, credits: int) -> Meters:
    """The state of the workers' `AckMeter`s (and the delegation they ask, or None) as `Meters`."""
    W = len(meters)
    first = meters[0]
    room = credits + 1
    capacity = max(16, 4 * room, max(len(m.meter._marks) for m in meters) * 2)
    cfg_f = np.array([first.meter.window_s, 0.0, 0.0, 0.0])
    cfg_i = np.array([first.meter.min_marks, first.queue_capacity, MEASURE_CODES.get(first.measure, 2), -1,
                      capacity, room], np.int64)
    count = np.zeros((W, 4), np.int64)
    mark_f = np.zeros((W, capacity, 2))
    mark_i = np.zeros((W, capacity, 2), np.int64)
    said = np.zeros((W, 2), np.int64)
    for w, m in enumerate(meters):
        count[w, 0], count[w, 1], count[w, 3] = m.accepted, m.served, len(m.meter._marks)
        for k, (t, arrived, busy, served) in enumerate(m.meter._marks):
            mark_f[w, k] = t, busy
            mark_i[w, k] = arrived, served
        said[w] = m.signals["increase"], m.signals["decrease"]
    turn, decision = np.full(W, -np.inf), np.zeros(W, np.int64)
    decided, heard = np.zeros((W, 2), np.int64), np.zeros((W, max(1, sources)), np.uint8)
    if delegation is not None:
        cfg_f[1:] = delegation.t0, delegation.idle, delegation.busy
        cfg_i[3] = delegation.workers
        n = delegation.workers
        turn[:n], decision[:n] = delegation._next_decision, delegation._pending
        decided[:n, 0], decided[:n, 1] = delegation._idle_decisions, delegation._busy_decisions
        for w, sources_heard in enumerate(delegation._heard):
            heard[w, list(sources_heard)] = 1
    return Meters(cfg_f, cfg_i, count, busy_s.copy(), mark_f, mark_i, said, turn, decision, decided, heard)


def full(m: Meters, marks: int) -> bool:
    """True when a worker holding `marks` marks may not have room for one more event's."""
    return marks > m.cfg_i[4] - m.cfg_i[5]


def _kept(m: Meters, w: int) -> np.ndarray:
    """Where worker w's marks are in its ring, oldest first."""
    return (m.count[w, 2] + np.arange(m.count[w, 3])) % m.cfg_i[4]


def grown(m: Meters) -> Meters:
    """The same meters with twice the room for marks."""
    capacity = int(m.cfg_i[4])
    mark_f, mark_i = np.zeros((len(m.count), 2 * capacity, 2)), np.zeros((len(m.count), 2 * capacity, 2), np.int64)
    for w in range(len(m.count)):
        order = _kept(m, w)
        mark_f[w, : len(order)], mark_i[w, : len(order)] = m.mark_f[w, order], m.mark_i[w, order]
    m.count[:, 2] = 0
    m.cfg_i[4] = 2 * capacity
    return m._replace(mark_f=mark_f, mark_i=mark_i)


def unpack(m: Meters, meters: list, busy_s: np.ndarray, delegation: Any, deliveries: int) -> None:
    """Write `m` back into the `AckMeter`s, the simulator's busy seconds and the delegation."""
    busy_s[:] = m.busy
    for w, meter in enumerate(meters):
        meter.accepted, meter.served, meter.busy_s = int(m.count[w, 0]), int(m.count[w, 1]), float(m.busy[w])
        order = _kept(m, w)
        meter.meter._marks = deque((float(m.mark_f[w, k, 0]), int(m.mark_i[w, k, 0]), float(m.mark_f[w, k, 1]),
                                    int(m.mark_i[w, k, 1])) for k in order.tolist())
        meter.signals = {"increase": int(m.said[w, 0]), "decrease": int(m.said[w, 1])}
    if delegation is not None:
        n = delegation.workers
        delegation._next_decision = m.turn[:n].tolist()
        delegation._pending = m.decision[:n].tolist()
        delegation._idle_decisions, delegation._busy_decisions = m.decided[:n, 0].tolist(), m.decided[:n, 1].tolist()
        delegation._heard = [set(np.flatnonzero(m.heard[w]).tolist()) for w in range(n)]
        delegation.deliveries = deliveries


@njit(cache=True, inline="always")
def _mark(m, w, now):
    """`WindowMeter.mark` with worker w's running totals; the marks it keeps after."""
    count, mark_f, mark_i = m[2], m[4], m[5]
    min_marks, capacity = m[1][0], m[1][4]
    at = (count[w, 2] + count[w, 3]) % capacity
    mark_f[w, at, 0], mark_f[w, at, 1] = now, m[3][w]
    mark_i[w, at, 0], mark_i[w, at, 1] = count[w, 0], count[w, 1]
    count[w, 3] += 1
    if count[w, 3] > min_marks:
        cut = now - m[0][0]
        while count[w, 3] > min_marks and mark_f[w, (count[w, 2] + 1) % capacity, 0] <= cut:
            count[w, 2] = (count[w, 2] + 1) % capacity
            count[w, 3] -= 1
    return count[w, 3]


@njit(cache=True, inline="always")
def arrive(m, w, now, tuples):
    """`AckMeter.arrive`: the marks worker w keeps now."""
    m[2][w, 0] += tuples
    return _mark(m, w, now)


@njit(cache=True, inline="always")
def serve(m, w, now, tuples, busy_s):
    """`AckMeter.serve`: the marks worker w keeps now."""
    m[2][w, 1] += tuples
    m[3][w] = busy_s
    return _mark(m, w, now)


@njit(cache=True, inline="always")
def _signal(m, w, source, now, utilization):
    """`WorkerDelegation.signal`: the signal worker w's ack to `source` carries, and 1 if it delivers one."""
    cfg_f, turn, decision, decided, heard = m[0], m[7], m[8], m[9], m[10]
    if w >= m[1][3]:
        return 0, 0
    t0 = cfg_f[1]
    if now >= turn[w] - CLOCK_SLACK * t0:
        verdict = 1 if utilization < cfg_f[2] else (-1 if utilization > cfg_f[3] else 0)
        decision[w] = verdict
        for k in range(heard.shape[1]):
            heard[w, k] = 0
        if verdict != 0:
            turn[w] = now + t0
            if verdict == 1:
                decided[w, 0] += 1
            else:
                decided[w, 1] += 1
    verdict = decision[w]
    if verdict == 0 or heard[w, source]:
        return 0, 0
    heard[w, source] = 1
    return verdict, 1


@njit(cache=True, inline="always")
def ack(m, w, source, now, active, service_s, out):
    """`AckMeter.ack` of worker w to `source` at `now`: (queue_len, load, utilization, service_ms) into `out`; the
    signal, and 1 if the delegation delivered one."""
    cfg_i, count, mark_f, mark_i = m[1], m[2], m[4], m[5]
    oldest = count[w, 2]
    span = now - mark_f[w, oldest, 0]
    arrived = count[w, 0] - mark_i[w, oldest, 0]
    busy = m[3][w] - mark_f[w, oldest, 1]
    served = count[w, 1] - mark_i[w, oldest, 1]
    utilization = min(1.0, max(0.0, busy / span)) if span > 0 else 0.0
    offered = arrived * service_s / span if span > 0 else 0.0
    queue_len = count[w, 0] - count[w, 1]
    service_ms = busy / served * 1e3 if served != 0 and busy > 0 else service_s * 1e3
    signal, delivered = 0, 0
    if cfg_i[3] >= 0 and w < active:
        measure = cfg_i[2]
        watched = utilization if measure == 0 else (offered if measure == 1 else queue_len / cfg_i[1])
        signal, delivered = _signal(m, w, source, now, watched)
        if signal > 0:
            m[6][w, 0] += 1
        elif signal < 0:
            m[6][w, 1] += 1
    out[0], out[1], out[2], out[3] = float(queue_len), min(1.0, queue_len / cfg_i[1]), utilization, service_ms
    return signal, delivered


@njit(cache=True, inline="always")
def send_back(wire_f, wire_i, wire_n, s, signal, fields):
    """An ack's fields and signal leave for source s over a network with a delay: they land in the order they
    left (`land`)."""
    at = (wire_n[s, 0] + wire_n[s, 1]) % wire_i.shape[1]
    for k in range(4):
        wire_f[s, at, k] = fields[k]
    wire_i[s, at] = signal
    wire_n[s, 1] += 1


@njit(cache=True, inline="always")
def land(wire_f, wire_i, wire_n, s, fields):
    """The oldest ack on its way to source s lands: its fields into `fields`; its signal."""
    at = wire_n[s, 0]
    for k in range(4):
        fields[k] = wire_f[s, at, k]
    wire_n[s, 0] = (at + 1) % wire_i.shape[1]
    wire_n[s, 1] -= 1
    return wire_i[s, at]
