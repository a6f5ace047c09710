"""`advise.py`: run every grouping on one topology in the simulator and answer "which grouping should I use?".

Each grouping runs exactly as `run_topology.py --engine sim` would run it with the same options (same spec, same
seed, so the same numbers), in parallel processes. The summaries are ranked by the chosen objective
(`topo.cli.advice`), and the directory written holds `advice.md`, `advice.json` (`{"objective": ..., "ranking":
[run summaries, best first]}`), `pareto.png`, and each grouping's own run directory under `runs/`.
`--confirm K` reruns the top K on Ray actors and sets both engines side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import UTC
from multiprocessing import get_context
from pathlib import Path

from topo.cli import advice
from topo.cli.run import (
    DEFAULT_LOAD,
    HelpFormatter,
    Parser,
    UsageError,
    add_ray_options,
    add_topology_options,
    guarded,
    spec_from_args,
)
from topo.spec import TopologySpec

ADVICE_FILE, ADVICE_JSON, PARETO_PNG, RUNS_DIR = "advice.md", "advice.json", "pareto.png", "runs"
DEFAULT_P99_BOUND_MS = 100.0


def build_parser() -> argparse.ArgumentParser:
    """The topology options of run_topology.py plus the advisor's own, each with its unit and default."""
    import groupings

    p = Parser(
        prog="advise.py",
        description="Run every grouping on one topology in the simulator, rank them by an objective, mark the "
                    "Pareto front of throughput, p99 and replication, and write advice.md, advice.json and "
                    "pareto.png (plus each grouping's run directory under runs/).",
        formatter_class=HelpFormatter,
    )
    p.add_argument("--groupings", default=None, metavar="A,B,...",
                   help=f"the groupings to compare; default: every registered one ({', '.join(groupings.names())})")
    p.add_argument("--objective", default="p99", choices=tuple(advice.OBJECTIVES),
                   help="what ranks first: " + "; ".join(f"{k} = {v}" for k, v in advice.OBJECTIVES.items()))
    p.add_argument("--p99-bound-ms", type=float, default=DEFAULT_P99_BOUND_MS, metavar="MS",
                   help="latency bound of the memory objective: groupings whose p99 is above it rank after the others")
    p.add_argument("--utilization", type=float, default=None, metavar="FRACTION",
                   help="offer this share of what the workers serve together, sum(capacities) / cost-ms, instead of "
                        f"a --rate; default: {DEFAULT_LOAD:g} (and saturating input with --objective throughput)")
    add_topology_options(p)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="simulations run at once, one process each; 1 runs them one after the other in this "
                        "process (no process start-up); default: the machine's cores")
    p.add_argument("--confirm", type=int, default=0, metavar="K",
                   help="rerun the K best groupings on Ray actors and show both engines side by side")
    add_ray_options(p)
    p.add_argument("--out", default=None, metavar="DIR", help="directory to write; default: runs/advice-<UTC time>")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it already holds something")
    p.add_argument("--json", action="store_true",
                   help="print advice.json as one JSON line (the last line of stdout) instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _specs(args: argparse.Namespace) -> list[TopologySpec]:
    """One checked simulator spec per grouping asked for; UsageError or SpecError on the first problem."""
    import groupings
    from topo import runner

    if args.rate is not None and args.utilization is not None:
        raise UsageError("give --rate or --utilization, not both")
    if args.utilization is not None and not 0 < args.utilization <= 10:
        raise UsageError(f"--utilization {args.utilization}: expected a share of capacity in (0, 10]")
    if not 0 < args.p99_bound_ms < math.inf:
        raise UsageError(f"--p99-bound-ms {args.p99_bound_ms}: expected a finite number of milliseconds > 0")
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected at least 1")
    if args.confirm < 0:
        raise UsageError(f"--confirm {args.confirm}: expected a number of groupings >= 0")
    names = groupings.names() if args.groupings is None else [g.strip() for g in args.groupings.split(",")]
    if not names or any(not g for g in names) or len(set(names)) != len(names):
        raise UsageError(f"--groupings '{args.groupings}': expected distinct names separated by commas")
    if args.confirm > len(names):
        raise UsageError(f"--confirm {args.confirm}: only {len(names)} groupings are compared")
    base = spec_from_args(argparse.Namespace(**{**vars(args), "grouping": names[0], "engine": "sim"}))
    if args.utilization is not None:
        if not base.cost_ms > 0:
            raise UsageError("--utilization needs --cost-ms > 0 (a share of what the workers serve)")
        rate = args.utilization * sum(base.capacity_list[: base.workers]) / (base.cost_ms / 1e3)
    elif args.rate is None and args.objective == "throughput":
        rate = None  # throughput at saturation
    else:
        rate = base.rate
    specs = []
    for name in names:
        spec = spec_from_args(argparse.Namespace(**{**vars(args), "grouping": name, "engine": "sim"}))
        spec = dataclasses.replace(spec, rate=rate)
        runner.check(spec)
        specs.append(spec)
    return specs


def _simulate(spec: TopologySpec, directory: str) -> dict:
    """One grouping in the simulator, as run_topology.py --engine sim runs it; its run directory is written."""
    from topo import runner

    prepared = runner.load(spec)
    result = runner.execute(prepared, progress=False, run_id=Path(directory).name)
    Path(directory).mkdir(parents=True)
    runner.write_run(result, Path(directory), plots=False, spec=spec)
    return result.summary


def _run_all(specs: list[TopologySpec], runs: Path, jobs: int, quiet: bool) -> list[dict]:
    """Every spec simulated, `jobs` at a time, with a progress bar; summaries in the order of `specs`."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out: dict[str, dict] = {}
    bar = Progress(TextColumn("simulating {task.fields[last]:12s}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("groupings"), TimeElapsedColumn(), console=Console(stderr=True), transient=True,
                   disable=quiet)
    with bar:
        task = bar.add_task("advise", total=len(specs), last="")
        if jobs == 1 or len(specs) == 1:  # a process of its own would only add its start-up (imports, numba loads)
            done = ((s.grouping, _simulate(s, str(runs / s.grouping))) for s in specs)
        else:
            done = _in_processes(specs, runs, jobs)
        for name, summary in done:
            out[name] = dict(summary, run_dir=str(Path(RUNS_DIR) / name))
            bar.update(task, advance=1, last=name)
    return [out[s.grouping] for s in specs]


def _in_processes(specs: list[TopologySpec], runs: Path, jobs: int) -> Iterator[tuple[str, dict]]:
    """(grouping, summary) of every spec, simulated `jobs` at a time in processes of their own, as they finish."""
    with ProcessPoolExecutor(max_workers=min(jobs, len(specs)), mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(_simulate, s, str(runs / s.grouping)): s.grouping for s in specs}
        for done in as_completed(futures):
            yield futures[done], done.result()


def _confirm(specs: list[TopologySpec], ranking: list[dict], k: int, runs: Path, quiet: bool) -> list[dict]:
    """The top k rerun on the Ray engine (real time, one after the other); their summaries, best first."""
    from topo import runner

    by_name = {s.grouping: s for s in specs}
    out = []
    for entry in ranking[:k]:
        spec = dataclasses.replace(by_name[entry["grouping"]], engine="ray", transit_ms=0.0)
        runner.check(spec)
        runner.begin_engine(spec)  # the first run starts a local Ray, which the others share
        result = runner.execute(runner.load(spec), progress=not quiet, run_id=f"advice-{spec.grouping}")
        directory = runs / f"{spec.grouping}-ray"
        directory.mkdir(parents=True)
        runner.write_run(result, directory, plots=False, spec=spec)
        out.append(dict(result.summary, run_dir=str(Path(RUNS_DIR) / directory.name)))
    return out


def _title(spec: TopologySpec, objective: str) -> str:
    rate = "saturating input" if spec.rate is None else f"{spec.rate:,.0f} tuples/s"
    caps = ",".join(f"{c:g}" for c in spec.capacity_list[: spec.workers])
    return f"{spec.workers} workers ({caps}), {spec.sources} sources, {rate}, objective {objective}"


def write_advice(directory: Path, args: argparse.Namespace, specs: list[TopologySpec], ranking: list[dict],
                 confirmed: list[dict]) -> dict:
    """advice.md, advice.json and pareto.png into `directory`; returns what advice.json holds."""
    title = _title(specs[0], args.objective)
    overloaded = _overloaded(specs[0]) and args.objective != "throughput"
    doc = {"objective": args.objective, "objective_means": advice.OBJECTIVES[args.objective],
           "ranked_by": "throughput" if overloaded else args.objective,
           "note": _overloaded_note(specs[0]) if overloaded else None,
           "p99_bound_ms": args.p99_bound_ms if args.objective == "memory" else None,
           "stream": specs[0].stream, "rate_tps": specs[0].rate, "ranking": ranking}
    if confirmed:
        doc["confirm"] = [{"grouping": r["grouping"], "ray": r} for r in confirmed]
    (directory / ADVICE_JSON).write_text(json.dumps(doc, indent=2, default=float) + "\n")
    advice.pareto_plot(directory / PARETO_PNG, ranking, title)
    best = ranking[0]
    lines = [
        "# Which grouping?", "",
        f"{title}; stream `{specs[0].stream}`.", "",
        f"Objective: **{args.objective}**, {advice.OBJECTIVES[args.objective]}"
        + (f" ({args.p99_bound_ms:g} ms)." if args.objective == "memory" else "."), "",
        f"**{doc['note']}** The most throughput: `{best['grouping']}`, {best['throughput_tps']:,.0f} tuples/s."
        if overloaded else
        f"**Use `{best['grouping']}`**: {best['throughput_tps']:,.0f} tuples/s, "
        f"p99 {best['latency_ms']['p99']:,.1f} ms, replication {best['replication']:.2f}.", "",
        "Ranked in the simulator (`*`: on the Pareto front of throughput, p99 and replication):", "",
        advice.table(ranking),
        f"![Pareto plot]({PARETO_PNG})", "",
    ]
    if confirmed:
        sims = {r["grouping"]: r for r in ranking}
        lines += ["Confirmed on Ray actors (the same spec, in real time):", "",
                  advice.confirm_table([(sims[r["grouping"]], r) for r in confirmed])]
    (directory / ADVICE_FILE).write_text("\n".join(lines))
    return doc


def _capacity_tps(spec: TopologySpec) -> float:
    """Tuples per second the active workers serve together."""
    return sum(spec.capacity_list[: spec.workers]) / (spec.cost_ms / 1e3) if spec.cost_ms > 0 else float("inf")


def _overloaded(spec: TopologySpec) -> bool:
    return advice.overloaded(spec.rate, _capacity_tps(spec))


def _overloaded_note(spec: TopologySpec) -> str:
    return (f"No grouping can carry the offered {spec.rate:,.0f} tuples/s: the workers serve "
            f"{_capacity_tps(spec):,.0f} together, so every p99 only measures how long a run took to drain its "
            "backlog; they are ranked by throughput instead.")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    return guarded("advise.py", _main, argv, "nothing written")


def _main(argv: list[str] | None) -> int:
    from datetime import datetime

    from topo.results.rundir import atomic_run_dir, check_destination

    args = build_parser().parse_args(argv)
    specs = _specs(args)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("runs") / f"advice-{stamp}"
    check_destination(out, args.overwrite)
    with atomic_run_dir(out, overwrite=args.overwrite) as tmp:
        summaries = _run_all(specs, tmp / RUNS_DIR, args.jobs, args.quiet or args.json)
        # where no grouping can carry the rate, every p99 measures the drain: rank by throughput instead
        by = "throughput" if _overloaded(specs[0]) and args.objective != "throughput" else args.objective
        ranking = advice.rank(summaries, by, args.p99_bound_ms)
        confirmed = _confirm(specs, ranking, args.confirm, tmp / RUNS_DIR, args.quiet or args.json)
        doc = write_advice(tmp, args, specs, ranking, confirmed)
    if args.json:
        print(json.dumps(doc, separators=(",", ":"), default=float))
    else:
        print_advice(doc, _title(specs[0], args.objective), out)
    return 0


def print_advice(doc: dict, title: str, out: Path) -> None:
    """The ranking as a terminal table, the Ray confirmation if any, and where the files are."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Which grouping? {title}", title_justify="left")
    for col in ("rank", "grouping", "tuples/s", "p50 ms", "p99 ms", "imbalance", "replication", "exact", "Pareto"):
        table.add_column(col, justify="left" if col == "grouping" else "right")
    for s in doc["ranking"]:
        lat = s["latency_ms"]
        table.add_row(str(s["rank"]), s["grouping"], f"{s['throughput_tps']:,.0f}", f"{lat['p50']:,.1f}",
                      f"{lat['p99']:,.1f}", f"{s['imbalance']:.3f}", f"{s['replication']:.2f}",
                      "yes" if s["exact"] else "NO", "*" if s["pareto"] else "")
    console = Console()
    console.print(table)
    best = doc["ranking"][0]
    if doc.get("note"):
        console.print(f"[bold]{doc['note']}[/bold] The most throughput: [bold]{best['grouping']}[/bold].")
    else:
        console.print(f"Use [bold]{best['grouping']}[/bold] for {doc['objective_means']}.")
    for c in doc.get("confirm", []):
        sim = next(s for s in doc["ranking"] if s["grouping"] == c["grouping"])
        ray = c["ray"]
        console.print(f"  {c['grouping']:10s} sim {sim['throughput_tps']:,.0f} tuples/s, p99 "
                      f"{sim['latency_ms']['p99']:,.1f} ms | Ray {ray['throughput_tps']:,.0f} tuples/s, p99 "
                      f"{ray['latency_ms']['p99']:,.1f} ms, bottleneck {ray['headroom']['bottleneck']}")
    console.print(f"written: {out}/{ADVICE_FILE}, {ADVICE_JSON}, {PARETO_PNG}, {RUNS_DIR}/")
