"""The written and printed ends of an analysis: CSV tables, Markdown, report.md with the figures, a terminal table."""

from __future__ import annotations

import json
import math
import numbers
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from spark.analyze import Analysis
from spark.analyze_plots import draw_all

# the comparison table as people read it: column -> heading
RUN_COLUMNS = {"run": "run", "grouping": "grouping", "engine": "engine", "workers": "workers", "tuples": "tuples",
               "throughput_tps": "throughput (tuples/s)", "p50_ms": "p50 ms", "p95_ms": "p95 ms", "p99_ms": "p99 ms",
               "p999_ms": "p99.9 ms", "imbalance": "imbalance", "replication": "replication", "exact": "exact"}
WORKER_COLUMNS = {"worker": "worker", "capacity": "capacity", "tuples": "tuples", "load": "tuples / capacity",
                  "relative_load": "load / mean", "busy_fraction": "busy", "p50_ms": "p50 ms", "p95_ms": "p95 ms",
                  "p99_ms": "p99 ms", "p999_ms": "p99.9 ms"}
TABLES = {
    "runs.csv": ("runs", "the comparison table, one row per run (exact latency percentiles)"),
    "workers.csv": ("workers", "one row per run and worker: tuples, load relative to capacity, exact percentiles"),
    "windows.csv": ("windows", "one row per run and time window: throughput, exact percentiles, imbalance"),
    "window_load.csv": ("window_load", "one row per run, window and worker: tuples finished and tuples / capacity"),
    "utilization.csv": ("utilization", "one row per run and time-series sample: worker utilization min/mean/max"),
    "latency_cdf.csv": ("cdf", "latency CDF of each run at about 1% steps of latency"),
}
FIGURES = {
    "latency_cdf.png": "Latency CDF of each run",
    "throughput.png": "Throughput over time",
    "latency_windows.png": "Latency percentiles per window",
    "imbalance.png": "Load imbalance per window",
    "utilization_spread.png": "Utilization spread (max - min over workers) over time",
    "worker_load.png": "Per-worker load relative to capacity",
}


def write_analysis(analysis: Analysis, directory: Path) -> None:
    """Tables (CSV, and the comparison as Markdown), figures, report.md and analysis.json into `directory`."""
    for name, (attr, _) in TABLES.items():
        getattr(analysis, attr).to_csv(directory / name, index=False)
    (directory / "runs.md").write_text(markdown_table(analysis.runs, RUN_COLUMNS) + "\n")
    figures = draw_all(analysis, directory)
    (directory / "report.md").write_text(report_markdown(analysis, figures))
    meta = {
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": [{"run": r.run, "path": r.path} for r in analysis.runs.itertuples(index=False)],
        "window_s": analysis.window_s,
        "percentiles": "exact (overall, per worker, per window), numpy's linear interpolation",
        "notes": analysis.notes,
        "files": [*TABLES, "runs.md", *figures, "report.md"],
    }
    (directory / "analysis.json").write_text(json.dumps(meta, indent=2) + "\n")


def report_markdown(analysis: Analysis, figures: list[str]) -> str:
    """report.md: the comparison, the figures, one per-worker table per run, notes and the files."""
    runs = analysis.runs
    windows = ", ".join(f"{run} {w:g} s" for run, w in analysis.window_s.items())
    lines = [
        "# Run analysis", "",
        f"{len(runs)} run(s), analyzed {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.", "",
        "## Comparison", "",
        markdown_table(runs, RUN_COLUMNS), "",
        "Latency is end to end (arrival at the source to the end of service), in milliseconds; percentiles (over all "
        "tuples, per worker, per window) are exact, with numpy's linear interpolation as in summary.json. Imbalance is "
        "max over workers of tuples / capacity over their mean, minus one; replication and exact come from "
        "summary.json.", "",
        "## Figures", "",
    ]
    for name in figures:
        lines += [f"### {FIGURES.get(name, name)}", "", f"![{FIGURES.get(name, name)}]({name})", ""]
    lines += [f"Time windows (per-window throughput, percentiles and imbalance): {windows}. Time is measured from "
              "each run's first arrival.", "", "## Per worker", ""]
    for run, table in analysis.workers.groupby("run", sort=False):
        lines += [f"### {run}", "", markdown_table(table, WORKER_COLUMNS), ""]
    if analysis.notes:
        lines += ["## Disagreements with summary.json", "", *(f"- {n}" for n in analysis.notes), ""]
    lines += ["## Files", "", *(f"- `{name}`: {what}" for name, (_, what) in TABLES.items()),
              "- `runs.md`: the comparison table in Markdown", "- `analysis.json`: inputs and parameters", ""]
    return "\n".join(lines)


def markdown_table(table: pd.DataFrame, columns: dict[str, str]) -> str:
    """A GitHub-flavoured Markdown table of the given columns, numbers right-aligned and rounded for reading."""
    present = [c for c in columns if c in table.columns]
    head = "| " + " | ".join(columns[c] for c in present) + " |"
    rule = "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(table[c]) and table[c].dtype != bool else "---"
                          for c in present) + "|"
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in table[present].itertuples(index=False)]
    return "\n".join([head, rule, *body])


def fmt(value: object) -> str:
    """A number as a person reads it: thousands separated, about four significant digits."""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "NO"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isnan(value):
            return "-"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return "-" if value is None else str(value).replace("|", "\\|")


def print_summary(analysis: Analysis, out: Path, console: Console | None = None) -> None:
    """The comparison table on the terminal, then where everything was written."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)  # a pipe or a log file: keep the rows whole rather than fit 80 columns
    table = Table(title=f"{len(analysis.runs)} run(s) compared", title_justify="left")
    for column, heading in RUN_COLUMNS.items():
        table.add_column(heading, justify="left" if column in ("run", "grouping", "engine") else "right")
    for row in analysis.runs.to_dict("records"):
        cells = {c: escape(fmt(row[c])) for c in RUN_COLUMNS}
        if not row["exact"]:
            cells["exact"] = "[red]NO[/red]"
        table.add_row(*cells.values())
    console.print(table)
    for note in analysis.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    console.print(f"report: {out / 'report.md'}")
