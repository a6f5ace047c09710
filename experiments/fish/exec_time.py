"""FISH's execution time (paper 003, RQ1) through the queueing simulator, on the paper's ZF construction.

The paper measures load balance as the total execution time of a simulation, normalised to SG's, and gives no
formula. Here every worker serves a tuple in COST_MS, the input arrives at the rate all the workers together serve
(what SG sustains exactly), and each channel has as many credits as the compiled loop takes (`credits`: 16,384
buffers of 100 tuples per channel at 16 workers, 2,048 at 128), so that the workers' queues are in effect unbounded,
as in a simulation without backpressure. A run whose sources still waited for credit says so (`blocked_s` > 0):
there a queue was bounded, and the source held the rest back. The execution time is when the last tuple is served
(`duration_s`); a worker that a grouping overloads for a while finishes that much later. The mean time a tuple
spends from arrival to served is reported next to it.

The ZF stream (the note on paper 003): 50M tuples over 10^5 keys, Zipf z from 1.0 to 2.0, in 10 blocks of 5M whose
hot set changes after 80% of each block. The printed text is ambiguous, so two readings run: `blocks` (a fresh
ranking every block, moved again after 80% of it: the note's plausible reading) and `literal` (the two branches as
printed are the same law: one Zipf stream).
"""

from __future__ import annotations

from experiments.common import markdown_table, stream
from experiments.routing import DRIFT_SOURCES as SOURCES
from topo.sim import simulate
from topo.sim.compiled import MAX_RING_CELLS
from topo.spec import TopologySpec

COST_MS = 1.0
ZF_BLOCKS, ZF_HOT_AFTER = 10, 0.8
READINGS = ("blocks", "literal")


def zf_spec(z: float, messages: int, reading: str = "blocks") -> str:
    """The paper's ZF stream at skew z, under one reading of its construction, over 100k keys."""
    if reading == "blocks":
        return f"zf:z={z},keys=100000,messages={messages},block={messages // ZF_BLOCKS},hot_after={ZF_HOT_AFTER},seed=3"
    if reading == "literal":
        return f"zf:z={z},keys=100000,messages={messages},block={messages},hot_after=1,seed=3"
    raise ValueError(f"unknown reading {reading!r} (expected one of {', '.join(READINGS)})")


def credits(workers: int) -> int:
    """Buffers in flight per channel: the most the compiled loop takes for SOURCES sources over `workers`."""
    return MAX_RING_CELLS // (SOURCES * workers)


def exec_time(spec: str, scheme: str, workers: int, **params) -> dict:
    """One simulated run of `scheme` over n equal workers at the rate they serve together: its execution time (s),
    the mean time from arrival to served (ms), the seconds its sources were blocked (0: queues unbounded), and for
    D-Choices and W-Choices the head's d at the end (the most any source used)."""
    rate = workers * 1e3 / COST_MS
    run = TopologySpec(grouping=scheme, workers=workers, sources=SOURCES, cost_ms=COST_MS, rate=rate,
                       max_pending=credits(workers), stream=spec, params=params)
    s = simulate(run, stream(spec)).summary
    d = [g["d"] for g in s.get("grouping_stats") or () if isinstance(g, dict) and "d" in g]
    return {"exec_s": s["duration_s"], "mean_ms": s["latency_ms"]["mean"],
            "blocked_s": max(x["blocked_s"] for x in s["source_stats"]), "d_end": max(d) if d else None}


def exec_grid(m: int, zs: tuple, ns: tuple, variants: dict[str, tuple[str, dict]], readings: tuple = ("blocks",),
              label: str = "variant") -> list[dict]:
    """Every variant (name -> (scheme, params)) on ZF at each reading, z and worker count, each against SG's run
    on the same stream: execution time and mean time in the system over SG's, the execution time, the seconds
    its sources were blocked and D-C's or W-C's d at the end. `label` names the variant's column."""
    rows = []
    for reading in readings:
        for z in zs:
            spec = zf_spec(z, m, reading)
            for n in ns:
                base = exec_time(spec, "sg", n)
                for name, (scheme, params) in variants.items():
                    got = base if (scheme, params) == ("sg", {}) else exec_time(spec, scheme, n, **params)
                    rows.append({"reading": reading, "z": z, "workers": n, label: name,
                                 "exec_vs_sg": got["exec_s"] / base["exec_s"],
                                 "mean_vs_sg": got["mean_ms"] / base["mean_ms"],
                                 "exec_s": got["exec_s"], "blocked_s": got["blocked_s"], "d_end": got["d_end"]})
    return rows


def compare_on_zf(quick: bool, title: str, variants: dict[str, tuple[str, dict]], a: str, b: str) -> dict:
    """Variant `a` against `b` (and the other variants) in execution time on ZF, blocks reading, as the RQ2 and RQ3
    experiments run it: the rows, the largest factor of `a` over `b` in execution time and in mean time in the
    system with the cells they are at, and a markdown section headed `title`."""
    m = 1_000_000 if quick else 10_000_000
    zs = (2.0,) if quick else (1.0, 1.5, 2.0)
    ns = (16, 128) if quick else (16, 32, 64, 128)
    rows = exec_grid(m, zs, ns, variants)
    md = (f"\n## {title}: execution time through the simulator on ZF ({m:,} tuples in {ZF_BLOCKS} blocks, "
          f"{SOURCES} sources, input at the rate the workers serve together)\n\n"
          + markdown_table(rows) + "\n" + queues_note(rows))
    return {"rows": rows, "exec": worst_ratio(rows, a, b, "exec_vs_sg"), "mean": worst_ratio(rows, a, b, "mean_vs_sg"),
            "md": md, "zs": list(zs), "workers": list(ns), "messages": m}


def worst_ratio(rows: list[dict], a: str, b: str, col: str, label: str = "variant") -> tuple[float, dict]:
    """The largest ratio of variant `a`'s `col` to variant `b`'s over the grid's cells, and the cell it is at."""
    def key(r: dict) -> tuple:
        return r["reading"], r["z"], r["workers"]

    base = {key(r): r[col] for r in rows if r[label] == b}
    best = max((r[col] / base[key(r)], key(r)) for r in rows if r[label] == a)
    return best[0], dict(zip(("reading", "z", "workers"), best[1], strict=True))


def queues_note(rows: list[dict], label: str = "variant") -> str:
    """What the runs' queues were: a sentence for the experiments' tables, naming the runs whose sources waited
    for credit (their queues were bounded there)."""
    def where(r: dict) -> str:
        reading = "" if r["reading"] == "blocks" else f", {r['reading']}"
        return f"{r[label]} (z = {r['z']}, {r['workers']} workers{reading}: {r['blocked_s']:.3g} s)"

    ns = [r["workers"] for r in rows]
    lo, hi = min(ns), max(ns)
    head = f"Credits per channel: {credits(lo):,} buffers at {lo} workers, {credits(hi):,} at {hi}. "
    held = [where(r) for r in rows if r["blocked_s"] > 0]
    if not held:
        return head + "No source waited for credit in any run: every queue was unbounded in effect.\n"
    return head + (f"Sources waited for credit (there the queue was bounded: `blocked_s`) in {len(held)} of "
                   f"{len(rows)} runs: " + "; ".join(held) + ".\n")
