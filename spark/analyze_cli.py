"""`analyze_runs.py`: check the run directories, run the Spark analysis, write the report directory.

Every user mistake ends in one line on stderr and exit status 2, found before Spark starts when it can be, and
the output directory is written whole or not at all.
"""

from __future__ import annotations

import argparse
import math
from datetime import UTC, datetime
from pathlib import Path

from spark.analyze_inputs import AnalysisError
from spark.cli import JobFailed, Parser, log_note, run_main, spark_log
from spark.session import first_line
from topo.spec import SpecError

PROG = "analyze_runs.py"


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
    return Path(root) / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def build_parser() -> argparse.ArgumentParser:
    """Options, each with its unit and default."""
    p = Parser(
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
    return run_main(PROG, _main, argv, (AnalysisError, SpecError))


def _main(argv: list[str] | None) -> int:
    from spark.analyze import window_plan
    from spark.analyze_inputs import load_runs
    from topo.results.rundir import atomic_run_dir, check_destination

    args = build_parser().parse_args(argv)
    runs = load_runs(args.run_dirs)  # every input problem surfaces here, before Spark starts
    window_plan(runs, args.window)  # and a --window giving too many windows
    out = Path(args.out) if args.out else default_out()
    check_destination(out, args.overwrite)
    with spark_log("analyze_runs-spark-") as log:  # Spark's console output, kept and named only on failure
        analysis = _analyze(args.master, runs, args.window, log)
    from spark.analyze_report import print_summary, write_analysis

    with atomic_run_dir(out, overwrite=args.overwrite) as tmp:
        write_analysis(analysis, tmp)
    print_summary(analysis, out)
    return 0


def _analyze(master: str | None, runs, window_s: float | None, log: str):
    """The analysis, with Spark's console output sent to `log`; JobFailed when Spark cannot start or fails."""
    from spark.session import SparkUnavailable, get_session
    from topo.errors import stderr_to

    try:
        with stderr_to(log):
            spark = get_session(master, app="analyze-runs")
    except SparkUnavailable as exc:
        raise JobFailed(f"{exc}{log_note(log)}") from None
    except Exception as exc:  # a bad --master URL or a cluster that cannot be reached, as Spark words it
        where = master or "local[*]"
        raise JobFailed(f"Spark did not start (--master {where}): {first_line(exc)}{log_note(log)}") from None
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from spark.analyze import analyze

    try:
        with stderr_to(log):
            return analyze(spark, runs, window_s)
    except (PySparkException, Py4JError) as exc:
        raise JobFailed(f"Spark failed: {first_line(exc)}{log_note(log)}") from None
