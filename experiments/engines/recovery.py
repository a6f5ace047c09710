"""ray-recovery and ray-overload: what recovery from a killed actor costs on real Ray actors.

`ray-recovery` is the chaos matrix: each kind of actor (a worker process, a source, the aggregator, gedik's
controller) killed for real (SIGKILL) early, in the middle and late in a run, under kg, pkg, cg and gedik. Every run
must end exact; each row keeps the killed actor's recovery time and the tuples its sources re-sent, by cause.
`tests/test_chaos.py` asserts the same cells' recovery in detail.

`ray-overload` kills a worker process, a source and the aggregator while the input arrives at three times what the
workers serve: the backlog waits at the sources (credits), the run must still end exact, and the summary keeps each
actor's peak resident memory.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from experiments.common import against_paper, markdown_table, pyplot, stream, write_csv
from experiments.registry import register
from topo.spec import CLI_BATCH_SIZE, CLI_LINGER_MS, TopologySpec

# the chaos matrix: a run of about 4 s, at 4,000 tuples/s, 4 workers in 2 processes, 2 sources
STREAM = "zipf:z=1.0,keys=2000,messages=16000,seed=3"
RATE = 4000.0
TIMES = {"early": 0.5, "middle": 2.0, "late": 3.5}  # seconds into the run
KINDS = {"source": "kill-source:1", "worker": "kill-worker:2", "aggregator": "kill-aggregator",
         "controller": "kill-controller"}
GROUPINGS = ("kg", "pkg", "cg", "gedik")
QUICK_CELLS = (("cg", "worker", "middle"), ("cg", "source", "middle"), ("cg", "aggregator", "middle"))

# the overload run: 4 workers serving 1,000 tuples/s each, input at 12,000 tuples/s; kills at these shares of it
OVERLOAD = {"grouping": "pkg", "rate": 12000.0, "cost_ms": 1.0, "seconds": 300.0, "quick_seconds": 8.0}
OVERLOAD_KILLS = (("kill-worker:1", 140 / 300), ("kill-source:0", 150 / 300), ("kill-aggregator", 160 / 300))


def chaos_spec(grouping: str, **changes) -> TopologySpec:
    """One cell's topology: 4 workers of capacity 1 in 2 processes, 2 sources, 100-tuple buffers."""
    fields = {"workers": 4, "sources": 2, "capacities": (1.0,) * 4, "worker_processes": 2, "stream": STREAM,
              "rate": RATE, "seed": 1, "batch_size": 100, "linger_ms": 5.0, **changes}
    return TopologySpec(engine="ray", grouping=grouping, **fields)


def matrix_cells() -> list[tuple[str, str, str]]:
    """(grouping, kind, when) of every cell; only gedik has a controller to kill."""
    return [(g, k, w) for g in GROUPINGS for k in KINDS for w in TIMES if k != "controller" or g == "gedik"]


def kill_event(kind: str, when: str) -> str:
    """The cell's `--chaos` event."""
    return f"{KINDS[kind]}@{TIMES[when]}"


def killed_row(summary: dict) -> dict | None:
    """The recovery record of the actor the run's one kill hit (None: the kill came after its part was done)."""
    (kill,) = summary["ray"]["chaos"]
    if "skipped" in kill:
        return None
    rows = [f for f in summary["ray"]["recovery"]["failures"] if f["actor"] == kill["actor"]]
    return rows[0] if rows else None


def cell(grouping: str, kind: str, when: str) -> dict:
    """One run of the matrix: exact or not, the killed actor's recovery, the tuples re-sent by cause."""
    from topo.ray_engine import run_ray

    data = stream(STREAM)
    clock = time.perf_counter()
    summary = run_ray(chaos_spec(grouping), data, chaos=(kill_event(kind, when),)).summary
    wall = time.perf_counter() - clock
    recovery = summary["ray"]["recovery"]
    row = killed_row(summary)
    return {"grouping": grouping, "kind": kind, "when": when, "at_s": TIMES[when],
            "exact": bool(summary["exact"] and summary["tuples_processed"] == data.messages),
            "recovery_s": None if row is None else row["recovery_s"], "deaths": recovery["deaths"],
            "replayed": recovery["replayed_tuples"], **{f"replayed_{k}": v for k, v in recovery["replayed_by"].items()},
            "wall_s": wall}


def by_kind(rows: list[dict]) -> dict:
    """Per kind of actor: runs, exact runs, recovery seconds (min, mean, max) and the most tuples re-sent."""
    out = {}
    for kind in KINDS:
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        secs = [r["recovery_s"] for r in mine if r["recovery_s"] is not None]
        out[kind] = {"runs": len(mine), "exact": sum(r["exact"] for r in mine), "recovered": len(secs),
                     "recovery_min_s": min(secs, default=None),
                     "recovery_mean_s": statistics.fmean(secs) if secs else None,
                     "recovery_max_s": max(secs, default=None), "replayed_max": max(r["replayed"] for r in mine)}
    return out


@register(
    "ray-recovery",
    "engine: the chaos matrix (Flink-style checkpoints and replay; no paper measures recovery)",
    "every run ends exact, each input tuple processed once, whichever actor is killed and when",
    on_ray=True,
)
def ray_recovery(out: Path, quick: bool) -> dict:
    """Every cell of the chaos matrix (quick: cg with a worker, a source and the aggregator killed mid-run)."""
    rows = [cell(*c) for c in (QUICK_CELLS if quick else matrix_cells())]
    write_csv(out / "recovery.csv", rows)
    kinds = by_kind(rows)
    summary = [{"kind": k, **v} for k, v in kinds.items()]
    exact = sum(r["exact"] for r in rows)
    paper = [{"claim": "exactly-once state after any actor dies",
              "paper": "no paper measures it; Flink and Storm recover from checkpoints and replay",
              "ours": f"{exact} of {len(rows)} runs exact"}]
    note = (f"\nEach run: {STREAM.split(',messages')[0]}, {int(RATE * 4):,} tuples at {RATE:,.0f} tuples/s, 2 sources, "
            "4 workers in 2 processes, a checkpoint every second; one actor killed with SIGKILL at "
            f"{', '.join(f'{w} = {s:g} s' for w, s in TIMES.items())}. Recovery runs from the death until the actor "
            "answers again (a source: until it has fenced the workers and resumed). An empty recovery is a late kill "
            "that came after the actor's part was done.\n")
    (out / "recovery.md").write_text("## By kind of actor\n\n" + markdown_table(summary, digits=2)
                                     + "\n## Every run\n\n" + markdown_table(rows, digits=2)
                                     + against_paper(paper, note))
    plt = pyplot()
    fig, (ax_r, ax_t) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = list(kinds)
    for i, kind in enumerate(names):
        for j, when in enumerate(TIMES):
            mine = [r for r in rows if r["kind"] == kind and r["when"] == when]
            x = [i + (j - 1) * 0.15] * len(mine)
            ax_r.scatter(x, [r["recovery_s"] or 0.0 for r in mine], color=f"C{j}", label=when if i == 0 else None)
            ax_t.scatter(x, [max(r["replayed"], 1) for r in mine], color=f"C{j}")
    for ax, label in ((ax_r, "recovery (s)"), (ax_t, "tuples re-sent")):
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel(label)
    ax_t.set_yscale("log")
    ax_r.legend(title="killed")
    fig.suptitle(f"the chaos matrix on Ray: {exact} of {len(rows)} runs exact")
    fig.tight_layout()
    fig.savefig(out / "recovery.png", dpi=110)
    plt.close(fig)
    return {"runs": len(rows), "exact": exact, "by_kind": kinds, "cells": rows}


@register(
    "ray-overload",
    "engine: deaths under three times the load the workers serve (no paper measures it)",
    "the run ends exact after the backlog is served; the backlog waits at the sources, not in the workers' memory",
    on_ray=True,
)
def ray_overload(out: Path, quick: bool) -> dict:
    """The overload run (quick: 8 s of input instead of 300, the kills at the same shares of it)."""
    from topo.ray_engine import run_ray

    seconds = OVERLOAD["quick_seconds" if quick else "seconds"]
    messages = int(OVERLOAD["rate"] * seconds)
    spec = chaos_spec(OVERLOAD["grouping"], rate=OVERLOAD["rate"], cost_ms=OVERLOAD["cost_ms"],
                      stream=f"zipf:z=1.0,keys=100000,messages={messages},seed=3", batch_size=CLI_BATCH_SIZE,
                      linger_ms=CLI_LINGER_MS)
    events = tuple(f"{e}@{share * seconds:.1f}" for e, share in OVERLOAD_KILLS)
    clock = time.perf_counter()
    summary = run_ray(spec, stream(spec.stream), chaos=events).summary
    wall = time.perf_counter() - clock
    recovery = summary["ray"]["recovery"]
    failures = [{"actor": f["actor"], "died_s": round(f["died_s"], 1),
                 "recovery_s": f["recovery_s"] and round(f["recovery_s"], 2)} for f in recovery["failures"]]
    peaks = recovery["peak_rss_mb"]
    memory = ([{"actor": "aggregator", "peak_rss_mb": round(peaks["aggregator"])}]
              + [{"actor": f"source {i}", "peak_rss_mb": round(p)} for i, p in enumerate(peaks["sources"])]
              + [{"actor": f"workers {','.join(map(str, p['workers']))}", "peak_rss_mb": round(p["peak_rss_mb"])}
                 for p in recovery["processes"] if p["workers"] and not p["sources"]])
    numbers = {"messages": messages, "input_s": seconds, "rate": OVERLOAD["rate"],
               "served_tps": 1e3 / OVERLOAD["cost_ms"] * 4, "exact": bool(summary["exact"]),
               "tuples_processed": summary["tuples_processed"], "wall_s": wall,
               "replayed": recovery["replayed_tuples"], "replayed_by": recovery["replayed_by"],
               "failures": failures, "memory": memory}
    write_csv(out / "overload_deaths.csv", failures)
    write_csv(out / "overload_memory.csv", memory)
    paper = [{"claim": "exact after deaths under overload",
              "paper": "no paper measures it; Storm's max spout pending and Flink's credits hold the backlog upstream",
              "ours": f"exact: {numbers['exact']} after {wall:,.0f} s, {numbers['replayed']:,} tuples re-sent"}]
    note = (f"\n{OVERLOAD['grouping']}, 4 workers of capacity 1 at {OVERLOAD['cost_ms']:g} ms per tuple "
            f"({numbers['served_tps']:,.0f} tuples/s together), input at {OVERLOAD['rate']:,.0f} tuples/s for "
            f"{seconds:g} s ({messages:,} tuples), 2 sources, the workers in 2 processes; killed: "
            f"{', '.join(events)}. The backlog is served after the input ends.\n")
    (out / "overload.md").write_text("## Deaths\n\n" + markdown_table(failures, digits=4)
                                     + "\n## Peak resident memory\n\n" + markdown_table(memory)
                                     + against_paper(paper, note))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.barh([m["actor"] for m in memory], [m["peak_rss_mb"] for m in memory], color="tab:blue")
    ax.set_xlabel("peak resident memory (MiB)")
    ax.set_title(f"overload at {OVERLOAD['rate'] / numbers['served_tps']:.0f}x with three deaths: exact "
                 f"{numbers['exact']} after {wall:,.0f} s")
    fig.tight_layout()
    fig.savefig(out / "overload.png", dpi=110)
    plt.close(fig)
    return numbers
