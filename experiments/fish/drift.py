"""FISH (003) on a time-evolving stream: latency and memory as the hot keys move (RQ1, RQ5)."""

from __future__ import annotations

from pathlib import Path

from experiments.common import against_paper, markdown_table, pyplot, run, write_csv
from experiments.registry import register
from experiments.topologies import COST_MS, UNBOUNDED, latency_over_time, rate_at, summary_row
from topo.spec import TopologySpec


@register(
    "fish-drift",
    "FISH (003), RQ1/RQ5: time-evolving Zipf stream, 32 workers",
    "fish has lower p99 latency than wc and dc, and far lower replication (memory) than sg",
)
def drift(out: Path, quick: bool) -> dict:
    """Hot keys move every shift_every messages; compare latency and memory of fish, wc, dc, pkg, sg."""
    m = 200_000 if quick else 2_000_000
    shift = m // 10
    workers = 32
    caps = (1.0,) * workers
    base = TopologySpec(
        engine="sim", workers=workers, sources=4,
        stream=f"drift:z=1.4,keys=100000,messages={m},shift_every={shift},seed=3",
        cost_ms=COST_MS, rate=rate_at(0.85, caps), max_pending=UNBOUNDED, batch_size=50, linger_ms=1.0, seed=1,
    )
    results = {g: run(base.with_(grouping=g)) for g in ("fish", "wc", "dc", "pkg", "sg")}
    rows = [summary_row(g, r) for g, r in results.items()]
    write_csv(out / "drift.csv", rows)
    plt = pyplot()
    fig, (ax_l, ax_m) = plt.subplots(1, 2, figsize=(12, 4.2))
    for g, r in results.items():
        tl, p99 = latency_over_time(r)
        ax_l.plot(tl, p99, label=g, ls="--" if g == "sg" else "-", lw=2.5 if g == "fish" else 1.2)
    ax_l.set_yscale("log")
    ax_l.set_xlabel("time (s)")
    ax_l.set_ylabel("p99 latency (ms)")
    ax_l.grid(alpha=0.3)
    ax_l.legend()
    ax_m.bar([r["grouping"] for r in rows], [r["replication"] for r in rows], color="tab:gray")
    ax_m.set_ylabel("replication (key copies per key)")
    fig.suptitle(f"Drifting Zipf z=1.4 (hot keys move every {shift:,} messages), {workers} workers, 85% load")
    fig.tight_layout()
    fig.savefig(out / "drift.png", dpi=110)
    plt.close(fig)
    by = {r["grouping"]: r for r in rows}
    fish, wc, dc, sg = by["fish"], by["wc"], by["dc"], by["sg"]
    paper = [
        {"claim": "fish close to sg in latency", "paper": "p50 7 ms, p99 562 ms on MT in Storm, close to sg",
         "ours": f"p50 {fish['p50_ms']:.3g} ms, p99 {fish['p99_ms']:.3g} ms (sg {sg['p50_ms']:.3g}, "
                 f"{sg['p99_ms']:.3g} ms)"},
        {"claim": "fish's p99 below wc's", "paper": "76.34% lower (average 87.12% lower)",
         "ours": f"{1 - fish['p99_ms'] / wc['p99_ms']:.2%} lower"},
        {"claim": "fish's throughput vs wc and dc", "paper": "1.32x wc, 1.48x dc",
         "ours": f"{fish['throughput_tps'] / wc['throughput_tps']:.3g}x wc, "
                 f"{fish['throughput_tps'] / dc['throughput_tps']:.3g}x dc"},
        {"claim": "fish's memory vs sg", "paper": "as low as 3.34% of sg at z = 1.0, under 16% overall",
         "ours": f"{fish['replication'] / sg['replication']:.1%} of sg's key copies "
                 f"({fish['replication']:.3g} vs {sg['replication']:.3g} per key)"},
    ]
    note = ("Differences: a drifting Zipf stream (z = 1.4, 100k keys, hot keys re-ranked every tenth) stands in for "
            "MemeTracker and Amazon, simulated at 85% load instead of a saturated Storm cluster: the input rate caps "
            "throughput, so it only drops for groupings that fall behind (dc, pkg), and wc keeps up here. Memory is "
            "counted as key copies per key. sg's copies are bounded by the messages per key: most of 100k keys "
            "occur only a few times in this stream, so sg holds about 4 copies per key here against the paper's "
            "15x to 88x of fg's memory, and fish's share of sg's cannot fall as low as 3.34%.")
    (out / "drift.md").write_text(markdown_table(rows) + against_paper(paper, note))
    return by
