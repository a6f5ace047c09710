"""Today's production partitioners next to the papers': Flink's adaptive rebalance, Kafka's adaptive partitioner and
Pulsar's Key_Shared against pkg, cg, fish and lasg (and kg as the floor), in four settings of the simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.common import markdown_table, pyplot, run, write_csv
from experiments.registry import register
from experiments.topologies import FAST_SLOW, cg_params, fast_slow_topology, rate_at
from topo.schedule import Change
from topo.spec import TopologySpec

PRODUCTION = ("flink_adaptive", "kafka_adaptive", "key_shared")
PAPERS = ("pkg", "cg", "fish", "lasg")
GROUPINGS = ("kg", *PAPERS, *PRODUCTION)
SWAPPED = tuple(reversed(FAST_SLOW))  # the fast workers become the slow ones; the sum is kept


def scenarios(m: int) -> dict[str, TopologySpec]:
    """Fig. 8's heterogeneous setting, a capacity change, a drifting stream, and a worker leaving then rejoining."""
    fig8 = fast_slow_topology(m)
    nine = FAST_SLOW[:9]
    return {
        "fig8": fig8,
        "capacity-change": fig8.with_(capacity_schedule=(Change(m // 2, "messages", SWAPPED),)),
        "drift": fig8.with_(stream=f"drift:z=1.0224,keys=100000,messages={m},shift_every={m // 4},seed=7"),
        # the last worker leaves a third of the way in and comes back at two thirds; load: 80% of the nine
        "leave-join": fig8.with_(
            rate=rate_at(0.8, nine),
            scale_schedule=(Change(m // 3, "messages", 9), Change(2 * m // 3, "messages", 10)),
        ),
    }


def params(grouping: str, spec: TopologySpec, quick: bool) -> dict:
    """cg's time slot for the run's length; Kafka's producer batch (its stickiness) is the topology's buffer."""
    if grouping == "kafka_adaptive":
        return {"batch": spec.batch_size}
    return cg_params(grouping, quick)


def _row(scenario: str, grouping: str, s: dict) -> dict:
    return {
        "scenario": scenario,
        "grouping": grouping,
        "kind": "production" if grouping in PRODUCTION else ("baseline" if grouping == "kg" else "paper"),
        "throughput_tps": s["throughput_tps"],
        "p50_ms": s["latency_ms"]["p50"],
        "p99_ms": s["latency_ms"]["p99"],
        "imbalance": s["imbalance"],
        "replication": s["replication"],
        "exact": s["exact"],
    }


@register(
    "production-vs-papers",
    "Production partitioners (Flink 2.x adaptive rebalance, Kafka 3.3+ adaptive partitioner, Pulsar 4 Key_Shared) "
    "against the papers' pkg, cg, fish and lasg: Fig. 8's setting, a capacity change, drift, a worker leaving",
    "the load-aware shuffles (flink_adaptive, kafka_adaptive) keep p99 far below key_shared's on uneven workers, "
    "at 2.1 to 2.3 key copies per key; key_shared keeps one copy but, blind to load, falls behind as kg does",
)
def production_vs_papers(out: Path, quick: bool) -> dict:
    """Every grouping in every scenario of the simulator; a table, a CSV and a plot of p99 and replication."""
    m = 12_000 if quick else 400_000
    rows = []
    for scenario, base in scenarios(m).items():
        for g in GROUPINGS:
            rows.append(_row(scenario, g, run(base.with_(grouping=g, params=params(g, base, quick))).summary))
    write_csv(out / "production.csv", rows)
    (out / "production.md").write_text(
        f"# Production partitioners next to the papers' ({m:,} messages per run)\n\n" + markdown_table(rows)
        + against_papers(rows)
    )
    _plot(out / "production.png", rows)
    return {f"{r['scenario']}/{r['grouping']}": {k: r[k] for k in ("throughput_tps", "p99_ms", "replication",
                                                                     "imbalance", "exact")} for r in rows}


def against_papers(rows: list[dict]) -> str:
    """Per scenario, each production partitioner's p99 and replication next to the best paper strategy's."""
    out = []
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = {r["grouping"]: r for r in rows if r["scenario"] == scenario}
        best = min(PAPERS, key=lambda g: mine[g]["p99_ms"])
        for g in PRODUCTION:
            out.append({"scenario": scenario, "production": g, "p99_ms": mine[g]["p99_ms"],
                        "replication": mine[g]["replication"], "best paper strategy": best,
                        "its p99_ms": mine[best]["p99_ms"], "its replication": mine[best]["replication"],
                        "p99 ratio": mine[g]["p99_ms"] / mine[best]["p99_ms"]})
    return "\n## Against the papers' strategies\n\n" + markdown_table(out)


def _plot(path: Path, rows: list[dict]) -> None:
    plt = pyplot()
    names = list(dict.fromkeys(r["scenario"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.8 / len(GROUPINGS)
    colors = plt.get_cmap("tab10")
    for i, g in enumerate(GROUPINGS):
        mine = {r["scenario"]: r for r in rows if r["grouping"] == g}
        x = np.arange(len(names)) + (i - (len(GROUPINGS) - 1) / 2) * width
        hatch = "//" if g in PRODUCTION else None
        for ax, col in zip(axes, ("p99_ms", "replication"), strict=True):
            ax.bar(x, [mine[n][col] for n in names], width, label=g, color=colors(i), hatch=hatch,
                   edgecolor="white" if hatch else None)
    for ax, label in zip(axes, ("p99 latency (ms, log scale)", "replication (key copies per key)"), strict=True):
        ax.set_xticks(np.arange(len(names)), names)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_yscale("log")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(GROUPINGS), fontsize=8, frameon=False)
    fig.suptitle("Production partitioners (hatched) and the papers' strategies; 10 workers, 3 of them 5x faster")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)

