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

NONE, TOPOLOGY, ENGINE = "none", "topology", "engine"


def headroom(
    *,
    engine: str,
    rate: float | None,
    throughput: float | None,
    worker_busy: Sequence[float],
    sources: Sequence[dict],
) -> dict:
    """The headroom facts and verdict of a run.

    sources: each source node's `stats` (blocked_fraction, input lag), plus `busy_fraction` of its loop on Ray.
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
    }
    short = delivered is not None and delivered < DELIVERED
    saturated = busiest >= SATURATED
    loop_bound = bool(loop_busy) and max(loop_busy) >= SOURCE_BUSY
    if engine != "sim" and not saturated and (short or loop_bound):
        verdict = ENGINE
        why = (f"the {engine} engine, not the grouping, was the bottleneck: "
               + (f"it delivered {delivered:.0%} of the requested {rate:,.0f} tuples/s" if short else
                  f"its sources spent {max(loop_busy):.0%} of the run moving tuples")
               + f" while the busiest worker was busy only {busiest:.0%}; latencies include the emulator's overhead")
    elif short:
        verdict = TOPOLOGY
        why = (f"the topology could not take the requested {rate:,.0f} tuples/s ({delivered:.0%} delivered): "
               f"its busiest worker was busy {busiest:.0%}")
    else:
        verdict = NONE
        why = "the run carried its input" + (f" ({delivered:.0%} of the requested rate)" if delivered else "")
    return {**facts, "bottleneck": verdict, "note": why}
