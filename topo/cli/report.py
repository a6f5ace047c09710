"""The readable end of a run: a summary table on the terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and abs(x) >= 100:
        return f"{x:,.0f}"  # four significant digits are plenty once a number is this large
    return f"{x:,.{digits}f}" if isinstance(x, float) else f"{x:,}"


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Headline numbers, then one row per worker."""
    console = console or Console()
    lat = summary["latency_ms"]
    head = Table(title=f"{summary['grouping']} on {summary['engine']}: "
                       f"{summary['sources']} sources -> {summary['workers']} workers",
                 show_header=False, title_justify="left")
    head.add_column(style="bold")
    head.add_column(justify="right")
    head.add_row("tuples in / processed", f"{summary['tuples_in']:,} / {summary['tuples_processed']:,}")
    head.add_row("duration (s)", _fmt(summary["duration_s"]))
    head.add_row("throughput (tuples/s)", _fmt(summary["throughput_tps"], 0))
    head.add_row("latency ms mean/p50/p95/p99/max",
                 "/".join(_fmt(lat[k], 2) for k in ("mean", "p50", "p95", "p99", "max")))
    head.add_row("imbalance (load/capacity)", _fmt(summary["imbalance"], 4))
    head.add_row("replication (copies/key)", _fmt(summary["replication"], 3))
    head.add_row("exact merged state", "yes" if summary["exact"] else "[red]NO[/red]")
    k = summary.get("time_scale", 1.0)
    if k != 1 or summary["engine"] == "ray":
        # times and rates above are the emulated cluster's; the actors ran K times slower than the wall clock
        head.add_row("time scale K", f"{k:g}" + (" (times and rates in emulated time)" if k != 1 else ""))
    room = summary.get("headroom")
    if room is not None:
        style = {"engine": "bold red", "host": "bold red", "topology": "yellow"}.get(room["bottleneck"], "green")
        head.add_row("bottleneck", f"[{style}]{room['bottleneck']}[/{style}]")
    if "run_dir" in summary:
        head.add_row("run directory", summary["run_dir"])
    console.print(head)
    if room is not None and room["bottleneck"] != "none":
        console.print(f"[{style}]{room['note']}[/{style}]")

    workers = Table(title="per worker", title_justify="left")
    for col in ("id", "capacity", "tuples", "distinct keys", "busy"):
        workers.add_column(col, justify="right")
    rows = summary["per_worker"]
    shown = rows if len(rows) <= 24 else rows[:12] + rows[-12:]  # a 100-worker table helps nobody
    for i, w in enumerate(shown):
        if len(rows) > 24 and i == 12:
            workers.add_row("...", "", f"({len(rows) - 24} more)", "", "")
        workers.add_row(str(w["id"]), _fmt(float(w["capacity"]), 2), f"{w['tuples']:,}",
                        f"{w['distinct_keys']:,}", f"{w['busy_fraction']:.0%}")
    console.print(workers)
    failures = (summary.get("ray") or {}).get("recovery", {}).get("failures")
    if failures:
        print_failures(summary["ray"]["recovery"], console)


def print_failures(recovery: dict[str, Any], console: Console) -> None:
    """One row per actor that died: when it was seen dead, when it answered again, how long recovery took."""
    table = Table(title=f"failures: {recovery['deaths']} deaths, {recovery['recovered']} recovered, "
                        f"{recovery['replayed_tuples']:,} tuples replayed", title_justify="left")
    for col in ("actor", "died (s)", "back (s)", "recovery (s)", "note"):
        table.add_column(col, justify="left" if col in ("actor", "note") else "right")
    for f in recovery["failures"]:
        resumed = f.get("resumed")
        note = (f"resumed: {resumed['committed']:,} committed, {resumed['replayed_tuples']:,} replayed"
                if resumed else "restored a checkpoint" if f.get("restored") else "")
        table.add_row(f["actor"], _fmt(f["died_s"], 2), _fmt(f.get("back_s"), 2), _fmt(f.get("recovery_s"), 2),
                      note)
    console.print(table)
