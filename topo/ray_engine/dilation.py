"""Time dilation: the emulated cluster runs K times slower than the wall clock, so that one machine can carry it.

Time-warped network emulation (Gupta et al., NSDI 2006; DieCast, NSDI 2008) slows a guest's clock so that a host
can emulate a faster or larger system. Here the guest is the topology: at `time_scale` K every duration of the spec
is stretched by K before the actors see it (`stretch`: tuple cost, linger, network delay, periods, schedules, chaos
times, the input's timestamps and the grouping's own durations), and every time the actors report is divided by K
afterwards (`shrink`), so the summary, the logs and the plots read in the emulated cluster's time and rates.
The actors then do the same work per emulated tuple while the engine's own per-buffer cost (Ray calls, the sources'
loops) is spread over K times more wall time. What stays in wall time: the engine's own bookkeeping (`wall_clock_s`,
checkpoint write times) and CPU seconds (`emulators[].cpu_s`), which are the host's, not the cluster's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import groupings
from groupings.params import resolve
from topo.model import lateness
from topo.schedule import SECONDS
from topo.spec import TopologySpec

LOG_TIMES = ("arrival_s", "enqueue_s", "start_s", "finish_s")


def stretch(spec: TopologySpec) -> TopologySpec:
    """The spec the actors run at the spec's time scale K: every duration K times longer, every rate K times lower
    (it keeps K, which the actors read only to stretch the engine's own fixed windows)."""
    k = spec.time_scale
    if k == 1:
        return spec
    entry = groupings.registry.lookup(spec.grouping)
    values = resolve(entry.name, entry.params, spec.workers, spec.params)
    # a grouping's spans of time stretch too, defaults included
    params = {**spec.params, **{p.name: float(values[p.name]) * k for p in entry.params if p.duration}}

    def at(changes: tuple) -> tuple:
        return tuple(dataclasses.replace(c, at=c.at * k) if c.unit == SECONDS else c for c in changes)

    def times(value: float | None) -> float | None:
        return None if value is None else value * k

    return dataclasses.replace(
        spec, cost_ms=spec.cost_ms * k, rate=None if spec.rate is None else spec.rate / k,
        duration=times(spec.duration), linger_ms=spec.linger_ms * k, net_delay_ms=spec.net_delay_ms * k,
        migration_ms_per_key=spec.migration_ms_per_key * k, aggregate_every_s=times(spec.aggregate_every_s),
        checkpoint_every_s=times(spec.checkpoint_every_s), sample_interval_s=times(spec.sample_interval_s),
        capacity_schedule=at(spec.capacity_schedule), scale_schedule=at(spec.scale_schedule), params=params,
    )


def stretch_events(events: list[tuple], k: float) -> list[tuple]:
    """Chaos events (action, target, seconds) at k times their emulated time."""
    return [(action, target, at * k) for action, target, at in events]


def shrink(got: Any, k: float) -> Any:
    """What the actors reported (`outputs.Collected`, wall time) in the emulated cluster's time: every instant
    measured from the run's start and every span divided by k."""
    if k == 1:
        return got
    t0 = got.t0

    def instant(t: float) -> float:  # an absolute time.time() instant
        return t0 + (t - t0) / k

    log = dict(got.log)
    for name in LOG_TIMES:
        log[name] = t0 + (np.asarray(log[name], np.float64) - t0) / k
    aggregator = dict(got.aggregator)
    aggregator["registrations"] = [{**r, "at": instant(r["at"])} for r in aggregator["registrations"]]
    if aggregator.get("restored"):
        aggregator["restored"] = {**aggregator["restored"], "at": instant(aggregator["restored"]["at"])}
    return dataclasses.replace(
        got, log=log, aggregator=aggregator, sources=[_source(s, k) for s in got.sources],
        workers=[_worker(w, k) for w in got.workers],
        control=None if got.control is None else _control(got.control, k),
        chaos=[_scaled(e, k, "at_s", "done_s") for e in got.chaos],
        failures=[_scaled(f, k, "detected_s", "back_s") for f in got.failures],
        capacity_history=[(t / k, c) for t, c in got.capacity_history],
        active_history=[(t / k, n) for t, n in got.active_history],
        facts={**got.facts, "aggregate_every_s": _div(got.facts.get("aggregate_every_s"), k),
               "checkpoint_every_s": _div(got.facts.get("checkpoint_every_s"), k),
               "cgroup_quotas": [_scaled(q, k, "at_s") for q in got.facts.get("cgroup_quotas", [])]},
    )


def _div(value: float | None, k: float) -> float | None:
    return None if value is None else value / k


def _scaled(row: dict, k: float, *names: str) -> dict:
    """`row` with the spans (or run-relative instants) `names` divided by k, where present and not None."""
    return {**row, **{n: row[n] / k for n in names if row.get(n) is not None}}


def _source(report: dict, k: float) -> dict:
    batches = np.array(report["batches"], np.float64, copy=True)
    if batches.size:
        batches[:, 3:5] /= k  # sent and acked, seconds after the start
    node = _scaled(report["node"], k, "blocked_s", "input_lag_max_ms", "input_lag_mean_ms", "loop_s")
    node["late"] = lateness.scaled(node["late"], k)
    resumed = None if report.get("resumed") is None else _scaled(report["resumed"], k, "resume_s")
    return {**report, "batches": batches, "node": node, "resumed": resumed}


def _worker(report: dict, k: float) -> dict:
    return {**report, "transit_ms": _scaled(report["transit_ms"], k, "p50", "p99", "max"),
            "paused_s": report["paused_s"] / k,
            "emulator": {**_scaled(report["emulator"], k, "busy_s", "lost_s", "cost_ms"),
                         "late_ms": _scaled(report["emulator"]["late_ms"], k, "p50", "p99", "max")}}


def _control(report: dict, k: float) -> dict:
    migrations = dataclasses.replace(report["migrations"], pause_s=report["migrations"].pause_s / k,
                                     events=[_scaled(e, k, "at_s", "pause_s") for e in report["migrations"].events])
    return {**report, "migrations": migrations}


PILOT_S = 2.0  # emulated seconds of input one pilot runs at most (a saturating run: PILOT_TUPLES)
PILOT_WALL_S = 8.0  # ... and at most this many wall seconds at its K, so that a pilot at K = 64 takes 8 s, not 128
PILOT_TUPLES = 20_000
MIN_PILOT_TUPLES = 2_000
MAX_TIME_SCALE = 64.0  # auto gives up here: a topology that needs more is too large for the host


def pilot_stream(spec: TopologySpec, stream: Any, k: float = 1.0) -> Any:
    """The first emulated seconds of `stream` a pilot at time scale `k` runs: PILOT_S of them at the spec's rate,
    fewer at a large `k` (at most PILOT_WALL_S of wall time), never fewer than MIN_PILOT_TUPLES tuples; a saturating
    run takes PILOT_TUPLES."""
    seconds = min(PILOT_S, PILOT_WALL_S / k)
    want = PILOT_TUPLES if spec.rate is None else max(MIN_PILOT_TUPLES, int(spec.rate * seconds))
    return prefix(stream, want)


def prefix(stream: Any, n: int) -> Any:
    """The first `n` messages of `stream` (all of it if it has fewer)."""
    from topo.data.streams import StreamArrays

    n = min(stream.messages, n)
    ts, values = getattr(stream, "ts", None), getattr(stream, "values", None)
    return StreamArrays(stream.key_hash[:n], None if ts is None else ts[:n], None if values is None else values[:n],
                        dict(getattr(stream, "meta", {}) or {}))


def choose_time_scale(spec: TopologySpec, stream: Any, run: Any, say: Any = None) -> tuple[float, dict]:
    """`--time-scale auto`: the smallest K, from 1 up, at which a short pilot of the same run (its first
    PILOT_S emulated seconds, at most PILOT_WALL_S wall seconds, no chaos) is bounded by neither the engine nor the
    host; each try that is jumps to at least the K its verdict suggests. `run(spec, stream)` runs one pilot;
    `say(line)` reports each. Returns K and the record of the choice (every pilot's K, verdict, delivered share
    and tuples, and why)."""
    from topo.results.headroom import EMULATOR

    duration = None if spec.duration is None else min(spec.duration, PILOT_S)
    k, pilots = 1.0, []
    while True:
        sample = pilot_stream(spec, stream, k)
        room = run(spec.with_(time_scale=k, chaos=(), duration=duration), sample).summary["headroom"]
        pilots.append({"time_scale": k, "bottleneck": room["bottleneck"], "delivered_share": room["delivered_share"],
                       "tuples": sample.messages, "note": room["note"]})
        if say is not None:
            say(f"time scale {k:g}: {room['bottleneck']} ({room['note']})")
        if room["bottleneck"] not in EMULATOR:
            tried = ", ".join(f"{p['time_scale']:g}" for p in pilots[:-1])
            why = (f"the pilot at K = {k:g} had headroom" if len(pilots) == 1 else
                   f"pilots at K = {tried} were bounded by the engine or the host; the pilot at K = {k:g} had "
                   "headroom")
            return k, {"time_scale": k, "why": why, "pilots": pilots, "pilot_tuples": sample.messages}
        if k >= MAX_TIME_SCALE:
            why = (f"no pilot up to K = {MAX_TIME_SCALE:g} had headroom: the run goes at K = {k:g} and its verdict "
                   "says what bounded it")
            return k, {"time_scale": k, "why": why, "pilots": pilots, "pilot_tuples": sample.messages}
        k = min(MAX_TIME_SCALE, max(2.0 * k, room["suggested_time_scale"] or 0.0))
