"""Deployment experiments on the Ray engine: real actors, real time, CPU-capped heterogeneous workers."""

from __future__ import annotations

from pathlib import Path

from experiments.common import against_paper, markdown_table, pyplot, stream, write_csv
from experiments.registry import register
from topo.results.metrics import RunResult
from topo.spec import TopologySpec

CAPACITIES = (1.0, 1.0, 0.3, 0.3)  # two workers capped at 30%, as the paper's cpulimit on two executors
# a capacity-1.0 worker burns a fifth of a core: the four workers take half a core of two, the sources the rest
CORE_SHARE = 0.2
LOAD = 0.8  # the latency runs' offered load, as a share of what the four workers serve together (as in Fig. 8)


def run_ray(spec: TopologySpec) -> RunResult:
    """One topology on the Ray engine, with the spec's own work mode."""
    from topo.ray_engine import run_ray as run

    return run(spec, stream(spec.stream), work=spec.work)


def _row(name: str, saturated: RunResult, loaded: RunResult) -> dict:
    s, at = saturated.summary, loaded.summary
    return {
        "grouping": name,
        "throughput_tps": s["throughput_tps"],
        "saturated_p99_ms": s["latency_ms"]["p99"],
        "imbalance": s["imbalance"],
        "tuples": s["tuples_processed"],
        "measured_capacity": ",".join(f"{w.get('measured_capacity', float('nan')):.2f}" for w in s["per_worker"]),
        "loaded_tps": at["throughput_tps"],
        "p50_ms": at["latency_ms"]["p50"],
        "p99_ms": at["latency_ms"]["p99"],
        "bottleneck": at["headroom"]["bottleneck"],
        "exact": s["exact"] and at["exact"],
    }


@register(
    "ray-heterogeneous",
    "Consistent Grouping (001), Storm deployment: two of four executors capped at 30% CPU (here on Ray actors)",
    "cg's throughput is at least 1.5x kg's and its p99 latency lower; pkg and sg in between",
    on_ray=True,
)
def heterogeneous(out: Path, quick: bool) -> dict:
    """kg, pkg, sg and cg on real actors: throughput under saturating input, latency at LOAD of the workers' total
    capacity; 20 s each (quick: kg and cg in sleep mode, 6 s saturating and 2 s loaded: cg needs its first
    seconds to learn the slow workers)."""
    seconds, loaded_s, work, names = ((6.0, 2.0, "sleep", ("kg", "cg")) if quick
                                      else (20.0, 20.0, "cpu", ("kg", "pkg", "sg", "cg")))
    base = TopologySpec(
        engine="ray", workers=4, sources=2, capacities=CAPACITIES, cost_ms=1.0, duration=seconds, work=work,
        stream="zipf:z=1.0224,keys=100000,messages=200000,seed=7", batch_size=100, linger_ms=20.0, max_pending=2,
        core_share=CORE_SHARE, seed=1, params={},
    )
    rate = LOAD * sum(CAPACITIES) / (base.cost_ms / 1e3)
    # with saturating input every channel's credits fill, so latency there measures the credit window, not the
    # grouping: latency is measured at a load the workers together can carry, as in Fig. 8
    rows = [_row(g, run_ray(base.with_(grouping=g)), run_ray(base.with_(grouping=g, rate=rate, duration=loaded_s)))
            for g in names]
    write_csv(out / "heterogeneous.csv", rows)
    by = {r["grouping"]: r for r in rows}
    cg, kg = by["cg"], by["kg"]
    paper = [
        {"claim": "cg's throughput vs kg's", "paper": "up to 3.44x (Storm, two of 24 executors at 30% CPU)",
         "ours": f"{cg['throughput_tps'] / kg['throughput_tps']:.3g}x"},
        {"claim": "cg's end-to-end latency vs kg's", "paper": "up to 2x better",
         "ours": f"at {rate:,.0f} tuples/s ({LOAD:.0%} load): p99 {kg['p99_ms'] / cg['p99_ms']:.3g}x better "
                 f"({kg['p99_ms']:.3g} vs {cg['p99_ms']:.3g} ms); p50 {kg['p50_ms']:.3g} (kg) vs {cg['p50_ms']:.3g} ms "
                 f"(cg)"},
        {"claim": "pkg and sg between kg and cg", "paper": "cg best on throughput and latency",
         "ours": ", ".join(f"{g} {by[g]['throughput_tps']:,.0f} tuples/s, p99 {by[g]['p99_ms']:.3g} ms"
                           for g in ("pkg", "sg") if g in by) or "(full mode only)"},
    ]
    note = ("\nDifferences: 4 workers (2 capped at 30%) on Ray actors on one 2-core machine, not 24 Storm executors "
            "on a cluster, and a Zipf stream with the Wikipedia trace's p1 instead of the Twitter trace. The paper's "
            "abstract and text swap which of 2x and 3.44x is latency and which throughput; we compare with the text.")
    note += (f" Throughput is measured with saturating input; latency in a second run of each grouping at {LOAD:.0%} "
             "of the workers' total capacity, because under saturating input every channel's credits fill, and the "
             "p99 then measures the credit window (2 buffers of 100 tuples per channel) more than the grouping "
             "(saturated_p99_ms).")
    over = [r["grouping"] for r in rows if r["bottleneck"] == "topology"]
    if over:
        note += (f" At that load {', '.join(over)} cannot carry the rate (their hot or slow workers saturate), so "
                 "their queues and latency grow for as long as the run lasts; the ratio to cg's p99 is therefore far "
                 "above the paper's 2x, which Storm measured with a bounded number of tuples pending per spout.")
    note += "\n"
    (out / "heterogeneous.md").write_text(markdown_table(rows) + against_paper(paper, note))
    plt = pyplot()
    fig, (ax_t, ax_l) = plt.subplots(1, 2, figsize=(11, 4))
    ax_t.bar([r["grouping"] for r in rows], [r["throughput_tps"] for r in rows], color="tab:blue")
    ax_t.set_ylabel("throughput (tuples/s)")
    ax_l.bar([r["grouping"] for r in rows], [r["p99_ms"] for r in rows], color="tab:red")
    ax_l.set_ylabel(f"p99 latency at {LOAD:.0%} load (ms)")
    ax_l.set_yscale("log")
    fig.suptitle(f"Ray actors, capacities {CAPACITIES}, cost 1 ms/tuple, --work {work}, {seconds:g} s per run")
    fig.tight_layout()
    fig.savefig(out / "heterogeneous.png", dpi=110)
    plt.close(fig)
    return {r["grouping"]: r for r in rows}
