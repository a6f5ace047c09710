"""Adaptation experiments: heterogeneous workers and capacity changes (Consistent Grouping), drift (FISH)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.common import against_paper, markdown_table, pyplot, run, series, write_csv
from experiments.registry import register
from topo.results.metrics import RunResult
from topo.schedule import Change
from topo.spec import TopologySpec

COST_MS = 0.1  # a capacity-1.0 worker serves 10,000 tuples/s
WP_LIKE = "zipf:z=1.0224,keys=100000,messages={m},seed=7"  # p1 = 9.32%, the Wikipedia trace's
FAST_SLOW = (5.0, 5.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)  # y = 3 workers z = 5 times faster
UNBOUNDED = 10**6  # max pending batches: the papers' queues are unbounded, so no backpressure here


def cg_params(grouping: str, quick: bool) -> dict:
    """CG's time slot scaled with the run: a quick run is a fifth as long, so its slot is half the default."""
    return {"t0": 0.01} if grouping == "cg" and quick else {}


def rate_at(load: float, capacities: tuple[float, ...]) -> float:
    """Input rate (tuples/s) that keeps the whole topology at `load` of its total capacity."""
    return load * sum(capacities) * 1e3 / COST_MS


def fast_slow_topology(messages: int) -> TopologySpec:
    """The Consistent Grouping paper's heterogeneous setting: 10 workers, 3 of them 5x faster, 80% load."""
    return TopologySpec(
        engine="sim", workers=10, sources=2, capacities=FAST_SLOW, stream=WP_LIKE.format(m=messages),
        cost_ms=COST_MS, rate=rate_at(0.8, FAST_SLOW), max_pending=UNBOUNDED, batch_size=50, linger_ms=1.0, seed=1,
    )


def latency_over_time(result: RunResult, windows: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """p99 latency (ms) of the tuples arriving in each of `windows` equal time windows."""
    log = result.log
    edges = np.linspace(log.arrival_s.min(), log.arrival_s.max(), windows + 1)
    which = np.clip(np.searchsorted(edges, log.arrival_s, side="right") - 1, 0, windows - 1)
    lat = log.latency_ms
    p99 = np.array([np.percentile(lat[which == i], 99) if np.any(which == i) else np.nan for i in range(windows)])
    return (edges[:-1] + edges[1:]) / 2, p99


def _summary_row(name: str, result: RunResult) -> dict:
    s = result.summary
    _, queues = series(result, "queue_len")
    tail = queues[:, -max(1, queues.shape[1] // 5) :]
    return {
        "grouping": name,
        "p50_ms": s["latency_ms"]["p50"],
        "p99_ms": s["latency_ms"]["p99"],
        "throughput_tps": s["throughput_tps"],
        "imbalance": s["imbalance"],
        "replication": s["replication"],
        "max_queue_end": float(tail.max()),
        "exact": s["exact"],
    }


@register(
    "cg-heterogeneity",
    "Consistent Grouping (001), Fig. 8: 10 workers, 3 of them 5x faster, input at 80% of total capacity",
    "cg's queues and latency stay bounded while kg's and sg's grow; cg's p99 is below half of kg's and below sg's",
)
def heterogeneity(out: Path, quick: bool) -> dict:
    """Run kg, sg, pkg and cg on fast and slow workers; plot queues and p99 latency over time."""
    messages = 200_000 if quick else 1_000_000
    base = fast_slow_topology(messages)
    results = {g: run(base.with_(grouping=g, params=cg_params(g, quick))) for g in ("kg", "sg", "pkg", "cg")}
    rows = [_summary_row(g, r) for g, r in results.items()]
    write_csv(out / "heterogeneity.csv", rows)
    plt = pyplot()
    fig, (ax_q, ax_l) = plt.subplots(1, 2, figsize=(12, 4.2))
    for g, r in results.items():
        t, q = series(r, "queue_len")
        ax_q.plot(t, q.max(axis=0), label=g)
        tl, p99 = latency_over_time(r)
        ax_l.plot(tl, p99, label=g)
    for ax, label in ((ax_q, "longest worker queue (tuples)"), (ax_l, "p99 latency (ms)")):
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("Heterogeneous workers (capacities 5,5,5,1,...,1), input at 80% of total capacity")
    fig.tight_layout()
    fig.savefig(out / "heterogeneity.png", dpi=110)
    plt.close(fig)
    by = {r["grouping"]: r for r in rows}
    growth = {g: _queue_growth(r) for g, r in results.items()}
    for g, r in by.items():
        r["queue_half_input"], r["queue_end_input"] = growth[g]
    paper = [
        {"claim": "kg's and sg's queues grow over time", "paper": "yes (Fig. 8, queue length)",
         "ours": f"longest queue in the last fifth {by['kg']['max_queue_end']:,.0f} (kg), "
                 f"{by['sg']['max_queue_end']:,.0f} (sg); longest queue halfway through the input and at its end: "
                 + ", ".join(f"{growth[g][0]:,.0f} -> {growth[g][1]:,.0f} ({g})" for g in ("kg", "sg", "cg"))},
        {"claim": "kg's and sg's latency grows; cg's stays low", "paper": "yes (Fig. 8, execution latency)",
         "ours": f"p99 {by['kg']['p99_ms']:,.0f} ms (kg), {by['sg']['p99_ms']:,.0f} ms (sg), "
                 f"{by['cg']['p99_ms']:.3g} ms (cg)"},
        {"claim": "cg keeps max - min utilization near zero", "paper": "yes; high for kg and sg",
         "ours": f"imbalance (load/capacity) {by['cg']['imbalance']:.3g} (cg) vs {by['kg']['imbalance']:.3g} (kg), "
                 f"{by['sg']['imbalance']:.3g} (sg); cg's longest queue at the end {by['cg']['max_queue_end']:.0f}"},
    ]
    note = ("Differences: the paper gives curves, not numbers. A Zipf stream with the Wikipedia trace's p1 stands in "
            f"for WP and the run is {messages:,} messages, not 22M; pkg, not in "
            "the figure, behaves exactly as sg here: it balances counts, and neither knows the capacities.")
    (out / "heterogeneity.md").write_text(markdown_table(rows) + against_paper(paper, note))
    return by


def _queue_growth(result: RunResult) -> tuple[float, float]:
    """Longest worker queue halfway through the input and when it ends (after that the queues only drain)."""
    t, q = series(result, "queue_len")
    end = float(result.log.arrival_s.max())  # after it the queues only drain
    longest = q.max(axis=0)
    at = np.searchsorted(t, [end / 2, end], side="right") - 1
    return float(longest[at[0]]), float(longest[at[1]])


def offered_spread(result: RunResult, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Per time window, max - min over workers of offered utilization: tuples given x time per tuple / window.

    This is the load each worker is given relative to its capacity at the time; unlike the busy fraction it
    does not stay at 1 while a worker drains a backlog it built up before the grouping adapted.
    """
    log, s = result.log, result.summary
    end = float(log.arrival_s.max())
    edges = np.arange(0.0, end + window_s, window_s)
    n = len(s["per_worker"])
    counts = np.zeros((n, edges.size - 1))
    which = np.clip(np.searchsorted(edges, log.enqueue_s, side="right") - 1, 0, edges.size - 2)
    np.add.at(counts, (log.worker, which), 1)
    caps = np.tile(np.array(s["config"].get("initial_capacities") or [1.0] * n, dtype=float)[:, None],
                   (1, edges.size - 1))
    for change in s["capacity_changes"]:
        caps[:, edges[:-1] >= change["at_s"]] = np.asarray(change["capacities"], dtype=float)[:, None]
    offered = counts * (s["config"]["cost_ms"] / 1e3) / caps / window_s
    return (edges[:-1] + edges[1:]) / 2, offered.max(axis=0) - offered.min(axis=0)


def recovery(result: RunResult, changes_at_s: list[float], window_s: float, settle_s: float = 0.5,
             margin: float = 0.1, smooth: int = 5, unbalanced: float = 0.5) -> list[dict]:
    """How long after each change the spread of offered utilization took to return to its level before it.

    Level before = median spread over the `settle_s` before the change; recovered = the first window whose
    rolling median over `smooth` windows is within `margin` of that level; -1 if it never is, or if the grouping
    was not balanced before the change either (level above `unbalanced`).
    """
    t, spread = offered_spread(result, window_s)
    arrivals = np.sort(result.log.arrival_s)
    rolling = np.array([np.median(spread[max(0, i - smooth + 1) : i + 1]) for i in range(spread.size)])
    out = []
    for at in changes_at_s:
        before = spread[(t > at - settle_s) & (t < at)]
        level = float(np.median(before)) if before.size else 0.0
        first_after = int(np.searchsorted(t, at + window_s / 2))
        late = np.flatnonzero(rolling <= level + margin)
        late = late[late >= first_after + smooth - 1]  # a median of windows that all began after the change
        if level > unbalanced or not late.size:
            out.append({"seconds": -1.0, "messages": -1, "level_before": level})
            continue
        done_at = float(t[late[0]])
        messages = int(np.searchsorted(arrivals, done_at) - np.searchsorted(arrivals, at))
        out.append({"seconds": done_at - at, "messages": messages, "level_before": level})
    return out


@register(
    "cg-capacity-change",
    "Consistent Grouping (001), Fig. 12: worker capacities change twice mid-run, their sum kept",
    "cg returns to a low utilization spread shortly after each change; sg and kg stay unbalanced",
)
def capacity_change(out: Path, quick: bool) -> dict:
    """Shift the fast workers twice and measure how many messages cg takes to rebalance."""
    m = 300_000 if quick else 1_500_000
    second = (1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 1.0, 1.0, 1.0, 1.0)
    third = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 1.0)
    schedule = (Change(m // 3, "messages", second), Change(2 * m // 3, "messages", third))
    base = fast_slow_topology(m).with_(capacity_schedule=schedule)
    results = {g: run(base.with_(grouping=g, params=cg_params(g, quick))) for g in ("sg", "pkg", "cg")}
    window = 0.02  # seconds: a few hundred tuples per worker per window
    rows = []
    for g, r in results.items():
        changes = [c["at_s"] for c in r.summary["capacity_changes"]]
        row = _summary_row(g, r)
        t, spread = offered_spread(r, window)
        back = recovery(r, changes, window)
        row["recovery_messages"] = [b["messages"] for b in back]  # one per change
        row["recovery_s"] = [round(b["seconds"], 3) for b in back]
        row["mean_spread"] = float(np.mean(spread[t < t[-1] - window]))
        rows.append(row)
    write_csv(out / "capacity_change.csv", rows)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    for g, r in results.items():
        t, spread = offered_spread(r, window)
        ax.plot(t, spread, label=g, lw=1)
    for c in results["cg"].summary["capacity_changes"]:
        ax.axvline(c["at_s"], color="black", ls=":", lw=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("spread of offered utilization (max - min)")
    ax.set_title("Capacities change at the dotted lines (sum kept); input at 80% of total capacity")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "capacity_change.png", dpi=110)
    plt.close(fig)
    by = {r["grouping"]: r for r in rows}
    paper = [
        {"claim": "cg adapts quickly after each change", "paper": "yes (Fig. 12; changes at 6M and 12M messages)",
         "ours": f"spread back to its level before the change after {by['cg']['recovery_messages']} "
                 f"messages ({by['cg']['recovery_s']} s) of {m // 3:,} per phase"},
        {"claim": "the others stay unbalanced", "paper": "kg and sg: high max - min utilization throughout",
         "ours": f"mean spread {by['sg']['mean_spread']:.3g} (sg), {by['pkg']['mean_spread']:.3g} (pkg) vs "
                 f"{by['cg']['mean_spread']:.3g} (cg); p99 {by['sg']['p99_ms']:,.0f} ms (sg) vs "
                 f"{by['cg']['p99_ms']:.3g} ms (cg)"},
    ]
    note = ("Differences: the paper gives curves, not numbers, and changes capacities at 6M and 12M of 18M messages "
            f"with 100 virtual workers per worker; here at a third and two thirds of {m:,} messages with 10, since "
            "our runs are shorter and converge faster with fewer (see cg-virtual-workers). kg, in the paper's "
            "figure, is left out: its placement ignores capacities, as in cg-heterogeneity.")
    (out / "capacity_change.md").write_text(markdown_table(rows) + against_paper(paper, note))
    return by


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
    rows = [_summary_row(g, r) for g, r in results.items()]
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
