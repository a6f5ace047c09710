"""Which grouping to use: rank run summaries by the user's objective and find the Pareto front.

Objectives (what a user of the emulator asks):

    p99         lowest p99 latency at the offered rate (a grouping that falls behind shows it in its p99)
    throughput  most tuples per second (at saturation unless the user set a rate)
    memory      fewest key copies (replication, the papers' memory cost) among the groupings whose p99 stays
                within a latency bound; those over the bound follow, by p99

A run that was not exact always ranks last: a wrong answer fast is no answer. The Pareto front is over
throughput (higher is better), p99 and replication (lower is better): a grouping is on it when no other exact
grouping is at least as good in all three and better in one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

OBJECTIVES = {
    "p99": "lowest p99 latency at the offered rate",
    "throughput": "most tuples per second",
    "memory": "fewest key copies (replication) among groupings whose p99 is within --p99-bound-ms",
}


def _p99(s: dict) -> float:
    return float(s["latency_ms"]["p99"])


def sort_key(summary: dict, objective: str, p99_bound_ms: float | None = None) -> tuple:
    """The key that orders summaries best first under `objective` (ties: the lower p99, then the name)."""
    wrong = not summary.get("exact", False)
    name = summary["grouping"]
    if objective == "p99":
        return (wrong, _p99(summary), -summary["throughput_tps"], name)
    if objective == "throughput":
        return (wrong, -summary["throughput_tps"], _p99(summary), name)
    if objective == "memory":
        if p99_bound_ms is None:
            raise ValueError("the memory objective needs a p99 bound")
        over = _p99(summary) > p99_bound_ms
        return (wrong, over, _p99(summary) if over else summary["replication"], _p99(summary), name)
    raise ValueError(f"unknown objective {objective!r} (valid: {', '.join(OBJECTIVES)})")


def pareto_front(summaries: Sequence[dict]) -> list[bool]:
    """Whether each summary is on the front of (throughput up, p99 down, replication down) among exact runs."""
    points = [(-s["throughput_tps"], _p99(s), s["replication"]) for s in summaries]
    exact = [bool(s.get("exact", False)) for s in summaries]

    def dominates(a: tuple, b: tuple) -> bool:
        return all(x <= y for x, y in zip(a, b, strict=True)) and a != b

    return [
        exact[i] and not any(exact[j] and dominates(points[j], points[i]) for j in range(len(points)) if j != i)
        for i in range(len(points))
    ]


def overloaded(rate_tps: float | None, capacity_tps: float) -> bool:
    """True when the offered rate is more than the workers serve together: no grouping can carry it, and every p99
    only measures how long a run took to drain its backlog, so throughput is what tells the groupings apart."""
    return rate_tps is not None and rate_tps > capacity_tps


def rank(summaries: Sequence[dict], objective: str, p99_bound_ms: float | None = None) -> list[dict]:
    """The summaries best first, each with its `rank` (from 1) and whether it is on the Pareto front."""
    front = pareto_front(summaries)
    marked = [dict(s, pareto=on) for s, on in zip(summaries, front, strict=True)]
    ordered = sorted(marked, key=lambda s: sort_key(s, objective, p99_bound_ms))
    return [dict(s, rank=i + 1) for i, s in enumerate(ordered)]


def _num(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"


def table(ranking: Sequence[dict]) -> str:
    """The ranking as a Markdown table."""
    head = ("| rank | grouping | throughput (tuples/s) | p50 (ms) | p99 (ms) | imbalance | replication | exact "
            "| Pareto | bottleneck |")
    rows = [head, "|" + "---|" * 10]
    for s in ranking:
        lat = s["latency_ms"]
        bottleneck = (s.get("headroom") or {}).get("bottleneck", "-")
        rows.append(
            f"| {s['rank']} | {s['grouping']} | {_num(s['throughput_tps'])} | {_num(lat['p50'])} | {_num(lat['p99'])} "
            f"| {s['imbalance']:.3f} | {s['replication']:.2f} | {'yes' if s['exact'] else 'NO'} "
            f"| {'*' if s['pareto'] else ''} | {bottleneck} |"
        )
    return "\n".join(rows) + "\n"


def confirm_table(pairs: Sequence[tuple[dict, dict]]) -> str:
    """Simulator and Ray side by side for the confirmed groupings, as a Markdown table."""
    rows = [
        "| grouping | sim tuples/s | Ray tuples/s | sim p50 (ms) | Ray p50 (ms) | sim p99 (ms) | Ray p99 (ms) "
        "| Ray exact | Ray bottleneck |",
        "|" + "---|" * 9,
    ]
    for sim, ray in pairs:
        rows.append(
            f"| {sim['grouping']} | {_num(sim['throughput_tps'])} | {_num(ray['throughput_tps'])} "
            f"| {_num(sim['latency_ms']['p50'])} | {_num(ray['latency_ms']['p50'])} "
            f"| {_num(sim['latency_ms']['p99'])} | {_num(ray['latency_ms']['p99'])} "
            f"| {'yes' if ray['exact'] else 'NO'} | {(ray.get('headroom') or {}).get('bottleneck', '-')} |"
        )
    return "\n".join(rows) + "\n"


def pareto_plot(path: Path, ranking: Sequence[dict], title: str) -> None:
    """Throughput against p99, one point per grouping sized by its replication, the Pareto front drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    placed: list[tuple[float, float]] = []
    span = max((s["throughput_tps"] for s in ranking), default=1.0) or 1.0
    for s in ranking:
        on, x, y = s["pareto"], s["throughput_tps"], max(_p99(s), 1e-3)
        ax.scatter(x, y, s=40 + 60 * s["replication"], color="tab:red" if on else "tab:gray",
                   alpha=0.85 if on else 0.5, marker="o" if s["exact"] else "x", zorder=3 if on else 2)
        # labels of points that nearly coincide are stacked instead of printed over each other
        near = sum(1 for px, py in placed if abs(px - x) < 0.04 * span and abs(math.log(py / y)) < 0.15)
        placed.append((x, y))
        ax.annotate(f"{s['rank']}. {s['grouping']}", (x, y), fontsize=8, xytext=(6, 4 - 10 * near),
                    textcoords="offset points")
    front = sorted((s for s in ranking if s["pareto"]), key=lambda s: s["throughput_tps"])
    if len(front) > 1:
        ax.plot([s["throughput_tps"] for s in front], [max(_p99(s), 1e-3) for s in front], color="tab:red",
                lw=1, ls="--", zorder=1, label="Pareto front (throughput, p99, replication)")
        ax.legend(loc="best", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("throughput (tuples/s)")
    ax.set_ylabel("p99 latency (ms, log scale)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.text(0.01, 0.01, "point size: replication (key copies per key); x: not exact", fontsize=7, color="gray")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
