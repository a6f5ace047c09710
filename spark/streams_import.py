"""Spark job that imports the user's own logs (CSV, TSV, JSON lines) as a stream dataset.

Spark reads and checks every file (missing or mistyped columns, null keys, unparseable times: each one a one-line
`StreamError` naming the file), orders the messages by time when a time column is given (ties, and streams
without time, keep the input order: file by file as given, then byte offset, then line), splits a text column
into lowercase words when asked, range-partitions the ordered messages and writes one part per partition with
seq numbers that continue from the partitions before it.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spark.streams import (
    check_partitions,
    check_parts,
    default_partitions,
    finish_meta,
    part_name,
    ship_by_value,
    write_meta,
)
from spark.streams_arrivals import Arrivals
from topo.data.streamspec import StreamError
from topo.results.rundir import atomic_run_dir, check_destination

FORMATS = ("csv", "tsv", "json")
CORRUPT = "_corrupt_record"
WORD_SPLIT = r"[^\p{L}\p{N}']+"  # words are runs of letters, digits and apostrophes (don't, l'homme)
ORDER = ["_file", "_path", "_block", "_row", "_pos"]  # input order: path as given, file, split, line, word
TOP_KEYS = 10


@dataclass(frozen=True)
class ImportSource:
    """Which files to read and which of their columns become key, time and value."""

    paths: tuple[str, ...]
    format: str = "csv"
    key_col: str | None = None
    ts_col: str | None = None
    text_col: str | None = None
    value_col: str | None = None
    header: bool = True
    drop_nulls: bool = False

    def check(self) -> ImportSource:
        """This source, or StreamError for inconsistent options or a path that is missing or empty."""
        if self.format not in FORMATS:
            raise StreamError(f"--format '{self.format}': unknown (expected one of: {', '.join(FORMATS)})")
        if (self.key_col is None) == (self.text_col is None):
            raise StreamError("import needs exactly one of --key-col NAME and --text-col NAME")
        if not self.paths:
            raise StreamError("import needs at least one PATH")
        for path in self.paths:
            check_local_path(path)
        return self


def check_local_path(path: str) -> None:
    """StreamError if a local path (not a URL or a glob, Spark checks those) is missing or holds nothing."""
    scheme = urlparse(path).scheme
    if (scheme and scheme != "file" and len(scheme) > 1) or any(c in path for c in "*?["):
        return
    local = Path(unquote(urlparse(path).path) if scheme == "file" else path)
    if not local.exists():
        raise StreamError(f"{path}: no such file or directory")
    if local.is_file() and local.stat().st_size == 0:
        raise StreamError(f"{path}: empty file")
    if local.is_dir() and not any(p.is_file() and not p.name.startswith((".", "_")) for p in local.rglob("*")):
        raise StreamError(f"{path}: directory holds no files")


def _quoted(name: str):
    """A column by its exact name, dots and all."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _resolve(df, name: str, path: str, option: str, header: bool) -> str:
    """The column of `df` that `name` means (a position 0, 1, ... also works without a header)."""
    if name in df.columns:
        return name
    data = [c for c in df.columns if c != CORRUPT]
    if not header and name.isdigit() and int(name) < len(data):
        return data[int(name)]
    raise StreamError(f"{path}: {option} column '{name}' is missing (columns: {', '.join(data) or 'none'})")


def _key_expr(df, col: str, path: str, option: str):
    """The column as strings; StreamError for nested values that are no key."""
    from pyspark.sql import types as T

    dtype = df.schema[col].dataType
    if not isinstance(dtype, (T.StringType, T.NumericType, T.BooleanType)):
        raise StreamError(f"{path}: {option} column '{col}' holds {dtype.simpleString()} values, "
                          f"expected strings or numbers")
    return _quoted(col).cast("string")


def _ts_exprs(df, col: str, path: str):
    """(raw as string, as seconds if numeric, as seconds if a timestamp): which one holds decides later."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    dtype, c = df.schema[col].dataType, _quoted(col)
    none = F.lit(None).cast("double")
    if isinstance(dtype, T.NumericType):
        return c.cast("string"), c.cast("double"), none
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return c.cast("string"), none, F.unix_micros(c.cast("timestamp")) / 1e6
    if isinstance(dtype, T.StringType):
        return c, c.try_cast("double"), F.unix_micros(c.try_cast("timestamp")) / 1e6
    raise StreamError(f"{path}: --ts-col column '{col}' holds {dtype.simpleString()} values, "
                      f"expected numbers (seconds) or timestamps")


def _read_one(spark, src: ImportSource, index: int, path: str):
    """One PATH as rows of (_file, _path, _block, _row, _key, _ts_raw, _ts_num, _ts_time, _value, _bad)."""
    from pyspark.sql import functions as F

    if src.format == "json":
        df = spark.read.options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT).json(path)
        if df.columns == [CORRUPT]:
            raise StreamError(f"{path}: no line is a JSON object (expected JSON lines: one object per line)")
    else:
        sep = "," if src.format == "csv" else "\t"
        df = spark.read.options(header=src.header, sep=sep, inferSchema=False, mode="PERMISSIVE").csv(path)
    if not [c for c in df.columns if c != CORRUPT]:
        raise StreamError(f"{path}: no rows")
    if src.text_col is not None:
        key = _key_expr(df, _resolve(df, src.text_col, path, "--text-col", src.header), path, "--text-col")
    else:
        key = _key_expr(df, _resolve(df, src.key_col, path, "--key-col", src.header), path, "--key-col")
    none = F.lit(None).cast("double")
    raw, num, time = F.lit(None).cast("string"), none, none
    if src.ts_col is not None:
        raw, num, time = _ts_exprs(df, _resolve(df, src.ts_col, path, "--ts-col", src.header), path)
    value = F.lit(None)
    if src.value_col is not None:
        value = _quoted(_resolve(df, src.value_col, path, "--value-col", src.header))
    bad = _quoted(CORRUPT) if CORRUPT in df.columns else F.lit(None).cast("string")
    # monotonically_increasing_id right above the scan: it grows along each file split, i.e. input order
    return df.select(
        F.lit(index).alias("_file"), F.col("_metadata.file_path").alias("_path"),
        F.col("_metadata.file_block_start").alias("_block"), F.monotonically_increasing_id().alias("_row"),
        key.alias("_key"), raw.alias("_ts_raw"), num.alias("_ts_num"), time.alias("_ts_time"),
        value.alias("_value"), bad.alias("_bad"),
    )


def _union(parts: list):
    """All PATHs as one DataFrame; values of different types across files become strings."""
    types = {p.schema["_value"].dataType for p in parts}
    if len(types) > 1:
        parts = [p.withColumn("_value", p["_value"].cast("string")) for p in parts]
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def _file_name(src: ImportSource, index: int, uri: str) -> str:
    """How errors name a file: the PATH as given when it is one file, else the file inside it."""
    path = src.paths[index]
    if os.path.isfile(path):
        return path
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _check_rows(src: ImportSource, df) -> tuple[dict[int, str], int, int]:
    """Per-file checks in one Spark pass: (time kind per PATH index, rows, rows to drop); StreamError if bad."""
    from pyspark.sql import functions as F

    key_null = F.col("_key").isNull() | (F.trim("_key") == "")
    ts_null = F.col("_ts_raw").isNull() | (F.trim("_ts_raw") == "")
    has_ts = src.ts_col is not None
    not_num = ~ts_null & F.col("_ts_num").isNull()
    not_time = ~ts_null & F.col("_ts_time").isNull()
    stats = (
        df.groupBy("_file", "_path")
        .agg(
            F.count("*").alias("rows"),
            F.sum(F.col("_bad").isNotNull().cast("long")).alias("bad"),
            F.first(F.col("_bad"), ignorenulls=True).alias("bad_example"),
            F.sum(key_null.cast("long")).alias("null_keys"),
            F.sum((ts_null & F.lit(has_ts)).cast("long")).alias("null_ts"),
            F.sum((key_null | (ts_null & F.lit(has_ts))).cast("long")).alias("drop"),
            F.sum(not_num.cast("long")).alias("not_num"),
            F.sum((F.isnan("_ts_num") | (F.abs("_ts_num") == float("inf"))).cast("long")).alias("not_finite"),
            F.sum(not_time.cast("long")).alias("not_time"),
            F.first(F.when(not_num & not_time, F.col("_ts_raw")), ignorenulls=True).alias("ts_example"),
        )
        .orderBy("_file", "_path")
        .collect()
    )
    seen = {r["_file"] for r in stats}
    for index, path in enumerate(src.paths):
        if index not in seen:
            raise StreamError(f"{path}: no rows" + (" (only a header line)" if src.header and src.format != "json"
                                                    else ""))
    key_option = "--text-col" if src.text_col is not None else "--key-col"
    key_name = src.text_col if src.text_col is not None else src.key_col
    for r in stats:
        name = _file_name(src, r["_file"], r["_path"])
        if r["bad"]:
            example = str(r["bad_example"]).strip()[:40]
            raise StreamError(f"{name}: {r['bad']} lines are not JSON objects (first: '{example}')")
        if r["null_keys"] and not src.drop_nulls:
            raise StreamError(f"{name}: {key_option} column '{key_name}' has {r['null_keys']} null or empty "
                              f"values (pass --drop-nulls to skip those rows)")
        if r["null_ts"] and not src.drop_nulls:
            raise StreamError(f"{name}: --ts-col column '{src.ts_col}' has {r['null_ts']} null or empty "
                              f"values (pass --drop-nulls to skip those rows)")
    kinds: dict[int, str] = {}
    if has_ts:
        for index in range(len(src.paths)):
            rows = [r for r in stats if r["_file"] == index]
            if all(r["not_num"] == 0 for r in rows):
                kinds[index] = "num"
                for r in (r for r in rows if r["not_finite"]):  # NaN would order nowhere and stall a run
                    raise StreamError(f"{_file_name(src, index, r['_path'])}: --ts-col column '{src.ts_col}' has "
                                      f"{r['not_finite']} NaN or infinite values")
            elif all(r["not_time"] == 0 for r in rows):
                kinds[index] = "time"
            else:
                r = next((r for r in rows if r["ts_example"] is not None), rows[0])
                name = _file_name(src, index, r["_path"])
                if r["ts_example"] is None:
                    raise StreamError(f"{name}: --ts-col column '{src.ts_col}' mixes numbers and timestamps")
                raise StreamError(
                    f"{name}: --ts-col column '{src.ts_col}' is neither numeric (seconds) nor a timestamp "
                    f"({r['not_num']} values such as '{str(r['ts_example'])[:40]}' do not parse)"
                )
    rows = sum(r["rows"] for r in stats)
    dropped = sum(r["drop"] for r in stats) if src.drop_nulls else 0
    if rows - dropped == 0:
        raise StreamError(f"{', '.join(src.paths)}: no rows left after dropping {dropped} with null values")
    return kinds, rows, dropped


@dataclass(frozen=True)
class PartWriter:
    """mapInArrow function: writes the (ordered) rows of one partition as one part, seq from its offset."""

    out_dir: str
    offsets: dict
    ts0: float | None
    arrivals: Arrivals
    value: bool

    def __call__(self, batches):
        from pyspark import TaskContext

        pid = TaskContext.get().partitionId()
        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        rows = sum(t.num_rows for t in tables)
        if rows:
            data = pa.concat_tables(tables)
            lo = int(self.offsets[pid])
            cols = {"seq": pa.array(np.arange(lo, lo + rows, dtype=np.int64)), "key": data.column("_key")}
            if self.ts0 is not None:
                cols["ts"] = pa.array(data.column("_ts").to_numpy() - self.ts0, type=pa.float64())
            elif self.arrivals.mode != "none":
                cols["ts"] = pa.array(self.arrivals.times(lo, lo + rows), type=pa.float64())
            if self.value:
                cols["value"] = data.column("_value")
            final = os.path.join(self.out_dir, part_name(pid))
            tmp = os.path.join(self.out_dir, f".{part_name(pid)}.{uuid.uuid4().hex[:8]}.tmp")
            pq.write_table(pa.table(cols), tmp)
            os.replace(tmp, final)
        yield pa.RecordBatch.from_pydict({"part": [pid], "rows": [rows]})


def _messages(src: ImportSource, df, kinds: dict[int, str]):
    """One row per message: (_key, _ts, _value) plus the input-order columns, nulls dropped if asked."""
    from pyspark.sql import functions as F

    if src.drop_nulls:
        keep = F.col("_key").isNotNull() & (F.trim("_key") != "")
        if src.ts_col is not None:
            keep &= F.col("_ts_raw").isNotNull() & (F.trim("_ts_raw") != "")
        df = df.filter(keep)
    numeric = [i for i, kind in kinds.items() if kind == "num"]
    ts = F.when(F.col("_file").isin(numeric), F.col("_ts_num")).otherwise(F.col("_ts_time"))
    df = df.select(*ORDER[:-1], "_key", ts.alias("_ts"), "_value")
    if src.text_col is None:
        return df.withColumn("_pos", F.lit(0))
    words = df.select(*ORDER[:-1], "_ts", "_value",
                      F.posexplode(F.split(F.lower("_key"), WORD_SPLIT)).alias("_pos", "_word"))
    # apostrophes only count inside a word ('quoted' -> quoted)
    words = words.withColumn("_key", F.regexp_replace("_word", "^'+|'+$", "")).drop("_word")
    return words.filter(F.col("_key") != "")


def _key_stats(messages) -> dict:
    """messages, distinct_keys, p1 and top_keys (ties in key order, as `topo.data.streams.key_stats`), by Spark."""
    from pyspark.sql import functions as F

    counts = messages.groupBy("_key").count()
    total = counts.agg(F.count("*").alias("distinct"), F.sum("count").alias("messages")).first()
    if not total["messages"]:
        return {"messages": 0}
    top = counts.orderBy(F.desc("count"), F.asc("_key")).limit(TOP_KEYS).collect()
    return {
        "messages": int(total["messages"]),
        "distinct_keys": int(total["distinct"]),
        "p1": float(top[0]["count"]) / int(total["messages"]),
        "top_keys": [[r["_key"], int(r["count"])] for r in top],
    }


def _offsets(messages) -> tuple[dict[int, int], float | None]:
    """First seq of each partition of the ordered messages, and the earliest time (None without times)."""
    from pyspark.sql import functions as F

    per_part = messages.groupBy(F.spark_partition_id().alias("p")).agg(
        F.count("*").alias("n"), F.min("_ts").alias("t0")
    ).collect()
    offsets, seen = {}, 0
    for r in sorted(per_part, key=lambda r: r["p"]):
        offsets[int(r["p"])] = seen
        seen += int(r["n"])
    times = [float(r["t0"]) for r in per_part if r["t0"] is not None]
    return offsets, (min(times) if times else None)


def import_stream(
    spark,
    src: ImportSource,
    out: str | os.PathLike,
    partitions: int | None = None,
    arrivals: Arrivals | None = None,
    seed: int = 0,
    overwrite: bool = False,
) -> dict:
    """Import the files of `src` as a dataset at `out` (nothing is written on error); returns its metadata."""
    from pyspark import StorageLevel
    from pyspark.errors import AnalysisException

    out = Path(out).absolute()  # executors must not depend on the driver's working directory
    check_destination(out, overwrite)
    src = src.check()
    arrivals = (arrivals or Arrivals()).check()
    check_partitions(partitions)
    if src.ts_col is not None and arrivals.mode != "none":
        raise StreamError("give --ts-col or --arrivals, not both: imported times are the arrival times")
    ship_by_value()
    parts = []
    for index, path in enumerate(src.paths):
        try:
            parts.append(_read_one(spark, src, index, path))
        except AnalysisException as err:
            raise StreamError(f"{path}: cannot read ({str(err).splitlines()[0][:160]})") from None
    rows_df = _union(parts).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        kinds, rows, dropped = _check_rows(src, rows_df)
        has_ts = src.ts_col is not None
        order = (["_ts"] if has_ts else []) + ORDER
        n_parts = int(partitions or default_partitions(spark, rows - dropped))
        messages = _messages(src, rows_df, kinds).repartitionByRange(n_parts, *order).sortWithinPartitions(*order)
        messages = messages.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = _key_stats(messages)
            if not stats["messages"]:
                raise StreamError(f"{', '.join(src.paths)}: --text-col '{src.text_col}' holds no words")
            offsets, ts0 = _offsets(messages)
            meta = {"generator": "import",
                    "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(src).items()},
                    "seed": int(seed), "rows_read": int(rows), "rows_dropped": int(dropped), **stats}
            if has_ts:
                meta["ts_origin"] = ts0  # the original time of the first message; ts counts seconds from it
            times = {"mode": "ts-col", "column": src.ts_col, "unit": "seconds since the first message"}
            with atomic_run_dir(out, overwrite=overwrite) as tmp:
                writer = PartWriter(str(tmp), offsets, ts0, arrivals, src.value_col is not None)
                cols = ["_key", "_ts"] + (["_value"] if src.value_col is not None else [])
                written = messages.select(*cols).mapInArrow(writer, "part long, rows long").collect()
                if sum(r["rows"] for r in written) != meta["messages"]:
                    raise RuntimeError(f"{out}: the tasks wrote {sum(r['rows'] for r in written)} messages, "
                                       f"expected {meta['messages']}")
                files = sum(1 for r in written if r["rows"])
                check_parts(tmp, files)
                meta = finish_meta(meta, times if has_ts else arrivals.meta(), files)
                write_meta(tmp, meta)
        finally:
            messages.unpersist()
    finally:
        rows_df.unpersist()
    return meta
