"""The run directories an analysis reads, checked before Spark starts.

Every problem a user can cause (a path that is not a run, a run that crashed half-way, a log with a missing,
mistyped or null column, a malformed summary) is found here with pyarrow, in a second or two, and reported as
one line naming the file. The Spark job can then trust its inputs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from topo.results.rundir import LATENCY_COLUMNS, LATENCY_FILE, SUMMARY_FILE, TIMESERIES_COLUMNS, TIMESERIES_FILE

UNREAD = {"seq", "source"}  # the analysis never reads these: their type is checked, their values are not
# the summary keys the analysis reads (a subset of topo.results.rundir.SUMMARY_KEYS)
SUMMARY_KEYS = ("grouping", "engine", "workers", "tuples_processed", "latency_ms", "imbalance", "replication",
                "per_worker", "exact")


class AnalysisError(ValueError):
    """A problem with the runs given to the analysis: one line naming the file and what is wrong."""


@dataclass(frozen=True)
class RunInput:
    """One checked run directory: its label in tables and plots, where it is and its summary."""

    name: str
    path: Path
    summary: dict
    rows: int  # latency records (= tuples processed)
    first_arrival_s: float  # the run's time origin, as in the summary
    last_finish_s: float

    @property
    def latency_path(self) -> Path:
        """The per-tuple latency log."""
        return self.path / LATENCY_FILE

    @property
    def timeseries_path(self) -> Path:
        """The per-worker time series."""
        return self.path / TIMESERIES_FILE

    @property
    def capacities(self) -> dict[int, float]:
        """Worker id -> capacity, from the summary."""
        return {int(w["id"]): float(w["capacity"]) for w in self.summary["per_worker"]}


def load_runs(paths: list[str | Path]) -> list[RunInput]:
    """Check every run directory (a directory holding runs stands for all of them) and name the runs uniquely."""
    if not paths:
        raise AnalysisError("no run directory given")
    dirs: list[Path] = []
    for given in paths:
        for run_dir in expand(Path(given)):
            if run_dir.resolve() not in {d.resolve() for d in dirs}:  # the same run named twice counts once
                dirs.append(run_dir)
    names = unique_names(dirs)
    return [check_run(d, name) for d, name in zip(dirs, names, strict=True)]


def expand(path: Path) -> list[Path]:
    """The run directories `path` stands for: itself, or the finished runs directly inside it."""
    if not path.exists():
        raise AnalysisError(f"{path}: no such directory")
    if not path.is_dir():
        raise AnalysisError(f"{path}: not a directory (expected a run directory written by run_topology.py)")
    if is_temporary(path):
        raise AnalysisError(f"{path}: temporary directory of a crashed or unfinished run "
                            "(finished runs are renamed into place); rerun it or delete it")
    if (path / SUMMARY_FILE).exists() or (path / LATENCY_FILE).exists():
        return [path]
    # a folder of runs (e.g. runs/): its visible subdirectories; hidden ones are in flight or crashed
    children = sorted(c for c in path.iterdir() if c.is_dir() and not c.name.startswith("."))
    if any((c / SUMMARY_FILE).exists() for c in children):
        return children  # each is checked as a run: a crashed one among them is named
    raise AnalysisError(f"{path}: no {SUMMARY_FILE} (not a run directory, or its run did not finish)")


def is_temporary(path: Path) -> bool:
    """True for the hidden `.name.xxxx.tmp` directory a run writes into before renaming it into place."""
    name = path.resolve().name
    return name.startswith(".") and (name.endswith(".tmp") or name.endswith(".old"))


def unique_names(dirs: list[Path]) -> list[str]:
    """Directory names as run labels; a name shared by several runs gets its parent in front."""
    names = [d.resolve().name for d in dirs]
    out = []
    for d, name in zip(dirs, names, strict=True):
        label = name if names.count(name) == 1 else f"{d.resolve().parent.name}/{name}"
        while label in out:
            label += "'"
        out.append(label)
    return out


def check_run(path: Path, name: str) -> RunInput:
    """A RunInput for a run directory whose summary and logs are all readable and consistent."""
    for required in (SUMMARY_FILE, LATENCY_FILE, TIMESERIES_FILE):
        if not (path / required).is_file():
            raise AnalysisError(f"{path}: no {required} (the run crashed or did not finish)")
    summary = read_summary(path / SUMMARY_FILE)
    ids = sorted(int(w["id"]) for w in summary["per_worker"])
    rows, ranges = check_parquet(path / LATENCY_FILE, LATENCY_COLUMNS, ids, nonempty=True)
    if rows != summary["tuples_processed"]:
        raise AnalysisError(f"{path / LATENCY_FILE}: {rows:,} rows but {SUMMARY_FILE} says "
                            f"{summary['tuples_processed']:,} tuples were processed (the files are from different runs "
                            "or one was cut short)")
    check_parquet(path / TIMESERIES_FILE, TIMESERIES_COLUMNS, ids, nonempty=False)
    return RunInput(name=name, path=path, summary=summary, rows=rows, first_arrival_s=ranges["arrival_s"][0],
                    last_finish_s=ranges["finish_s"][1])


def read_summary(path: Path) -> dict:
    """The run summary, with the keys and types the analysis relies on checked."""
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise AnalysisError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AnalysisError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(summary, dict):
        raise AnalysisError(f"{path}: expected a JSON object, found {type(summary).__name__}")
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    if missing:
        raise AnalysisError(f"{path}: missing key(s) {', '.join(missing)} (not a run summary?)")
    if not _is_count(summary["tuples_processed"]):
        raise AnalysisError(f"{path}: tuples_processed must be a non-negative integer")
    if not isinstance(summary["latency_ms"], dict):
        raise AnalysisError(f"{path}: latency_ms must be an object of percentiles")
    for key in ("imbalance", "replication"):
        if not _is_number(summary[key]):
            raise AnalysisError(f"{path}: {key} must be a number")
    workers = summary["per_worker"]
    if not isinstance(workers, list) or not workers:
        raise AnalysisError(f"{path}: per_worker must be a non-empty list")
    for i, w in enumerate(workers):
        if not isinstance(w, dict) or not _is_count(w.get("id")) or not _is_count(w.get("tuples")):
            raise AnalysisError(f"{path}: per_worker[{i}] needs an integer id and tuples")
        if not _is_number(w.get("capacity")) or not w["capacity"] > 0:
            raise AnalysisError(f"{path}: per_worker[{i}].capacity must be a positive number")
    if len({w["id"] for w in workers}) != len(workers):
        raise AnalysisError(f"{path}: per_worker has repeated worker ids")
    return summary


def check_parquet(path: Path, columns: dict[str, str], worker_ids: list[int], nonempty: bool,
                  ) -> tuple[int, dict[str, tuple[float, float]]]:
    """Rows of a log whose columns exist with the right kind, hold no nulls (nor NaN or infinity) and name only
    known workers, and the (min, max) of each floating-point column."""
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise AnalysisError(f"{path}: not a readable Parquet file ({_first_line(exc)})") from None
    schema = pf.schema_arrow
    for column, kind in columns.items():
        if column not in schema.names:
            raise AnalysisError(f"{path}: no column '{column}' (has: {', '.join(schema.names)})")
        dtype = schema.field(column).type
        if not _has_kind(dtype, kind):
            wanted = "an integer" if kind == "int" else "a floating-point number"
            raise AnalysisError(f"{path}: column '{column}' is {dtype}, expected {wanted}")
    rows = pf.metadata.num_rows
    ranges: dict[str, tuple[float, float]] = {}
    if nonempty and rows == 0:
        raise AnalysisError(f"{path}: no rows (an empty log)")
    for column, kind in columns.items():
        if column in UNREAD:
            continue
        # one column at a time keeps memory at one column of the log, even for tens of millions of rows
        try:
            values = pf.read(columns=[column]).column(0)
        except (pa.ArrowException, OSError) as exc:
            raise AnalysisError(f"{path}: cannot read column '{column}' ({_first_line(exc)})") from None
        if values.null_count:
            raise AnalysisError(f"{path}: column '{column}' has {values.null_count:,} null values")
        if kind == "float" and rows:
            bad = rows - pc.sum(pc.is_finite(values)).as_py()
            if bad:
                raise AnalysisError(f"{path}: column '{column}' has {bad:,} NaN or infinite values")
            extremes = pc.min_max(values)
            ranges[column] = (extremes["min"].as_py(), extremes["max"].as_py())
            if ranges[column][0] < 0:  # times, latencies and utilizations start at zero in every engine's logs
                raise AnalysisError(f"{path}: column '{column}' has negative values (the lowest is "
                                    f"{ranges[column][0]:g})")
        if column == "worker" and rows:
            unknown = set(pc.unique(values).to_pylist()) - set(worker_ids)
            if unknown:
                raise AnalysisError(f"{path}: worker id(s) {sorted(unknown)[:5]} are not in {SUMMARY_FILE}'s "
                                    f"per_worker (ids {worker_ids[0]}..{worker_ids[-1]})")
    return rows, ranges


def _has_kind(dtype: pa.DataType, kind: str) -> bool:
    return pa.types.is_integer(dtype) if kind == "int" else pa.types.is_floating(dtype)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_count(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
