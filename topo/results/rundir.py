"""The run directory: what it holds (file names, columns, summary keys) and how it is written (whole or not at all).

Every writer (the engines' outputs, the command line) and every reader (the dashboards, the Spark analysis, the
tests) takes the names from here. A run writes into a hidden temporary directory beside its destination and
renames it into place at the end, so a crash, a bad input or Ctrl-C never leaves a half-written run for the
analytics to pick up.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from topo.spec import SpecError

SUMMARY_FILE = "summary.json"  # the run summary (docs/design.md)
SPEC_FILE = "spec.json"  # every option of the run, so that it can be repeated
LATENCY_FILE = "latency.parquet"  # one row per processed tuple
TIMESERIES_FILE = "timeseries.parquet"  # one row per (sample, worker)

# column -> kind ("int" or "float") of each table, as the engines write them
LATENCY_COLUMNS = {"seq": "int", "source": "int", "worker": "int", "arrival_s": "float", "finish_s": "float",
                   "latency_ms": "float"}
TIMESERIES_COLUMNS = {"t_s": "float", "worker": "int", "queue_len": "int", "utilization": "float",
                      "processed": "int"}

# the summary keys whose meaning stays, in their order; then the keys of latency_ms and of each per_worker row
SUMMARY_KEYS = ("grouping", "engine", "workers", "sources", "tuples_in", "tuples_processed", "duration_s",
                "throughput_tps", "latency_ms", "imbalance", "replication", "per_worker", "exact")
LATENCY_KEYS = ("mean", "p50", "p95", "p99", "max")
WORKER_KEYS = ("id", "capacity", "tuples", "distinct_keys", "busy_fraction")


def default_run_dir(grouping: str, engine: str, root: str | Path = "runs") -> Path:
    """`runs/<grouping>-<engine>-<UTC timestamp>`: unique per second, sortable by time."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{grouping}-{engine}-{stamp}"


def check_destination(out: Path, overwrite: bool) -> None:
    """Refuse (before any work is done) a destination that would lose an earlier run or cannot be made."""
    out = Path(out)
    try:
        if out.exists() and not out.is_dir():
            raise SpecError(f"--out {out}: exists and is not a directory")
        if out.is_dir() and any(out.iterdir()) and not overwrite:
            raise SpecError(f"--out {out}: directory is not empty (pass --overwrite to replace it)")
    except OSError as exc:
        raise SpecError(f"--out {out}: cannot read it ({exc.strerror or exc})") from None
    # the temporary directory goes beside `out`: the nearest existing folder above it must take one
    base = Path(os.path.abspath(out)).parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise SpecError(f"--out {out}: {base} is not a directory")
    try:
        # a real attempt: os.access says yes to root on a read-only mount or in /proc
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=base))
    except OSError as exc:
        raise SpecError(f"--out {out}: cannot write into {base} ({exc.strerror or exc})") from None


@contextmanager
def atomic_run_dir(out: Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory; on success it replaces `out`, on any error it is removed."""
    out = Path(out)
    check_destination(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            # move the old run aside first so the swap is two renames, never a partial directory
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: Path, obj: dict) -> None:
    """Pretty JSON with a trailing newline (summaries are read by people as well as tools)."""
    path.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")
