"""Did the run measure the grouping, or the emulator? The headroom every run reports, on both engines.

A run is bounded by one of four things: nothing (it carried the offered rate), the topology (some worker was
saturated: the grouping's and the capacities' result, which is what the user came to measure), the engine (the
sources' own loop, Ray's calls, could not move the tuples while the workers had time to spare), or the host (in
cpu mode, workers got less CPU than their share, so they served below their configured capacity). Only the Ray
engine can be engine- or host-bound: the simulator moves tuples in no time and its workers serve at exactly their
capacity. The verdict goes into `summary.json` under "headroom" and onto the summary table in plain words; a run
bounded by the engine or the host also says which time scale (`--time-scale`) might give it headroom.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from topo.model.lateness import late_max_ms, late_p99_ms

DELIVERED = 0.98  # below this share of the requested rate, the run did not carry its input
SATURATED = 0.9  # a worker busy this much of the run had no time to spare
# ... unless the engine's own delays bound the run: credits and feedback that come back late bunch the buffers
# and steer an adaptive grouping with stale loads, which alone can push a worker past SATURATED; only a worker
# busy this much is then the topology's own limit
SATURATED_LATE = 0.97
SOURCE_BUSY = 0.9  # a source loop busy this much of the run had no time to spare, or a process's scheduler thread
# on the CPU this much of it (it steps the process's sources and serves its workers, and shares the GIL with them)
BLOCKED = 0.5  # with input always waiting, sources blocked this much of the run while no worker was saturated
# an engine's own delay (transit, acks left late, tuples routed late) bounds the run once its p99 is at least
# DELAY_MS and DELAY_SHARE of the run's p99 latency, or, in a run of a few milliseconds' latency, at least
# DELAY_MS_SHORT and DELAY_SHARE_SHORT of it (32 x 128 at 10% load: stalls and late acks of 12.6 ms, p99 19 ms
# against the model's 7 ms; 8 x 64 at 80%: 8-11 ms against 38 ms, where the engines agree)
DELAY_MS, DELAY_SHARE = 20.0, 0.25
DELAY_MS_SHORT, DELAY_SHARE_SHORT = 5.0, 0.5
SERVED = 0.9  # a worker that served below this share of its configured capacity did not get what it was promised
MARGIN = 1.25  # a suggested time scale leaves this much room over what the run lacked

NONE, TOPOLOGY, ENGINE, HOST = "none", "topology", "engine", "host"
EMULATOR = (ENGINE, HOST)  # verdicts under which a number is the emulator's, not the grouping's


def headroom(
    *,
    engine: str,
    rate: float | None,
    throughput: float | None,
    worker_busy: Sequence[float],
    sources: Sequence[dict],
    transit_p99_ms: float | None = None,
    ack_late_p99_ms: float | None = None,
    latency_p99_ms: float | None = None,
    stepping_busy_max: float | None = None,
    served_share: Sequence[float | None] = (),
    work: str | None = None,
    time_scale: float = 1.0,
) -> dict:
    """The headroom facts and verdict of a run.

    sources: each source node's `stats` (blocked_fraction, input lag, tuples routed late), plus `busy_fraction` of
    its loop on Ray;
    transit_p99_ms: on Ray, the p99 of buffers' time from send to queue beyond the emulated network delay;
    ack_late_p99_ms: on Ray in sleep mode, the p99 of how long after its batch's deadline an ack left (the worker
    served on time in the model; the emulator got to it late, and credits and feedback came back that much later);
    stepping_busy_max: on Ray in sleep mode, the largest share of the run a process's scheduler thread spent on the
    CPU (it steps the process's sources and serves its workers; a source's own loop share counts only its steps);
    served_share: on Ray, each worker's measured capacity over its configured one (None where it served nothing);
    work: the Ray workers' work mode ("sleep" or "cpu"); time_scale: the run's --time-scale K.
    """
    busiest = max(worker_busy, default=0.0)
    shares = [(w, s) for w, s in enumerate(served_share) if s is not None]
    slowest = min(shares, key=lambda ws: ws[1], default=None)
    delivered = throughput / rate if rate and throughput else None
    loop_busy = [s["busy_fraction"] for s in sources if s.get("busy_fraction") is not None]
    facts = {
        "requested_tps": rate,
        "delivered_tps": throughput,
        "delivered_share": delivered,
        "worker_busy_max": busiest,
        "worker_idle_mean": 1.0 - sum(worker_busy) / len(worker_busy) if worker_busy else None,
        "source_blocked_max": max((s["blocked_fraction"] for s in sources), default=0.0),
        "source_loop_busy_max": max(loop_busy) if loop_busy else None,
        "stepping_busy_max": stepping_busy_max,
        "input_lag_max_ms": max((s["input_lag_max_ms"] for s in sources), default=0.0),
        "route_late_p99_ms": late_p99_ms(sources),
        "route_late_max_ms": late_max_ms(sources),
        "transit_p99_ms": transit_p99_ms,
        "ack_late_p99_ms": ack_late_p99_ms,
        "served_share_min": None if slowest is None else slowest[1],
        "time_scale": time_scale,
    }
    short = delivered is not None and delivered < DELIVERED
    loop_bound = bool(loop_busy) and max(loop_busy) >= SOURCE_BUSY
    # the one thread of a process that steps its sources and serves its workers had no time to spare
    stepping_bound = stepping_busy_max is not None and stepping_busy_max >= SOURCE_BUSY
    # input always waiting, yet no worker saturated: credits came back only as fast as the engine moved acks
    ack_bound = rate is None and facts["source_blocked_max"] >= BLOCKED
    # the tuples' latency is mostly the engine moving buffers between processes, which the model does not have
    transit_bound = _delay_bound(transit_p99_ms, latency_p99_ms)
    # ... or the workers' acks left long after their batches were done, which delays credits and feedback
    late_bound = _delay_bound(ack_late_p99_ms, latency_p99_ms)
    # ... or the sources' loops stalled, and routed the tuples that arrived meanwhile that much later than the model
    stall_bound = _delay_bound(facts["route_late_p99_ms"], latency_p99_ms)
    delayed = transit_bound or late_bound or stall_bound
    saturated = busiest >= (SATURATED_LATE if engine != "sim" and delayed else SATURATED)
    # a cpu worker served below its capacity: its burns got less CPU than its share (in sleep mode a lightly loaded
    # worker's small batches each oversleep a little, which reads as a lower capacity without bounding anything)
    starved = engine != "sim" and work == "cpu" and slowest is not None and slowest[1] < SERVED
    if starved:
        verdict = HOST
        w, share = slowest
        why = (f"the host, not the grouping, was the bottleneck: worker {w} served at {share:.0%} of its configured "
               f"capacity (its CPU burns got less than their share of a core); lower --core-share or the load")
    elif engine != "sim" and not saturated and (short or loop_bound or stepping_bound or ack_bound or delayed):
        verdict = ENGINE
        if short:
            what = f"it delivered {delivered:.0%} of the requested {rate:,.0f} tuples/s"
        elif loop_bound:
            what = f"its sources spent {max(loop_busy):.0%} of the run moving tuples"
        elif stepping_bound:
            what = (f"the thread that steps a process's sources and serves its workers was on the CPU "
                    f"{stepping_busy_max:.0%} of the run")
        elif transit_bound:
            what = (f"moving buffers between its processes took up to {transit_p99_ms:.0f} ms (p99), against a p99 "
                    f"latency of {latency_p99_ms:.0f} ms")
        elif late_bound:
            what = (f"its workers' acks left up to {ack_late_p99_ms:.0f} ms (p99) after their batches were served, "
                    f"against a p99 latency of {latency_p99_ms:.0f} ms")
        elif stall_bound:
            what = (f"its sources' loops stalled and routed tuples up to {facts['route_late_p99_ms']:.0f} ms (p99; at "
                    f"worst {facts['route_late_max_ms']:.0f} ms) later than the model would have, against a p99 "
                    f"latency of {latency_p99_ms:.0f} ms")
        else:
            what = f"its sources waited for credits {facts['source_blocked_max']:.0%} of the run"
        why = (f"the {engine} engine, not the grouping, was the bottleneck: {what} while the busiest worker was busy "
               f"only {busiest:.0%}; latencies include the emulator's overhead")
    elif short:
        verdict = TOPOLOGY
        why = (f"the topology could not take the requested {rate:,.0f} tuples/s ({delivered:.0%} delivered): "
               f"its busiest worker was busy {busiest:.0%}")
    else:
        verdict = NONE
        why = "the run carried its input" + (f" ({delivered:.0%} of the requested rate)" if delivered else "")
    suggested = None
    if verdict in EMULATOR:
        lack = max([1.0 / delivered if short and delivered else 1.0,
                    max(loop_busy) / SOURCE_BUSY if loop_bound else 1.0,
                    stepping_busy_max / SOURCE_BUSY if stepping_bound else 1.0,
                    _delay_lack(transit_p99_ms, latency_p99_ms) if transit_bound else 1.0,
                    _delay_lack(ack_late_p99_ms, latency_p99_ms) if late_bound else 1.0,
                    _delay_lack(facts["route_late_p99_ms"], latency_p99_ms) if stall_bound else 1.0,
                    SERVED / slowest[1] if starved and slowest[1] > 0 else 1.0])
        suggested = suggest_time_scale(time_scale, lack)
        why += f"; --time-scale {suggested:g} might give it headroom"
    return {**facts, "bottleneck": verdict, "note": why, "suggested_time_scale": suggested}


def _delay_allowed(latency_p99_ms: float) -> float:
    """The largest p99 (ms) of an engine's own delay that bounds nothing in a run of this p99 latency."""
    return min(max(DELAY_MS, DELAY_SHARE * latency_p99_ms), max(DELAY_MS_SHORT, DELAY_SHARE_SHORT * latency_p99_ms))


def _delay_bound(p99_ms: float | None, latency_p99_ms: float | None) -> bool:
    """True if an engine's own delay (p99, ms) matters against the run's p99 latency (see DELAY_MS)."""
    return p99_ms is not None and latency_p99_ms is not None and p99_ms >= _delay_allowed(latency_p99_ms)


def _delay_lack(p99_ms: float, latency_p99_ms: float) -> float:
    """How many times too long an engine's delay was: the factor a time scale must at least divide it by."""
    return p99_ms / _delay_allowed(latency_p99_ms)


def suggest_time_scale(time_scale: float, lack: float) -> float:
    """The next power of two above `time_scale` x `lack` x MARGIN: the engine's and the host's work per emulated
    second falls about as 1/K, so K must grow at least by what the run lacked (a guess that a pilot confirms)."""
    need = max(time_scale * 2.0, time_scale * lack * MARGIN)
    return float(2 ** math.ceil(math.log2(need)))


def served_shares(per_worker: Sequence[dict]) -> list[float | None]:
    """Each worker's measured capacity over its configured one, None where nothing was measured."""
    return [w["measured_capacity"] / w["capacity"] if w.get("measured_capacity") and w["tuples"] and w["capacity"]
            else None for w in per_worker]


def attach(summary: dict, engine: str, rate: float | None, sources: Sequence[dict],
           transit_p99_ms: float | None = None, ack_late_p99_ms: float | None = None,
           stepping_busy_max: float | None = None, time_scale: float = 1.0) -> None:
    """Put the sources' stats and the run's headroom into its summary (`source_stats`, `headroom`)."""
    summary["source_stats"] = list(sources)
    summary["headroom"] = headroom(
        engine=engine, rate=rate, throughput=summary["throughput_tps"],
        worker_busy=[w["busy_fraction"] for w in summary["per_worker"]], sources=summary["source_stats"],
        transit_p99_ms=transit_p99_ms, ack_late_p99_ms=ack_late_p99_ms, latency_p99_ms=summary["latency_ms"]["p99"],
        stepping_busy_max=stepping_busy_max,
        served_share=served_shares(summary["per_worker"]), work=(summary.get("ray") or {}).get("work"),
        time_scale=time_scale,
    )
