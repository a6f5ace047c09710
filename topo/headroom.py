"""Did the run measure the grouping, or the emulator? The headroom every run reports, on both engines.

A run is bounded by one of three things: nothing (it carried the offered rate), the topology (some worker was
saturated: the grouping's and the capacities' result, which is what the user came to measure), or the engine
(the sources' own loop, Ray's calls, could not move the tuples while the workers had time to spare). Only the
Ray engine can be engine-bound: the simulator moves tuples in no time. The verdict goes into `summary.json`
under "headroom" and onto the summary table in plain words.
"""

from __future__ import annotations

from collections.abc import Sequence

DELIVERED = 0.98  # below this share of the requested rate, the run did not carry its input
SATURATED = 0.9  # a worker busy this much of the run had no time to spare
SOURCE_BUSY = 0.9  # a source loop busy this much of the run had no time to spare
BLOCKED = 0.5  # with input always waiting, sources blocked this much of the run while no worker was saturated
TRANSIT_MS = 20.0  # the engine's own transit (send to queue, beyond the emulated delay) that starts to matter
TRANSIT_SHARE = 0.25  # ... once its p99 is this share of the run's p99 latency

NONE, TOPOLOGY, ENGINE = "none", "topology", "engine"


def headroom(
    *,
    engine: str,
    rate: float | None,
    throughput: float | None,
    worker_busy: Sequence[float],
    sources: Sequence[dict],
    transit_p99_ms: float | None = None,
    latency_p99_ms: float | None = None,
) -> dict:
    """The headroom facts and verdict of a run.

    sources: each source node's `stats` (blocked_fraction, input lag), plus `busy_fraction` of its loop on Ray;
    transit_p99_ms: on Ray, the p99 of buffers' time from send to queue beyond the emulated network delay.
    """
    busiest = max(worker_busy, default=0.0)
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
        "input_lag_max_ms": max((s["input_lag_max_ms"] for s in sources), default=0.0),
        "transit_p99_ms": transit_p99_ms,
    }
    short = delivered is not None and delivered < DELIVERED
    saturated = busiest >= SATURATED
    loop_bound = bool(loop_busy) and max(loop_busy) >= SOURCE_BUSY
    # input always waiting, yet no worker saturated: credits came back only as fast as the engine moved acks
    ack_bound = rate is None and facts["source_blocked_max"] >= BLOCKED
    # the tuples' latency is mostly the engine moving buffers between processes, which the model does not have
    transit_bound = (transit_p99_ms is not None and latency_p99_ms is not None and transit_p99_ms >= TRANSIT_MS
                     and transit_p99_ms >= TRANSIT_SHARE * latency_p99_ms)
    if engine != "sim" and not saturated and (short or loop_bound or ack_bound or transit_bound):
        verdict = ENGINE
        if short:
            what = f"it delivered {delivered:.0%} of the requested {rate:,.0f} tuples/s"
        elif loop_bound:
            what = f"its sources spent {max(loop_busy):.0%} of the run moving tuples"
        elif transit_bound:
            what = (f"moving buffers between its processes took up to {transit_p99_ms:.0f} ms (p99), against a p99 "
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
    return {**facts, "bottleneck": verdict, "note": why}


def attach(summary: dict, engine: str, rate: float | None, sources: Sequence[dict],
           transit_p99_ms: float | None = None) -> None:
    """Put the sources' stats and the run's headroom into its summary (`source_stats`, `headroom`)."""
    summary["source_stats"] = list(sources)
    summary["headroom"] = headroom(
        engine=engine, rate=rate, throughput=summary["throughput_tps"],
        worker_busy=[w["busy_fraction"] for w in summary["per_worker"]], sources=summary["source_stats"],
        transit_p99_ms=transit_p99_ms, latency_p99_ms=summary["latency_ms"]["p99"],
    )
