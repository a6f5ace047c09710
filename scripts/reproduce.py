#!/usr/bin/env python3
"""Reproduce headline experiments of the papers: `--list` names them, NAME runs one into results/NAME/, `--all`
runs every one, and `--check` reruns the deterministic ones in quick mode against their committed numbers and says
why any differ. A full run is refused from a checkout whose code has uncommitted changes (`--allow-changes`)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

import experiments  # noqa: E402
from experiments import provenance  # noqa: E402


def run_one(exp: experiments.Experiment, parent: Path, quick: bool, at: str | None = None) -> Path:
    """Run `exp` into parent/NAME/, which appears whole (with numbers.json and COMMAND) or not at all. `at`: the
    commit of the code this process loaded (taken when it started; `provenance.commit()` by default)."""
    out = parent / exp.name
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{exp.name}.", dir=parent))
    try:
        clock, at = time.perf_counter(), at or provenance.commit()
        numbers = exp.run(tmp, quick)
        (tmp / "numbers.json").write_text(json.dumps(numbers, indent=2, default=float) + "\n")
        (tmp / "COMMAND").write_text(provenance.command_text(exp.name, quick, parent, time.perf_counter() - clock,
                                                                  at))
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _progress():
    """The bar over the experiments being run, on stderr, gone once they are done."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("experiments"), TimeElapsedColumn(), console=Console(stderr=True), transient=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("names", nargs="*", metavar="NAME", help="experiments to run, in order (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments and what each reproduces")
    from experiments.quoted import wall_times

    took = sum(t for t in wall_times().values() if t is not None)
    p.add_argument("--all", action="store_true",
                   help=f"run every experiment (full mode: about {took / 3600:.1f} hours on 2 cores, the sum of the "
                        "wall times that results/*/COMMAND record, most of it ALBIC's MILPs with every key group "
                        "movable)")
    p.add_argument("--quick", action="store_true", help="reduced size: seconds per experiment instead of minutes")
    p.add_argument("--out", default="results", help="parent directory of each experiment's folder (default: results)")
    p.add_argument("--check", action="store_true",
                   help="run the named experiments (default: every deterministic one, about 4 minutes on 2 cores) in "
                        "quick mode in a scratch folder and compare their numbers with those committed under "
                        "results/quick/; exit status 1 if any differ")
    p.add_argument("--update", action="store_true",
                   help="with --check: record the fresh quick numbers as the committed ones instead of comparing")
    p.add_argument("--allow-changes", action="store_true",
                   help="run in full even though the checkout's code has uncommitted changes (refused without it: a "
                        "full result must come from a commit); its COMMAND then says COMMIT+changes, which no "
                        "checkout can reproduce")
    args = p.parse_args(argv)
    if args.update and not args.check:
        print("reproduce.py: error: --update goes with --check", file=sys.stderr)
        return 2
    if args.check:
        return _check(args.names, args.update)
    if args.list or not (args.names or args.all):
        for name in experiments.names():
            e = experiments.get(name)
            print(f"{name:22s} {e.paper}\n{'':22s} claim: {e.claim}")
        return 0
    if args.all and args.names:
        print("reproduce.py: error: give experiment names or --all, not both", file=sys.stderr)
        return 2
    try:  # every name is checked before anything runs, so a typo writes nothing
        chosen = [experiments.get(n) for n in (experiments.names() if args.all else args.names)]
    except ValueError as exc:
        print(f"reproduce.py: error: {exc}", file=sys.stderr)
        return 2

    loaded = provenance.commit()  # the experiments' code is what this process imported at its start
    if not args.quick and loaded.endswith("+changes"):
        if not args.allow_changes:
            print(f"reproduce.py: error: the code has uncommitted changes ({loaded}): a full run's results must come "
                  "from a commit; commit them, or pass --allow-changes", file=sys.stderr)
            return 2
        print(f"reproduce.py: WARNING: running in full from uncommitted changes ({loaded}): no checkout can "
              "reproduce these results", file=sys.stderr)

    from rich.console import Console
    from rich.table import Table

    done: list[tuple[str, float, Path]] = []
    bar = _progress()
    with bar:
        task = bar.add_task("", total=len(chosen))
        for exp in chosen:
            bar.update(task, description=f"{exp.name}{' (quick)' if args.quick else ''}")
            clock = time.perf_counter()
            out = run_one(exp, Path(args.out), args.quick, loaded)
            done.append((exp.name, time.perf_counter() - clock, out))
            bar.advance(task)
    if len(done) == 1:
        name, seconds, out = done[0]
        print(f"{name}: {experiments.get(name).paper}")
        for table in sorted(out.glob("*.md")):
            print(table.read_text())
        print(f"written to {out}/ in {seconds:.1f} s")
        return 0
    summary = Table(title=f"{len(done)} experiments{' (quick)' if args.quick else ''}")
    for col in ("experiment", "seconds", "tables (markdown)"):
        summary.add_column(col)
    for name, seconds, out in done:
        summary.add_row(name, f"{seconds:.1f}", ", ".join(str(t) for t in sorted(out.glob("*.md"))))
    Console().print(summary)
    return 0


def _check(names: list[str], update: bool) -> int:
    """`--check`: each deterministic experiment's quick numbers against the committed ones (or, with `update`,
    recorded as them)."""
    try:
        chosen = [experiments.get(n) for n in names] if names else [
            experiments.get(n) for n in experiments.names() if experiments.get(n).deterministic]
    except ValueError as exc:
        print(f"reproduce.py: error: {exc}", file=sys.stderr)
        return 2
    timed = [e.name for e in chosen if not e.deterministic]
    if timed:
        print(f"reproduce.py: error: {', '.join(timed)} run(s) Ray actors, so their numbers depend on timing: "
              "--check takes deterministic experiments only", file=sys.stderr)
        return 2
    from rich.console import Console
    from rich.table import Table

    rows, failed = [], []
    bar = _progress()
    with bar, tempfile.TemporaryDirectory(prefix="reproduce-check-") as scratch:
        task = bar.add_task("", total=len(chosen))
        for exp in chosen:
            bar.update(task, description=f"{exp.name} (quick)")
            clock = time.perf_counter()
            out = Path(scratch) / exp.name
            out.mkdir()
            numbers = exp.run(out, True)
            seconds = time.perf_counter() - clock
            if update:
                verdict = f"recorded in {provenance.committed_path(exp.name).relative_to(provenance.ROOT)}"
                provenance.record(exp.name, numbers)
            else:
                diff = provenance.check(exp.name, numbers, exp.volatile)
                verdict = "same"
                if diff:
                    failed.append((exp.name, provenance.cause(exp.name)))
                    verdict = f"DIFFERS ({failed[-1][1]}): " + "; ".join(diff)
            rows.append((exp.name, f"{seconds:.1f}", verdict))
            bar.advance(task)
    table = Table(title=f"{len(rows)} experiments in quick mode against results/quick/")
    for col in ("experiment", "seconds", "numbers"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    if failed:
        print(f"{len(failed)} of {len(rows)} differ from their committed quick numbers:", file=sys.stderr)
        for name, why in failed:
            print(f"  {name}: {why}", file=sys.stderr)
        print("a change meant to move them (of the code, or of the versions): rerun the experiment in full, then "
              "`--check --update NAME` records its quick numbers", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader stopped early (`--list | head`): no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
