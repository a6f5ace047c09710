"""Consistent Grouping (paper 001) parameter sweeps: eps (Fig. 5), sources (Fig. 10), virtual workers (Fig. 11).

The eps and sources sweeps measure where keys go, not queueing: on homogeneous workers that are not saturated
no worker is busy, so CG never moves a virtual worker and its routing is PoRC over alpha * n virtual workers
behind a fixed map. They route the whole stream through the groupings directly (as `scripts/table1.py` does),
which is exact for that setting and fast enough to sweep. The virtual-workers sweep needs CG's adaptation, so
it runs the simulator on the paper's heterogeneous setting (Fig. 8: 10 workers, 3 of them 5x faster).

Imbalance = (max - mean) / mean of per-worker message counts at the end of the stream; memory = replication,
distinct (key, worker) pairs / distinct keys (1 = key grouping, the optimum).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.common import markdown_table, pyplot, run, series, write_csv
from experiments.consistent_grouping.adaptation import offered_spread
from experiments.registry import register
from experiments.routing import imbalance, replication, route, wp_keys
from experiments.topologies import fast_slow_topology, latency_over_time

DIFFERENCE = (
    "Differences: a Zipf stream with the Wikipedia trace's p1 = 9.32% (z = 1.0224, 100k keys) stands in for WP "
    "(22M messages, 2.9M keys), so absolute memory differs; the direction is what carries over."
)


# --- Fig. 5: eps ---------------------------------------------------------------------------------------------

EPS_FULL = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
EPS_QUICK = (0.001, 0.01, 0.1, 1.0)


@register(
    "cg-eps",
    "Consistent Grouping (001), Fig. 5: eps sweep, 1 source, 10 homogeneous workers, 10 virtual workers each",
    "low eps gives low imbalance, high eps low memory; cg lies between kg (low memory) and sg (low imbalance)",
)
def eps_sweep(out: Path, quick: bool) -> dict:
    """Imbalance and memory of cg for each eps, with kg and sg as the two ends."""
    n = 10
    keys = wp_keys(100_000 if quick else 2_000_000)
    rows = []
    for eps in EPS_QUICK if quick else EPS_FULL:
        w = route("cg", keys, n, eps=eps, vw=10)
        rows.append({"grouping": "cg", "eps": eps, "imbalance": imbalance(w, n),
                     "replication": replication(keys, w, n)})
    for g in ("kg", "sg"):
        w = route(g, keys, n)
        rows.append({"grouping": g, "eps": float("nan"), "imbalance": imbalance(w, n),
                     "replication": replication(keys, w, n)})
    write_csv(out / "eps.csv", rows)
    cg = [r for r in rows if r["grouping"] == "cg"]
    ref = {r["grouping"]: r for r in rows if r["grouping"] != "cg"}
    plt = pyplot()
    fig, (ax_i, ax_m) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, col, label in ((ax_i, "imbalance", "normalized imbalance"), (ax_m, "replication", "memory (replication)")):
        ax.plot([r["eps"] for r in cg], [max(r[col], 1e-6) for r in cg], "o-", label="cg")
        for g, ls in (("kg", "--"), ("sg", ":")):
            ax.axhline(max(ref[g][col], 1e-6), color="gray", ls=ls, label=g)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("eps")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("eps sweep: 1 source, 10 workers x 10 virtual workers, WP-like Zipf stream")
    fig.tight_layout()
    fig.savefig(out / "eps.png", dpi=110)
    plt.close(fig)
    lo, hi = cg[0], cg[-1]
    (out / "eps.md").write_text(
        markdown_table(rows)
        + f"\nPaper (Fig. 5): imbalance low at low eps, memory low at high eps, cg between kg and sg; eps = 0.01 "
        f"chosen as the middle ground.\nOurs: eps {lo['eps']:g} -> imbalance {lo['imbalance']:.3g}, replication "
        f"{lo['replication']:.3g}; eps {hi['eps']:g} -> {hi['imbalance']:.3g}, {hi['replication']:.3g} "
        f"(kg {ref['kg']['imbalance']:.3g}, {ref['kg']['replication']:.3g}; sg {ref['sg']['imbalance']:.3g}, "
        f"{ref['sg']['replication']:.3g}).\n{DIFFERENCE}\n"
    )
    return {"cg": {str(r["eps"]): r for r in cg}, "kg": ref["kg"], "sg": ref["sg"]}


# --- Fig. 10: sources --------------------------------------------------------------------------------------


@register(
    "cg-sources",
    "Consistent Grouping (001), Fig. 10: 1 to 100 sources (shuffle grouping into them), 5 to 100 workers, eps 0.01",
    "cg's imbalance and memory stay about the same (on a log scale) as sources grow, for every number of workers",
)
def sources_sweep(out: Path, quick: bool) -> dict:
    """Imbalance and memory of cg for every (workers, sources) pair, with kg and sg per number of workers."""
    keys = wp_keys(100_000 if quick else 2_000_000)
    workers = (10, 50) if quick else (5, 10, 50, 100)
    sources = (1, 10, 100) if quick else (1, 10, 50, 100)
    rows = []
    for n in workers:
        for s in sources:
            w = route("cg", keys, n, sources=s, eps=0.01, vw=10)
            rows.append({"grouping": "cg", "workers": n, "sources": s, "imbalance": imbalance(w, n),
                         "replication": replication(keys, w, n)})
        for g in ("kg", "sg"):
            w = route(g, keys, n)
            rows.append({"grouping": g, "workers": n, "sources": 1, "imbalance": imbalance(w, n),
                         "replication": replication(keys, w, n)})
    write_csv(out / "sources.csv", rows)
    plt = pyplot()
    fig, (ax_i, ax_m) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(sources)
    for ax, col, label in ((ax_i, "imbalance", "normalized imbalance"), (ax_m, "replication", "memory (replication)")):
        for j, s in enumerate(sources):
            vals = [next(r[col] for r in rows if r["workers"] == n and r["sources"] == s and r["grouping"] == "cg")
                    for n in workers]
            ax.bar(np.arange(len(workers)) + (j - (len(sources) - 1) / 2) * width, vals, width, label=f"{s} sources")
        ax.set_xticks(np.arange(len(workers)), [str(n) for n in workers])
        ax.set_xlabel("workers")
        ax.set_ylabel(label)
        ax.set_yscale("log")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.suptitle("cg with 1..100 sources (eps 0.01, 10 virtual workers per worker), WP-like Zipf stream")
    fig.tight_layout()
    fig.savefig(out / "sources.png", dpi=110)
    plt.close(fig)
    cg = [r for r in rows if r["grouping"] == "cg"]
    growth = max(
        max(r["replication"] for r in cg if r["workers"] == n) / min(r["replication"] for r in cg if r["workers"] == n)
        for n in workers
    )
    (out / "sources.md").write_text(
        markdown_table(rows)
        + "\nPaper (Fig. 10): imbalance and memory almost unchanged on a log scale as sources (1, 10, 50, 100) and "
        "workers (5, 10, 50, 100) grow.\n"
        f"Ours: cg's imbalance is at most {max(r['imbalance'] for r in cg):.3g} everywhere (kg reaches "
        f"{max(r['imbalance'] for r in rows if r['grouping'] == 'kg'):.3g}); for a fixed number of workers, memory "
        f"grows by at most {growth:.2f}x from 1 to {sources[-1]} sources, flat on a log scale but not exactly "
        "constant: each source sizes its virtual workers from its own share of the stream, so a heavy key "
        f"overflows its principal virtual worker at every source.\n{DIFFERENCE}\n"
    )
    return {f"{r['grouping']}-{r['workers']}w-{r['sources']}s": r for r in rows}


# --- Fig. 11: virtual workers ------------------------------------------------------------------------------

VW_FULL = (5, 10, 20, 50, 100, 1000)
VW_QUICK = (5, 10, 100, 1000)


@register(
    "cg-virtual-workers",
    "Consistent Grouping (001), Fig. 11: 5 to 1000 virtual workers per worker, Fig. 8's heterogeneous setting",
    "1000 virtual workers converge slowly (long queues, high latency, spread stays high) while 10 settle; "
    "5 are coarse (paper: too few to move around)",
)
def virtual_workers_sweep(out: Path, quick: bool) -> dict:
    """Run cg on 10 workers (3 of them 5x faster, 80% load) for each number of virtual workers per worker."""
    base = fast_slow_topology(200_000 if quick else 1_500_000)
    extra = {"t0": 0.01} if quick else {}  # as cg-heterogeneity: a shorter run gets a shorter time slot
    results = {vw: run(base.with_(grouping="cg", params={"vw": vw, **extra}))
               for vw in (VW_QUICK if quick else VW_FULL)}
    fast = [w for w, c in enumerate(base.capacity_list) if c > 1]
    ideal = sum(base.capacity_list[w] for w in fast) / sum(base.capacity_list)
    window = 0.02
    rows = []
    for vw, r in results.items():
        s = r.summary
        t, spread = offered_spread(r, window)
        half = t >= t[-1] / 2
        rows.append({
            "vw": vw,
            "p50_ms": s["latency_ms"]["p50"],
            "p99_ms": s["latency_ms"]["p99"],
            "imbalance": s["imbalance"],
            "spread_second_half": float(np.mean(spread[half][:-1])) if half.sum() > 1 else float(np.mean(spread)),
            "queue_max": s["queue_max"],
            "replication": s["replication"],
            "moves": int(sum(g["moves"] for g in s["grouping_stats"])),
            # share of the virtual workers the fast workers hold at the end (source 0), and the capacity share
            "fast_vw_share": sum(s["grouping_stats"][0]["virtual_workers"][w] for w in fast)
            / s["grouping_stats"][0]["total_virtual_workers"],
            "fast_capacity_share": ideal,
        })
    write_csv(out / "virtual_workers.csv", rows)
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))

    for vw, r in results.items():
        tq, q = series(r, "queue_len")
        axes[0].plot(tq, q.max(axis=0), label=f"vw={vw}")
        tl, p99 = latency_over_time(r)
        axes[1].plot(tl, p99, label=f"vw={vw}")
        ts, sp = offered_spread(r, window)
        axes[2].plot(ts, sp, label=f"vw={vw}", lw=1)
    for ax, label, log in ((axes[0], "longest worker queue (tuples)", True), (axes[1], "p99 latency (ms)", True),
                           (axes[2], "spread of offered utilization (max - min)", False)):
        if log:
            ax.set_yscale("symlog", linthresh=1)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("cg with 5..1000 virtual workers per worker; capacities 5,5,5,1,...,1, input at 80% of capacity")
    fig.tight_layout()
    fig.savefig(out / "virtual_workers.png", dpi=110)
    plt.close(fig)
    by = {r["vw"]: r for r in rows}
    best = min(rows, key=lambda r: r["p99_ms"])
    (out / "virtual_workers.md").write_text(
        markdown_table(rows)
        + "\nPaper (Fig. 11): 5 virtual workers do not give the desired result (too few to move around), 1000 take "
        "longer to converge, 10 and 20 perform alike, 100 is best.\n"
        f"Ours: vw=1000 has p99 {by[1000]['p99_ms']:.3g} ms and longest queue {by[1000]['queue_max']:.0f} vs "
        f"{by[10]['p99_ms']:.3g} ms and {by[10]['queue_max']:.0f} for vw=10; its fast workers hold "
        f"{by[1000]['fast_vw_share']:.2f} of the virtual workers at the end vs {ideal:.2f} of the capacity "
        f"(vw=10: {by[10]['fast_vw_share']:.2f}); lowest p99 at vw={best['vw']}. vw=5 ends with imbalance "
        f"{by[5]['imbalance']:.3g} vs {by[10]['imbalance']:.3g} for vw=10 (each of its moves shifts 1/50 of the "
        "load, so it cannot settle finely), yet its latency stays low: in our runs being coarse costs less than "
        "converging slowly.\n"
        "Why: CG moves one virtual worker per busy/idle pairing, at most one decision per worker per time "
        "slot, so the time to converge grows with the virtual workers a fast worker has to collect (alpha n x 5/22 "
        "- alpha, about 1.3 alpha of them). Our runs are seconds of simulated time (the paper's 18M messages are "
        "far longer), so the optimum shifts from 100 to 5-20 and vw=1000 behaves as the paper reports. "
        f"Memory (replication) falls as virtual workers grow here. {DIFFERENCE}\n"
    )
    return {str(r["vw"]): r for r in rows}
