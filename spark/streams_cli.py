"""`make_stream.py`: precompute a stream dataset with Spark (zipf, drift, words, or the user's own logs).

Every user mistake ends in one line on stderr and exit status 2 before anything is written; the cheap checks
run before Spark starts. Spark's own console output goes to a log file that is kept (and named) only when the
job fails.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from spark.cli import JobFailed, Parser, UsageError, log_note, run_main, spark_log
from spark.session import first_line
from spark.streams_arrivals import MODES, Arrivals
from topo.data.streamspec import StreamError
from topo.spec import SpecError

PROG = "make_stream.py"


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults after every option that has one, epilogs printed as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        # None and False defaults say nothing the help text does not already say
        if action.default is None or action.default is False or action.required:
            return action.help or ""
        return super()._get_help_string(action)


def _whole(text: str) -> int:
    """A count such as 2000000, 2e6 or 2_000_000."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value.is_integer() or value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number >= 0")
    return int(value)


EPILOG = """\
output: a directory of part-NNNNN.parquet files (columns seq int64, key string, optional ts float64 seconds,
optional value) and _meta.json (generator, parameters, seed, messages, distinct keys, p1, top keys, arrivals,
partitions); load it with topo.data.dataset.load_stream(DIR) or run_topology.py --stream DIR. The same seed gives
the same stream for any --partitions and any --master.

exit status: 0 done, 2 a usage or input error (one line on stderr, nothing written), 1 Spark could not start
or the job failed (the message names Spark's log file).
"""


def _common(parser: argparse.ArgumentParser) -> None:
    """Options every subcommand takes."""
    g = parser.add_argument_group("output and Spark")
    g.add_argument("--out", required=True, metavar="DIR",
                   help="dataset directory to write, whole or not at all; with a cluster --master it must be on a "
                        "filesystem shared by the driver and every executor (each task writes its own part there)")
    g.add_argument("--overwrite", action="store_true", help="replace --out if it already holds files")
    g.add_argument("--partitions", type=_whole, default=None, metavar="N",
                   help="number of part files (Spark tasks); default: a multiple of the cores with at most about "
                        "4M messages per part")
    g.add_argument("--master", default=None, metavar="URL",
                   help="Spark master as for spark-submit (local[4], spark://host:7077, ...); default local[*]; "
                        "executors need numpy, pyarrow, numba and this project's topo package installed")
    g.add_argument("--seed", type=_whole, default=0, metavar="S",
                   help="seed of the key sampling and of the arrival times")
    a = parser.add_argument_group("arrival times (the ts column)")
    a.add_argument("--arrivals", default="none", choices=MODES,
                   help="none: no ts column (the topology takes messages as fast as it can); rate: message seq at "
                        "seq/RATE s; poisson: a Poisson process of RATE per second; bursts: Poisson with RATE "
                        "outside bursts and RATE*F inside them")
    a.add_argument("--rate", type=float, default=None, metavar="TPS",
                   help="messages per second for --arrivals rate, poisson and bursts (outside bursts)")
    a.add_argument("--burst-every", type=float, default=None, metavar="SECONDS",
                   help="bursts: length of one period; each period ends with a burst, so bursts start at "
                        "EVERY-LENGTH, 2*EVERY-LENGTH, ... seconds")
    a.add_argument("--burst-length", type=float, default=None, metavar="SECONDS",
                   help="bursts: duration of each burst (shorter than --burst-every)")
    a.add_argument("--burst-factor", type=float, default=None, metavar="F",
                   help="bursts: the rate inside a burst is RATE*F")


def build_parser() -> argparse.ArgumentParser:
    """The subcommands and their options, each with its unit and default."""
    p = Parser(prog=PROG, formatter_class=_Formatter, epilog=EPILOG,
                description="Precompute a stream dataset with Spark: synthetic Zipf or drifting keys, words with "
                            "real frequencies, or your own logs.")
    sub = p.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND", parser_class=Parser)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, formatter_class=_Formatter,
                              epilog=EPILOG)

    zipf = add("zipf", "keys k0..k{KEYS-1} drawn from a bounded Zipf law (the inline spec zipf:z=..,keys=..)")
    drift = add("drift", "Zipf keys whose hot set changes every --shift-every messages (inline spec drift:...)")
    for q in (zipf, drift):
        q.add_argument("--z", type=float, default=1.2, help="Zipf exponent (skew); 0 = uniform")
        q.add_argument("--keys", type=_whole, default=100_000, metavar="K", help="number of possible keys")
        q.add_argument("--messages", type=_whole, required=True, metavar="N", help="number of messages")
    drift.add_argument("--shift-every", type=_whole, required=True, metavar="N",
                       help="messages per interval; the ranking of the keys changes between intervals")
    drift.add_argument("--drift-mode", default="rotate", choices=("rotate", "permute"),
                       help="rotate: the ranking shifts by a seeded offset (exactly the inline drift: spec); "
                            "permute: a new seeded random permutation of the keys per interval")
    words = add("words", "real words drawn with their frequencies in a language (the wordfreq package)")
    words.add_argument("--messages", type=_whole, required=True, metavar="N", help="number of messages")
    words.add_argument("--lang", default="en", help="language code, e.g. en, de, fr, es, zh")
    words.add_argument("--wordlist", default="best", choices=("small", "large", "best"),
                       help="wordfreq list: small (about 30k words), large (about 300k), best (the largest there "
                            "is for the language)")
    words.add_argument("--keys", type=_whole, default=None, metavar="K",
                       help="use the K most frequent words (their frequencies renormalised); default: the whole list")
    imp = add("import", "your own logs (CSV, TSV or JSON lines), read and ordered by Spark")
    imp.add_argument("paths", nargs="+", metavar="PATH", help="input files or directories, read in this order")
    imp.add_argument("--format", default="csv", choices=("csv", "tsv", "json"),
                     help="csv/tsv: delimited text, one record per line (quoted fields may hold the delimiter but not "
                          "line breaks); json: JSON lines (one object per line)")
    imp.add_argument("--key-col", default=None, metavar="NAME",
                     help="column holding each message's key (without a header also a position 0, 1, ...)")
    imp.add_argument("--text-col", default=None, metavar="NAME",
                     help="instead of --key-col: split this text column into lowercase words, one message per "
                          "word (like the papers' Twitter and Wikipedia streams)")
    imp.add_argument("--ts-col", default=None, metavar="NAME",
                     help="column of arrival times: numbers (seconds) or timestamps (ISO 8601, UTC unless "
                          "they say otherwise); messages are ordered by it (ties keep the input order) and ts "
                          "counts seconds from the first message; default: input order, no ts unless --arrivals")
    imp.add_argument("--value-col", default=None, metavar="NAME", help="column copied as each message's value")
    imp.add_argument("--header", action=argparse.BooleanOptionalAction, default=True,
                     help="csv/tsv: the first line names the columns")
    imp.add_argument("--drop-nulls", action="store_true",
                     help="skip rows whose key (or time) is null or empty instead of refusing the input")
    for q in (zipf, drift, words, imp):
        _common(q)
    return p


def _job(args: argparse.Namespace, arrivals: Arrivals) -> Callable:
    """Check the subcommand's own options (no Spark yet) and return the job, a function of the session."""
    from spark.streams import generate
    from spark.streams_keys import PermutedDrift, SpecKeys, word_keys
    from topo.data.streams import parse_stream_spec

    common = {"out": args.out, "partitions": args.partitions, "arrivals": arrivals, "overwrite": args.overwrite}
    if args.command in ("zipf", "drift"):
        text = f"{args.command}:z={args.z!r},keys={args.keys},messages={args.messages},seed={args.seed}"
        if args.command == "drift":
            text += f",shift_every={args.shift_every}"
        try:
            spec = parse_stream_spec(text)
        except StreamError as err:
            # name the option, not the inline spec the options were turned into
            problem = str(err).split("': ", 1)[-1]
            name = problem.split(" ", 1)[0]
            raise UsageError(f"--{name.replace('_', '-')}{problem[len(name):]}") from None
        if args.command == "drift" and args.drift_mode == "permute":
            keys = PermutedDrift(float(args.z), args.keys, args.shift_every, args.seed)
        else:
            keys = SpecKeys(spec)
        return lambda spark: generate(spark, keys, spec.messages, **common)
    if args.command == "words":
        if args.messages < 1:
            raise UsageError(f"--messages {args.messages}: must be at least 1")
        keys = word_keys(args.lang, args.wordlist, args.keys, args.seed)
        return lambda spark: generate(spark, keys, args.messages, **common)
    from spark.streams_import import ImportSource, import_stream

    src = ImportSource(tuple(args.paths), args.format, args.key_col, args.ts_col, args.text_col, args.value_col,
                       args.header, args.drop_nulls).check()
    if args.ts_col is not None and arrivals.mode != "none":
        raise UsageError("give --ts-col or --arrivals, not both: imported times are the arrival times")
    return lambda spark: import_stream(spark, src, seed=args.seed, **common)


def _start_spark(master: str | None, log: str):
    """The Spark session, its JVM's console output (warnings, progress bars) sent to `log`."""
    from spark.session import SparkUnavailable, get_session
    from topo.errors import stderr_to

    try:
        with stderr_to(log):
            return get_session(master, app="make_stream")
    except SparkUnavailable as err:
        raise JobFailed(str(err)) from None
    except Exception as err:
        raise JobFailed(f"Spark did not start: {first_line(err)}{log_note(log)}") from None


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    return run_main(PROG, _main, argv, (SpecError, StreamError))


def _main(argv: list[str] | None) -> int:
    from spark.streams import check_partitions
    from topo.results.rundir import check_destination

    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    check_destination(Path(args.out), args.overwrite)
    arrivals = Arrivals(args.arrivals, args.rate, args.burst_every, args.burst_length, args.burst_factor,
                        args.seed).check()
    check_partitions(args.partitions)
    job = _job(args, arrivals)
    with spark_log("make_stream-spark-") as log:
        spark = _start_spark(args.master, log)
        try:
            meta = job(spark)
        except (UsageError, SpecError, StreamError):
            raise
        except Exception as err:
            raise JobFailed(f"the Spark job failed: {first_line(err)}{log_note(log)}") from None
    seconds = time.perf_counter() - started
    print(f"{PROG}: wrote {args.out}: {meta['messages']} messages, {meta['distinct_keys']} distinct keys, "
          f"p1={meta['p1']:.4f}, {meta['partitions']} parts, {seconds:.1f} s")
    return 0
