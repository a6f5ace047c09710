"""`analyze_runs.py`: check the run directories, run the Spark analysis, write the report directory.

Every user mistake ends in one line on stderr and exit status 2, found before Spark starts when it can be, and
the output directory is written whole or not at all.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from spark.analyze_inputs import AnalysisError
from spark.session import first_line
from topo.spec import SpecError

EXIT_USAGE = 2
EXIT_ENVIRONMENT = 1
PROG = "analyze_runs.py"


class UsageError(Exception):
    """A problem with the command line; printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse prints usage plus a message; the contract is one clear line
        raise UsageError(message)


def seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"'{text}': must be a positive number of seconds")
    return value


def default_out(root: str | Path = "analysis") -> Path:
    """`analysis/<UTC timestamp>`: unique per second, sortable by time."""
    return Path(root) / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")


def build_parser() -> argparse.ArgumentParser:
    """Options, each with its unit and default."""
    p = _Parser(
        prog=PROG,
        description="Compare runs of run_topology.py with Spark: exact latency percentiles (overall, per worker, "
                    "per time window), throughput, load, imbalance and utilization over time; writes tables (CSV, "
                    "Markdown), PNG figures and report.md, and prints the comparison table.",
        epilog="Writes into --out: report.md (tables and figures together), runs.csv/runs.md (one row per run), "
               "workers.csv, windows.csv, window_load.csv, utilization.csv, latency_cdf.csv, PNG figures and "
               "analysis.json. Needs Java 17+ for Spark. A bad run directory (missing, from a crashed run, with a "
               "malformed log or summary) is reported in one line with exit status 2, before Spark starts, and "
               "nothing is written.",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="run directories written by run_topology.py (sim or ray engine); a directory holding runs "
                        "(such as runs/) stands for all the runs directly inside it")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="directory to write the report into; default: analysis/<UTC time>")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it already holds files")
    p.add_argument("--window", type=seconds, default=None, metavar="SECONDS",
                   help="length of the time windows for throughput, latency, load and imbalance over time; default: "
                        "for each run, a round length giving about 50 windows")
    p.add_argument("--master", default=None, metavar="URL",
                   help="Spark master, as for spark-submit (e.g. spark://host:7077; the run directories must then "
                        "be readable at the same paths on every executor); default: local[*], all local cores")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    try:
        return _main(argv)
    except (UsageError, AnalysisError, SpecError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing written", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    from spark.analyze import window_plan
    from spark.analyze_inputs import load_runs
    from topo.rundir import atomic_run_dir, check_destination

    args = build_parser().parse_args(argv)
    runs = load_runs(args.run_dirs)  # every input problem surfaces here, before Spark starts
    window_plan(runs, args.window)  # and a --window giving too many windows
    out = Path(args.out) if args.out else default_out()
    check_destination(out, args.overwrite)
    analysis = _run_spark(args.master, runs, args.window)
    if analysis is None:
        return EXIT_ENVIRONMENT
    from spark.analyze_report import print_summary, write_analysis

    with atomic_run_dir(out, overwrite=args.overwrite) as tmp:
        write_analysis(analysis, tmp)
    print_summary(analysis, out)
    return 0


def _run_spark(master: str | None, runs, window_s: float | None):
    """The analysis, or None after one line on stderr when Spark cannot start or fails. Spark's own console output
    goes to a log file, kept (and named in that line) only when something failed."""
    fd, log = tempfile.mkstemp(prefix="analyze_runs-spark-", suffix=".log")
    os.close(fd)
    try:
        return _analyze(master, runs, window_s, log)
    except _SparkFailed as exc:
        note = f" (Spark's log: {log})" if os.path.getsize(log) else ""
        print(f"{PROG}: error: {exc}{note}", file=sys.stderr)
        if note:
            log = ""  # kept for the user
        return None
    finally:
        if log:
            os.unlink(log)


class _SparkFailed(Exception):
    """Spark could not start or a job failed (the message is the user's one line)."""


def _analyze(master: str | None, runs, window_s: float | None, log: str):
    from spark.session import SparkUnavailable, get_session, stderr_to

    try:
        with stderr_to(log):
            spark = get_session(master, app="analyze-runs")
    except SparkUnavailable as exc:
        raise _SparkFailed(str(exc)) from None
    except Exception as exc:  # a bad --master URL or a cluster that cannot be reached, as Spark words it
        raise _SparkFailed(f"Spark did not start (--master {master or 'local[*]'}): {first_line(exc)}") from None
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from spark.analyze import analyze

    try:
        with stderr_to(log):
            return analyze(spark, runs, window_s)
    except (PySparkException, Py4JError) as exc:
        raise _SparkFailed(f"Spark failed: {first_line(exc)}") from None
