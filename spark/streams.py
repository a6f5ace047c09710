"""Spark job that precomputes generated stream datasets (zipf, drift, words) in the format of `topo.data.dataset`.

The driver cuts [0, messages) into one seq range per part and Spark runs one task per range. A task samples its
range with the seeded block sampler (so any number of parts, on any machines, gives the same stream), writes its
own `part-NNNNN.parquet` with pyarrow into the output directory and returns its key counts; Spark reduces those
counts, from which the driver writes `_meta.json`. On a cluster the output directory must be on a filesystem
every executor can write to. The output is written whole or not at all (`topo.results.rundir.atomic_run_dir`).
"""

from __future__ import annotations

import json
import math
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spark.streams_arrivals import Arrivals
from spark.streams_keys import PermutedDrift, SpecKeys, WordKeys
from topo.data.dataset import FORMAT_VERSION, META_FILE
from topo.data.streams import key_stats
from topo.data.streamspec import StreamError
from topo.results.rundir import atomic_run_dir, check_destination

PART_MESSAGES = 1 << 22  # default parts hold at most about this many messages (a few hundred MB in a task)
KeyGenerator = SpecKeys | PermutedDrift | WordKeys


def ship_by_value() -> None:
    """Send this package's executor code inside the tasks, so executors need `topo` but not `spark` installed."""
    from pyspark import cloudpickle

    for name in ("spark.streams", "spark.streams_keys", "spark.streams_arrivals", "spark.streams_import"):
        if name in sys.modules:
            cloudpickle.register_pickle_by_value(sys.modules[name])


def part_name(index: int) -> str:
    """File name of part `index`."""
    return f"part-{index:05d}.parquet"


def write_part(table: pa.Table, out_dir: str, index: int) -> None:
    """Write one part under a temporary name and rename it, so a retried task never leaves half a file."""
    final = os.path.join(out_dir, part_name(index))
    tmp = os.path.join(out_dir, f".{part_name(index)}.{uuid.uuid4().hex[:8]}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, final)


def compact(ids: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(present ids ascending, index of each message's id in them, count of each present id)."""
    if size <= 4 * ids.size:
        counts = np.bincount(ids, minlength=size)
        present = np.flatnonzero(counts)
        dense = np.zeros(size, dtype=np.int64)
        dense[present] = np.arange(present.size)
        return present, dense[ids], counts[present]
    # few messages over many possible keys: sorting beats a table of `size` entries
    present, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    return present, inverse.astype(np.int64), counts


def merge_counts(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple:
    """Sum two sparse (ids, counts) key counts."""
    ids, inverse = np.unique(np.concatenate([a[0], b[0]]), return_inverse=True)
    counts = np.zeros(ids.size, dtype=np.int64)
    np.add.at(counts, inverse, np.concatenate([a[1], b[1]]))
    return ids, counts


@dataclass(frozen=True)
class PartTask:
    """What every task needs: the key generator, the arrival model and the directory parts go to."""

    keys: KeyGenerator
    arrivals: Arrivals
    out_dir: str

    def __call__(self, part: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Sample, write part `index` = messages [lo, hi), and return its sparse key counts."""
        index, lo, hi = part
        present, inverse, counts = compact(self.keys.sample(lo, hi), self.keys.size)
        # one string per distinct key; Arrow's take spreads them without a Python object per message
        key = pa.array(self.keys.names(present), type=pa.string()).take(pa.array(inverse, type=pa.int64()))
        columns = {"seq": pa.array(np.arange(lo, hi, dtype=np.int64)), "key": key}
        ts = self.arrivals.times(lo, hi)
        if ts is not None:
            columns["ts"] = pa.array(ts, type=pa.float64())
        write_part(pa.table(columns), self.out_dir, index)
        return present, counts


def seq_ranges(messages: int, partitions: int) -> list[tuple[int, int, int]]:
    """(index, lo, hi) of `partitions` nearly equal seq ranges covering [0, messages)."""
    cuts = [messages * i // partitions for i in range(partitions + 1)]
    return [(i, cuts[i], cuts[i + 1]) for i in range(partitions)]


def default_partitions(spark, messages: int) -> int:
    """A multiple of the cluster's cores with parts of at most PART_MESSAGES messages."""
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    return cores * max(1, math.ceil(messages / (cores * PART_MESSAGES)))


def check_partitions(partitions: int | None) -> None:
    """StreamError unless partitions is None (automatic) or a whole number >= 1."""
    if partitions is not None and (int(partitions) != partitions or partitions < 1):
        raise StreamError(f"--partitions {partitions}: must be a whole number >= 1")


def check_parts(out_dir: Path, expected: int) -> None:
    """RuntimeError unless the driver sees every part the tasks wrote (it would not on an unshared disk)."""
    found = len(list(Path(out_dir).glob("part-*.parquet")))
    if found != expected:
        raise RuntimeError(f"{out_dir}: {found} of {expected} part files arrived (on a cluster, --out must be on "
                           f"a filesystem shared by the driver and the executors)")


def finish_meta(meta: dict, arrivals: dict, partitions: int) -> dict:
    """`meta` plus the fields every dataset shares (arrival settings, parts, format), as plain JSON values."""
    meta = {**meta, "arrivals": arrivals, "partitions": int(partitions), "format_version": FORMAT_VERSION}
    return json.loads(json.dumps(meta, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


def write_meta(out_dir: Path, meta: dict) -> None:
    """Write `_meta.json` (pretty, trailing newline: people read it too)."""
    (Path(out_dir) / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")


def generate(
    spark,
    keys: KeyGenerator,
    messages: int,
    out: str | os.PathLike,
    partitions: int | None = None,
    arrivals: Arrivals | None = None,
    overwrite: bool = False,
) -> dict:
    """Write `messages` messages of `keys` (with `arrivals`) as a dataset at `out`; returns its metadata."""
    arrivals = (arrivals or Arrivals()).check()
    check_partitions(partitions)
    if int(messages) != messages or messages < 1:
        raise StreamError(f"--messages {messages}: must be a whole number >= 1")
    out = Path(out).absolute()  # executors must not depend on the driver's working directory
    check_destination(out, overwrite)
    parts = int(partitions or default_partitions(spark, messages))
    ship_by_value()
    with atomic_run_dir(out, overwrite=overwrite) as tmp:
        task = PartTask(keys, arrivals, str(tmp))
        ranges = seq_ranges(int(messages), parts)
        ids, counts = spark.sparkContext.parallelize(ranges, parts).map(task).treeReduce(merge_counts)
        names = keys.names(ids)
        order = np.argsort(names, kind="stable")  # key_stats breaks ties in sorted key order, as Stream does
        stats = key_stats(counts[order], names[order])
        if stats["messages"] != messages:
            raise RuntimeError(f"{out}: the tasks sampled {stats['messages']} messages, expected {messages}")
        check_parts(tmp, parts)
        meta = finish_meta({**keys.meta(), **stats}, arrivals.meta(), parts)
        write_meta(tmp, meta)
    return meta
