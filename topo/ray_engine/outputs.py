"""The outputs of a Ray run: the per-tuple log the aggregator collected, turned into the same summary, time
series and latency table as the simulator's (same keys), plus what only a real run knows (under "ray")."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

import operators
from topo.results.extras import batch_table, run_extras
from topo.results.metrics import RunResult, TupleLog
from topo.results.outcome import distinct_keys_per_worker, run_result
from topo.spec import TopologySpec


@dataclass
class Collected:
    """Everything the driver gathered from the actors once the run was over."""

    t0: float
    state: object  # the aggregator's merged operator state
    log: dict[str, np.ndarray]  # per tuple, absolute times
    aggregator: dict  # flush counters and worker registrations
    sources: list[dict]  # each source's report
    workers: list[dict]  # each worker's final report (its last incarnation)
    control: dict | None  # the controller actor's report, for strategies with one
    chaos: list[dict]
    failures: list[dict]  # every death the driver saw and how it recovered
    capacity_history: list[tuple[float, tuple[float, ...]]]
    active_history: list[tuple[float, int]]
    facts: dict = field(default_factory=dict)  # address, work mode, flush period, wall clock


def tuple_log(raw: dict[str, np.ndarray], t0: float) -> TupleLog:
    """The log in seq order, times relative to the start of the run."""
    order = np.argsort(raw["seq"], kind="stable")
    rel = {name: raw[name][order] - t0 for name in ("arrival_s", "enqueue_s", "start_s", "finish_s")}
    return TupleLog(seq=raw["seq"][order], source=raw["source"][order], worker=raw["worker"][order], **rel)


def emitted_seqs(sources: list[dict], count: int) -> np.ndarray:
    """The seq of every message the `count` sources emitted (source s emits s, s + count, ... in order; a restarted
    source lists the positions it and its predecessors emitted)."""
    parts = [s["index"] + count * (np.arange(s["emitted"], dtype=np.int64) if s.get("positions") is None
                                   else np.asarray(s["positions"], np.int64)) for s in sources]
    return np.sort(np.concatenate(parts)) if parts else np.empty(0, np.int64)


def batches_table(sources: list[dict]) -> pa.Table:
    """One row per buffer committed (`extras.batch_table`), with how many times it was sent (replays)."""
    rows = [s["batches"] for s in sources]
    data = np.concatenate(rows) if rows else np.empty((0, 6))
    source = np.concatenate([np.full(len(r), s["index"]) for r, s in zip(rows, sources, strict=True)] or [[]])
    return batch_table(source, data[:, 1], data[:, 0], data[:, 2], data[:, 3], data[:, 4],
                       sends=pa.array(data[:, 5].astype(np.int32)))


def _sum_counters(sources: list[dict]) -> dict:
    keys = [k for k, v in sources[0]["counters"].items() if isinstance(v, int)]
    out = {k: int(sum(s["counters"][k] for s in sources)) for k in keys}
    out["signals_received"] = {k: int(sum(s["counters"]["signals"][k] for s in sources))
                               for k in ("increase", "decrease")}
    return out


def _victims(kill: dict) -> set[str]:
    """The actors a chaos kill took: the one it named, and in Storm's process model every source of its process."""
    return {kill["actor"], *(f"source {i}" for i in kill.get("process_sources", ()))}


def _restarts(got: Collected) -> list[dict]:
    """Every worker process that came back: the workers that registered again under one new process id, when that
    process started and when the first of them registered (seconds into the run), oldest first."""
    seen: dict[int, int] = {}
    groups: dict[int, dict] = {}
    for r in sorted(got.aggregator["registrations"], key=lambda r: r["at"]):
        w, pid = r["worker"], r["pid"]
        if seen.setdefault(w, pid) != pid:
            seen[w] = pid
            group = groups.setdefault(pid, {"pid": pid, "workers": [], "back_s": r["at"] - got.t0,
                                            "started_s": (r.get("started") or r["at"]) - got.t0})
            group["workers"].append(w)
    return sorted(groups.values(), key=lambda g: g["back_s"])


def _worker_deaths(got: Collected, kills: list[dict]) -> list[dict]:
    """The deaths of worker processes: each chaos kill that took workers, back once the first of them registered
    again; and every other worker process that came back (killed from outside the run, or crashed), dated by
    when Ray started its replacement (the latest it can have died)."""
    restarts = _restarts(got)
    rows = []
    claimed: set[int] = set()  # restarts that a chaos kill explains
    for event in kills:
        if not event.get("process_workers"):
            continue
        # recovered by their sources: back once the next incarnation of a worker of the process registered (a
        # process killed again before its workers registered shares that comeback with the kill before)
        mine = next((g for g in restarts if set(g["workers"]) & set(event["process_workers"])
                     and g["back_s"] > event["done_s"]), None)
        if mine is not None:
            claimed.add(mine["pid"])
        # a source killed in Storm's process model takes its process's workers with it
        actor = (event["actor"] if event["action"] == "kill-worker" else
                 f"workers {','.join(map(str, event['process_workers']))} (process {event['process']})")
        rows.append({"actor": actor, "detected_s": event["done_s"], "back_s": None if mine is None else mine["back_s"],
                     "killed_s": event["done_s"]})
    for g in (g for g in restarts if g["pid"] not in claimed):
        workers = sorted(g["workers"])
        actor = f"worker {workers[0]}" if len(workers) == 1 else f"workers {','.join(map(str, workers))}"
        rows.append({"actor": f"{actor} (pid {g['pid']})", "detected_s": g["started_s"], "back_s": g["back_s"]})
    return rows


def recovery(got: Collected) -> dict:
    """Every failure and its recovery, the tuples replayed by cause, the checkpoints, and each actor's peak memory."""
    failures = [dict(f) for f in got.failures]
    kills = [e for e in got.chaos if "pid" in e]
    failures += _worker_deaths(got, kills)
    for f in failures:
        # a death the chaos caused dates from the kill; any other from when the driver saw it
        killed = [e["done_s"] for e in kills if f["actor"] in _victims(e) and e["done_s"] <= f["detected_s"] + 1e-3]
        if "killed_s" in f:
            killed.append(f.pop("killed_s"))
        f["died_s"] = max(killed) if killed else f["detected_s"]
        f["how"] = "killed by --chaos" if killed else "died"
    for report in got.sources:
        if report.get("resumed"):
            row = next((f for f in failures if f["actor"] == f"source {report['index']}"), None)
            if row is not None:
                row["resumed"] = report["resumed"]
                row["back_s"] += report["resumed"]["resume_s"]  # fenced, flushed and resumed: recovered
    for f in failures:
        f["recovery_s"] = None if f.get("back_s") is None else f["back_s"] - f["died_s"]
    by_cause = {k: int(sum(s["counters"]["replayed_by"][k] for s in got.sources))
                for k in ("worker", "source", "aggregator")}
    agg = got.aggregator
    return {
        "failures": sorted(failures, key=lambda f: f["died_s"]),
        "deaths": len(failures),
        "recovered": sum(1 for f in failures if f.get("recovery_s") is not None),
        "replayed_tuples": int(sum(by_cause.values())),
        "replayed_by": by_cause,
        "checkpoints": {"every_s": got.facts.get("checkpoint_every_s"), "parts": agg["checkpoints"],
                        "bytes": agg["checkpoint_bytes"], "seconds": agg["checkpoint_s"],
                        "aggregator_starts": agg["starts"], "restored": agg["restored"]},
        "processes": processes(got),
        "peak_rss_mb": {"aggregator": agg["peak_rss_mb"],
                        "controller": None if got.control is None else got.control["peak_rss_mb"],
                        "sources": [s["peak_rss_mb"] for s in got.sources],
                        "workers": [w["peak_rss_mb"] for w in got.workers]},
    }


def processes(got: Collected) -> list[dict]:
    """What each process of the run hosted at the end (its last incarnation): sources, workers, peak memory, and
    the node it ran on (None for a process of sources only)."""
    rows: dict[int, dict] = {}

    def row(pid: int, rss: float) -> dict:
        entry = rows.setdefault(pid, {"pid": pid, "node": None, "sources": [], "workers": [], "peak_rss_mb": 0.0})
        entry["peak_rss_mb"] = max(entry["peak_rss_mb"], rss)
        return entry

    for report in got.sources:
        entry = row(report["pid"], report["peak_rss_mb"])
        entry["sources"].append(report["index"])
        # how its sources' frames went: within the process, over the wire to a peer process, through Ray
        frames = entry.setdefault("frames", dict.fromkeys(report["counters"]["frames"], 0))
        for how, count in report["counters"]["frames"].items():
            frames[how] += count
    for w, report in enumerate(got.workers):
        entry = row(report["pid"], report["peak_rss_mb"])
        entry["workers"].append(w)
        entry["node"] = report["node"]  # where the process ran (its workers share it)
        entry["stepping_busy"] = report.get("stepping_busy")  # its scheduler thread's CPU share (sleep mode)
    return sorted(rows.values(), key=lambda r: (r["workers"][:1] or [-1], r["sources"][:1] or [-1]))


def _delegation(workers: list[dict]) -> dict:
    """The workers' delegations, each of which only ever decided for its own index, as one."""
    stats = [w["delegation"] for w in workers]
    return {
        "t0": stats[0]["t0"],
        "idle_decisions": [s["idle_decisions"][w] for w, s in enumerate(stats)],
        "busy_decisions": [s["busy_decisions"][w] for w, s in enumerate(stats)],
        "deliveries": int(sum(s["deliveries"] for s in stats)),
        "pending": [s["pending"][w] for w, s in enumerate(stats)],
    }


def build_result(spec: TopologySpec, stream, got: Collected) -> RunResult:
    """Summary, time series and per-tuple log of a finished Ray run."""
    n = spec.max_workers
    log = tuple_log(got.log, got.t0)
    key_hash = np.asarray(stream.key_hash, dtype=np.uint64)
    values = getattr(stream, "values", None)
    sent = emitted_seqs(got.sources, spec.sources)
    sent_values = None if values is None else np.asarray(values)[sent]
    # key copies from the routing, as in the simulator; exactness from the state the aggregator really merged
    distinct, keys_total = distinct_keys_per_worker([(key_hash[log.seq], log.worker, None)], n)
    op = operators.make(spec.operator, **spec.operator_params)
    exact = bool(op.equal(got.state, op.exact(key_hash[sent], sent_values)))
    totals = _sum_counters(got.sources)
    in_flight = [s["node"]["max_in_flight"] for s in got.sources]
    agg = got.aggregator
    flush_period = got.facts.get("aggregate_every_s")
    aggregation = None
    if spec.aggregate_every_s is not None:
        flushes = agg["flushes"]
        aggregation = {"period_s": spec.aggregate_every_s, "flushes": flushes, "keys_flushed": agg["keys_flushed"],
                       "keys_per_flush": agg["keys_flushed"] / flushes if flushes else 0.0}
    delegates = got.workers[0]["delegation"] is not None
    extra = run_extras(
        spec, stream, log, n, got.capacity_history, got.active_history,
        [s["grouping_stats"] for s in got.sources],
        migrations=None if got.control is None else got.control["migrations"],
        controller=None if got.control is None else got.control["controller"],
        signals={k: sum(w["signals"][k] for w in got.workers) for k in ("increase", "decrease")} if delegates else None,
        delegation=_delegation(got.workers) if delegates else None,
        aggregation=aggregation,
    )
    incarnations = [sum(1 for r in agg["registrations"] if r["worker"] == w) for w in range(n)]
    extra["ray"] = {
        **got.facts,
        **totals,
        "max_in_flight": max((max(m) for m in in_flight), default=0),
        "max_in_flight_per_pair": in_flight,  # [source][worker]: never above max_pending
        "acks_per_source": [s["counters"]["acks"] for s in got.sources],
        "sub_batches_per_source": [s["counters"]["sub_batches"] for s in got.sources],
        # signals the workers addressed to each source (this incarnation of each worker), and those it received
        "signals_sent_to_source": [int(v) for v in np.sum([w["signals_to"] for w in got.workers], axis=0)],
        "signals_received_per_source": [sum(s["counters"]["signals"].values()) for s in got.sources],
        "chaos": got.chaos,
        "recovery": recovery(got),
        "incarnations": incarnations,
        "flushes": {"merged": agg["flushes"], "stale": agg["stale"], "duplicate": agg["duplicate"],
                    "stale_source": agg["stale_source"],
                    "keys_flushed": agg["keys_flushed"], "period_s": flush_period},
        "controller_steps": None if got.control is None else got.control["steps"],
        "controller_pushes": None if got.control is None else got.control["pushes"],
        "emulators": [w["emulator"] for w in got.workers],
        # per worker: the largest partial state it held between two flushes (keys, bytes)
        "state_peak": [w["state_peak"] for w in got.workers],
    }

    def amend(summary: dict) -> dict:
        for row, report in zip(summary["per_worker"], got.workers, strict=True):
            row["measured_capacity"] = float(report["measured_capacity"]) if spec.cost_ms > 0 else None
            row["node"] = dict(report["node"])
            row["incarnations"] = incarnations[row["id"]]
        # the engine's own delays, worst worker first: a buffer's transit to its queue, and an ack's lateness past
        # its batch's deadline (sleep mode), neither of which the model has
        for name, spreads in (("transit_ms", [w["transit_ms"] for w in got.workers]),
                              ("ack_late_ms", [w["emulator"].get("late_ms") for w in got.workers])):
            spreads = [t for t in spreads if t and t["count"]]
            summary["ray"][name] = {q: max((t[q] for t in spreads), default=0.0) for q in ("p50", "p99", "max")}
        busy = [w["stepping_busy"] for w in got.workers if w.get("stepping_busy") is not None]
        return {"transit_p99_ms": summary["ray"]["transit_ms"]["p99"],
                "ack_late_p99_ms": summary["ray"]["ack_late_ms"]["p99"],
                "stepping_busy_max": max(busy, default=None)}

    return run_result(
        spec, "ray", log, n, got.capacity_history, tuples_in=int(sent.size), keys=(distinct, keys_total, exact),
        extra=extra, source_stats=lambda duration_s: [s["node"] for s in got.sources],
        batches=batches_table(got.sources), amend=amend,
    )
