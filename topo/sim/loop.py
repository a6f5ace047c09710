"""The simulator's event loop in compiled code, for runs whose every event is the model's own.

When no Python has to see an event (every source routes with a compiled strategy that takes no feedback, or
every source runs CG or FISH, whose learning from acks runs here too (`inbox`, `acks`); no controller, no
scheduled change of the world), a run is a fixed recursion over the model's state: sources step on flush ticks,
arrivals and acks; buffers queue at their workers (Lindley); acks return credits and what workers measured.
This module runs exactly the events `simulator.Simulation` runs, in the same (time, priority, order) sequence and
with the same arithmetic, on the same state: each source's `SourceNode` buffers, credits and input and its
grouping's `State` (gathered one row per source, and written back at the end by `topo.sim.compiled`), and the
`WorkerPool` log itself. The helpers it calls are the model's own compiled ones (`topo.model.buffers`,
`queueing._lindley`); what `SourceNode` does in Python is written here once more, line for line, and
`tests/test_sim_loop.py` holds the two to the same logs, batch tables and summaries. It returns to Python between
events only, to report progress or to give its event heap, batch rows or meters' marks more room.

`run_events` is compiled without numba's reference counting (`_nrt=False`), so it allocates nothing: it routes,
cuts and sums into scratch arrays it is given. With counting, every array that reached an inlined helper was
counted up and down again with an atomic instruction, which perf put at about 40% of the loop's time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

import groupings
from groupings.adaptive.fish_route import route_fish
from groupings.compiled.kernels import route_with
from groupings.jit import forget_caches_of_another_layout
from topo.model.buffers import _append, _cut_due_into, channel_state, last_tick, tick_after, tick_at_or_after
from topo.model.pairwise import pairwise_sum_with
from topo.sim import acks, gedik, inbox, stacking
from topo.sim import heap as events
from topo.sim.events import ACK, ARRIVE, DONE, SEND, WORLD
from topo.sim.queueing import _lindley

# the functions here hold compiled copies of the kernels and model helpers they call: cached with their modules' stamp
_here = Path(__file__).parent
forget_caches_of_another_layout(_here, also=(_here.parent / "model", Path(groupings.__file__).parent))

# event kinds (an event is (at, priority, order, kind, source, worker, x, y, z, t)); a controller's period ends
K_SEND, K_ARRIVE, K_DONE, K_ACK, K_CONTROL = 0, 1, 2, 3, 4
# per-source integer state (si[s, .]) and float state (sf[s, .])
ROUTED, PENDING, MAX_PENDING, BATCHES, ROUTE_CALLS, ACKS, BLOCKED, TOKEN, WIRED = range(9)
BLOCKED_S, BLOCKED_AT, CLOCK, LAG_MAX, LAG_SUM, WAKE_AT, PHASE = range(7)
# run-wide integers (g[.]): tuples queued, events processed, events scheduled, batch rows, error and its value,
# the most marks a worker's meter kept, signals the delegation delivered, a controller's period due in Python,
# and the source (+1) whose step stopped for Gedik's counters to grow, to go on with once they have
QUEUED, PROCESSED, ORDER, ROWS, ERROR, ERROR_AT, MARKS, DELIVERIES, CONTROL, RESUME = range(10)
# errors the Python side raises with the simulator's own messages
E_STREAM, E_WORKER, E_ROUTED = 1, 2, 3
# cfg_i: sources, pool, active, batch size, credits, spout pending (-1: none), saturating (0/1), the most
# events one event may push (a step's buffers and its next wake-up), and which grouping learns from acks
# (`inbox`: NONE, CG or FISH; then the workers' meters, and CG's delegation, run here too)
# cfg_f: linger (s), end (s; NaN: none), delay (s)
# scratch = (chosen, lag, workers, sizes, positions, the lag sum's stack): room for one routing call (batch size)
# and one cut of every due buffer of a source (a channel holds fewer than two batches, so at most two buffers and
# 2 x batch tuples each)
# Per source: `src` = (offsets, keys, arrival, after, wire) holds every source's input arrays one after
# another (source s's at offsets[s]:offsets[s + 1]); `chan` = (head, tail, held, oldest, in_flight, max_in_flight)
# one row per source; `stack` = the sources' grouping states, each field one row per source.
# `fb` = (meters, inbox fields, inbox (worker, signal), inbox (count, signals), pairing, sent, wire fields, wire
# signals, wire (first, count), one ack's fields, fish): when a grouping learns from acks, each worker's
# `acks.Meters`, each source's acks landed since its last step (`inbox`), and the acks on their way back when the
# network has a delay; for CG its map and pairing (`pairing`'s arrays) and tuples sent to each worker
# (`ConsistentGrouping._sent`); for FISH (fish = (its states stacked, time per tuple told, told or not, and room
# to average them)) its states, which it routes with instead of `stack`; for Gedik (`gedik.pack`) its counters
# and tables.


@njit(cache=True, inline="always")
def _part(a, offsets, s):
    return a[offsets[s] : offsets[s + 1]]


@njit(cache=True, inline="always")
def _exhausted(s, src, si, sf, cfg_i, cfg_f):
    offsets, arrival = src[0], src[2]
    routed = si[s, ROUTED]
    if routed >= offsets[s + 1] - offsets[s]:
        return True
    end = cfg_f[1]
    if np.isnan(end):
        return False
    if cfg_i[6]:
        return sf[s, CLOCK] >= end
    return arrival[offsets[s] + routed] > end or sf[s, CLOCK] > end


@njit(cache=True, inline="always")
def _push(heap, g, at, priority, kind, s, w, x, y, z, t):
    events.push(heap, at, priority, g[ORDER], kind, s, w, x, y, z, t)
    g[ORDER] += 1


@njit(cache=True, inline="always")
def _next_wakeup(s, now, src, chan, si, sf, cfg_i, cfg_f):
    """`SourceNode.next_wakeup`; NaN for None."""
    batch, credits, linger, end = cfg_i[3], cfg_i[4], cfg_f[0], cfg_f[1]
    _, _, sendable, _, most = channel_state(chan[2][s], chan[4][s], credits, batch, chan[6][s])
    t = np.inf
    some = False
    if sendable:
        t = min(t, tick_after(now, linger, sf[s, PHASE]))
        some = True
    if not _exhausted(s, src, si, sf, cfg_i, cfg_f) and not si[s, BLOCKED] and not cfg_i[6]:
        arrival = _part(src[2], src[0], s)
        routed = si[s, ROUTED]
        first = arrival[routed]
        t = min(t, max(first, tick_at_or_after(first, linger, sf[s, PHASE])))
        last = min(routed + batch - most, arrival.size) - 1
        t = min(t, arrival[max(last, routed)])
        if not np.isnan(end):
            t = min(t, end)
        some = True
    if not some:
        return np.nan
    return max(now, t)


@njit(cache=True, inline="always")
def _plan(s, at, now, heap, g, src, chan, si, sf, cfg_i, cfg_f):
    """`SimSource.plan`: at NaN means when the node next has something to do."""
    if np.isnan(at):
        at = _next_wakeup(s, now, src, chan, si, sf, cfg_i, cfg_f)
        if np.isnan(at):
            return
    if sf[s, WAKE_AT] <= at and sf[s, WAKE_AT] >= now:
        return
    si[s, TOKEN] += 1
    sf[s, WAKE_AT] = at
    _push(heap, g, at, SEND, K_SEND, s, 0, si[s, TOKEN], 0, 0, 0.0)


@njit(cache=True, inline="always")
def _arrive(s, w, index, batch_id, sent, now, heap, g, src, pool, rows, fb, signals):
    """`Simulation._arrive`: queue the buffer (its tuples' finish times known at once), log it, schedule its end."""
    service, free_at, log, fifo, who = pool
    first, size = g[QUEUED], index.size
    if first + size > log[0].size:
        g[ERROR] = E_STREAM
        return
    done = _lindley(w, index, first, now, service, free_at, log, fifo,
                    (s, src[0].size - 1, _part(src[2], src[0], s), who[0], who[1], who[2]))
    g[QUEUED] += size
    if signals:
        g[MARKS] = max(g[MARKS], acks.arrive(fb[0], w, now, size))
    n = g[ROWS]  # (run_events stops while rows has less room than one event may fill)
    rows[n, 0], rows[n, 1], rows[n, 2], rows[n, 3] = s, w, batch_id, first
    rows[n, 4], rows[n, 5], rows[n, 6] = size, sent, done
    g[ROWS] = n + 1
    _push(heap, g, done, DONE, K_DONE, s, w, first, size, 0, 0.0)


@njit(cache=True, inline="always")
def _send_due(s, now, full_only, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, pool, rows, scratch, fb):
    """`SourceNode._send_due`, each buffer put on the wire as `SimSource._wake` and `Simulation.transmit` do."""
    batch, credits, linger, delay = cfg_i[3], cfg_i[4], cfg_f[0], cfg_f[2]
    head, tail, held, oldest, in_flight, max_in_flight, opened = chan
    exhausted = _exhausted(s, src, si, sf, cfg_i, cfg_f)
    workers, sizes, positions = scratch[2], scratch[3], scratch[4]
    tick = last_tick(now, linger, sf[s, PHASE])
    cut, _ = _cut_due_into(tick, full_only, exhausted, batch, credits, _part(src[2], src[0], s),
                           _part(src[3], src[0], s), head[s], tail[s], held[s], oldest[s], opened[s], in_flight[s],
                           max_in_flight[s], workers, sizes, positions)
    sizes_in_flight, first_in_flight, count_in_flight = ring
    wire = _part(src[4], src[0], s)
    start = 0
    for i in range(cut):
        w, size = workers[i], sizes[i]
        r = sizes_in_flight.shape[2]
        sizes_in_flight[s, w, (first_in_flight[s, w] + count_in_flight[s, w]) % r] = size
        count_in_flight[s, w] += 1
        batch_id = si[s, BATCHES]
        si[s, BATCHES] += 1
        index = positions[start : start + size]
        if delay:
            at = si[s, WIRED]
            for k in range(size):
                wire[at + k] = index[k]
            si[s, WIRED] = at + size
            _push(heap, g, now + delay, ARRIVE, K_ARRIVE, s, w, at, size, batch_id, now)
        else:
            _arrive(s, w, index, batch_id, now, now, heap, g, src, pool, rows, fb, cfg_i[8])
            if g[ERROR]:
                return
        start += size


@njit(cache=True, inline="always")
def _route(kernel, stack, s, take, now, src, chan, si, sf, g, cfg_i, scratch, fb):
    """`SourceNode._route`: route `take` more input tuples into the output buffers."""
    keys, arrival = _part(src[1], src[0], s), _part(src[2], src[0], s)
    begin = si[s, ROUTED]
    stop = begin + take
    if cfg_i[6]:
        for i in range(begin, stop):
            arrival[i] = now
    else:
        lag = scratch[1][:take]  # a source that falls behind its input shows here
        most = -np.inf
        for i in range(take):
            lag[i] = now - arrival[begin + i]
            most = max(most, lag[i])
        sf[s, LAG_MAX] = max(sf[s, LAG_MAX], most)
        sf[s, LAG_SUM] += pairwise_sum_with(lag, scratch[5])
    chosen = scratch[0][:take]
    if take and cfg_i[8] == inbox.FISH:
        route_fish(keys[begin:stop], chosen, stacking.fish_row(fb[10][0], s), now)
    elif take and kernel == gedik.GEDIK_KERNEL:
        if not gedik.route(keys[begin:stop], chosen, fb[11], s, cfg_i[3]):
            g[RESUME] = s + 1  # the step stops after this call for the counters to grow
    elif take:
        route_with(kernel, keys[begin:stop], chosen, stacking.state_row(stack, s))
        if cfg_i[8] == inbox.CG:  # PoRC chose a virtual worker: its owner in the source's map takes the tuple
            owner = fb[4][0]
            for i in range(take):
                chosen[i] = owner[s, chosen[i]]
    si[s, ROUTE_CALLS] += 1
    if take:
        low = high = chosen[0]
        for i in range(1, take):
            low, high = min(low, chosen[i]), max(high, chosen[i])
        if low < 0 or high >= cfg_i[1] or high >= cfg_i[2]:
            g[ERROR], g[ERROR_AT] = E_ROUTED, low if low < 0 else high
            return
        if cfg_i[8] == inbox.CG:
            sent = fb[5]
            for i in range(take):
                sent[s, chosen[i]] += 1
    si[s, ROUTED] = stop
    si[s, PENDING] += take
    si[s, MAX_PENDING] = max(si[s, MAX_PENDING], si[s, PENDING])
    head, tail, held, oldest, opened = chan[0], chan[1], chan[2], chan[3], chan[6]
    _append(chosen, begin, arrival, _part(src[3], src[0], s), head[s], tail[s], held[s], oldest[s], opened[s])


@njit(cache=True, inline="always")
def _block(s, now, si, sf):
    if not si[s, BLOCKED]:
        si[s, BLOCKED] = 1
        sf[s, BLOCKED_AT] = now


@njit(cache=True, inline="always")
def _step(kernel, stack, s, now, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, pool, rows, scratch, fb):
    """`SourceNode.step`, its buffers put on the wire as they are cut."""
    batch, credits, spout = cfg_i[3], cfg_i[4], cfg_i[5]
    sf[s, CLOCK] = max(sf[s, CLOCK], now)
    if cfg_i[8]:  # the acks since the last step reach the grouping
        inbox.take(cfg_i[8], fb, s)
    while True:
        _send_due(s, now, True, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, pool, rows, scratch, fb)
        if g[ERROR]:
            return
        if channel_state(chan[2][s], chan[4][s], credits, batch, chan[6][s])[3]:
            _block(s, now, si, sf)
            break
        if si[s, BLOCKED]:
            si[s, BLOCKED] = 0
            sf[s, BLOCKED_S] += now - sf[s, BLOCKED_AT]
        routed = si[s, ROUTED]
        if cfg_i[6]:
            available = routed if _exhausted(s, src, si, sf, cfg_i, cfg_f) else src[0][s + 1] - src[0][s]
        else:
            upto = now if np.isnan(cfg_f[1]) else min(now, cfg_f[1])
            available = max(routed, np.searchsorted(_part(src[2], src[0], s), upto, side="right"))
        take = min(available - routed, batch)
        if take > 0 and spout >= 0 and si[s, PENDING] >= spout:
            _block(s, now, si, sf)  # as many tuples pending as Storm's max spout pending allows
            break
        if take <= 0:
            break
        if spout >= 0:
            take = min(take, spout - si[s, PENDING])
        _route(kernel, stack, s, take, now, src, chan, si, sf, g, cfg_i, scratch, fb)
        if g[ERROR] or g[RESUME]:
            return  # (after RESUME the step goes on from its loop's top once the counters have room: `run_events`)
    _send_due(s, now, False, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, pool, rows, scratch, fb)


@njit(cache=True, inline="always")
def _land(s, w, now, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, fb, signal):
    """`SimSource.land` and `SourceNode.on_ack`: a credit back, the ack's fields (`fb[9]`, with signals on) into
    the source's inbox; step now if it lets a buffer out."""
    batch, credits = cfg_i[3], cfg_i[4]
    held, oldest, in_flight = chan[2], chan[3], chan[4]  # indexed [s, w]: no row views, no reference counts
    sizes_in_flight, first_in_flight, count_in_flight = ring
    in_flight[s, w] -= 1
    si[s, ACKS] += 1
    size = 0
    if count_in_flight[s, w]:
        size = sizes_in_flight[s, w, first_in_flight[s, w]]
        first_in_flight[s, w] = (first_in_flight[s, w] + 1) % sizes_in_flight.shape[2]
        count_in_flight[s, w] -= 1
    si[s, PENDING] -= size
    if cfg_i[8]:
        inbox.to_inbox(fb[1], fb[2], fb[3], s, w, signal, size, fb[9])
    exhausted = _exhausted(s, src, si, sf, cfg_i, cfg_f)
    due = held[s, w] >= batch or oldest[s, w] <= last_tick(now, cfg_f[0], sf[s, PHASE]) or exhausted
    waiting = held[s, w] > 0 and in_flight[s, w] == credits - 1 and due
    # done (nothing held or in flight once the input is exhausted) is asked last: it looks at every channel
    if si[s, BLOCKED] or waiting or (exhausted and not channel_state(held[s], in_flight[s], credits, batch,
                                                                     chan[6][s])[0]):
        _plan(s, now, now, heap, g, src, chan, si, sf, cfg_i, cfg_f)


@njit(cache=True)
def exhausted(src, si, sf, cfg_i, cfg_f):
    """Whether every source's input is exhausted (`SourceNode.exhausted`)."""
    for s in range(cfg_i[0]):
        if not _exhausted(s, src, si, sf, cfg_i, cfg_f):
            return False
    return True


@njit(cache=True)
def control_at(heap, g, at):
    """The controller's next period ends at `at` (`Simulation._control` schedules it so)."""
    _push(heap, g, at, WORLD, K_CONTROL, 0, 0, 0, 0, 0, 0.0)


@njit(cache=True)
def start(heap, g, src, chan, si, sf, cfg_i, cfg_f):
    """Every source plans its first step at 0, as `Simulation.run` does."""
    for s in range(cfg_i[0]):
        _plan(s, 0.0, 0.0, heap, g, src, chan, si, sf, cfg_i, cfg_f)


# no reference counting (nothing here allocates, and every array outlives the call); the GIL released for the
# thread that reads the log as it is written (`topo.sim.feed`)
@njit(cache=True, _nrt=False, nogil=True)
def run_events(kernel, stack, heap, g, now, src, chan, ring, si, sf, cfg_i, cfg_f, pool, rows, scratch, fb,
               report_at):
    """Run events until none is left, until a controller's period ends (`CONTROL`), until Gedik's counters may
    not have room for the next routing call (the step stops there: `RESUME`), or until (after an event)
    `report_at` tuples are queued or the heap, the batch rows or the meters' marks may not have room for the next
    one: the time of the last event."""
    delay, margin, signals = cfg_f[2], cfg_i[7], cfg_i[8]
    marks_room = fb[0][1][4] - fb[0][1][5]  # (`acks.full`)
    if g[RESUME]:  # a step stopped for Gedik's counters to grow goes on (its loop's top repeats nothing done)
        s = g[RESUME] - 1
        g[RESUME] = 0
        _step(kernel, stack, s, now, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, pool, rows, scratch, fb)
        if g[ERROR] or g[RESUME]:
            return now
        _plan(s, np.nan, now, heap, g, src, chan, si, sf, cfg_i, cfg_f)
    # room for every push, and every batch row, one event can make
    while events.size(heap) and events.room(heap) >= margin and rows.shape[0] - g[ROWS] >= margin and (
            g[MARKS] <= marks_room or not signals):
        at, kind, s, w, x, y, z, t = events.pop(heap)
        now = at
        g[PROCESSED] += 1
        if kind == K_SEND:
            if x != si[s, TOKEN]:
                continue  # replaced by an earlier wake-up
            sf[s, WAKE_AT] = np.inf
            _step(kernel, stack, s, now, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, pool, rows, scratch, fb)
            if g[ERROR] or g[RESUME]:
                return now
            _plan(s, np.nan, now, heap, g, src, chan, si, sf, cfg_i, cfg_f)
        elif kind == K_ARRIVE:
            _arrive(s, w, _part(src[4], src[0], s)[x : x + y], z, t, now, heap, g, src, pool, rows, fb, signals)
            if g[ERROR]:
                return now
        elif kind == K_DONE:
            signal = 0
            if signals:  # `Simulation._served`: the worker's meter sees the buffer served; its ack's fields
                m = fb[0]
                busy = m[3][w] + (now - pool[2][2][x])  # a buffer's tuples are served back to back
                g[MARKS] = max(g[MARKS], acks.serve(m, w, now, y, busy))
                signal, delivered = acks.ack(m, w, s, now, cfg_i[2], pool[0][w], fb[9])
                g[DELIVERIES] += delivered
            if delay:
                if signals:
                    acks.send_back(fb[6], fb[7], fb[8], s, signal, fb[9])
                _push(heap, g, now + delay, ACK, K_ACK, s, w, 0, 0, 0, 0.0)
            else:
                _land(s, w, now, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, fb, signal)
        elif kind == K_ACK:
            signal = acks.land(fb[6], fb[7], fb[8], s, fb[9]) if signals else 0
            _land(s, w, now, heap, g, src, chan, ring, si, sf, cfg_i, cfg_f, fb, signal)
        else:
            g[CONTROL] = 1
            break
        if g[QUEUED] >= report_at:
            break
    return now
