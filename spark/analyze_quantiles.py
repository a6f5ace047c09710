"""Exact percentiles of a large column in Spark, by histogram and selection.

Spark's exact `percentile` keeps a hash map of every distinct value in one task: minutes for ten million
distinct latencies. Instead, one cheap aggregation buckets the values on a log scale (64 buckets per factor of
two); the cumulative counts of that small histogram say which bucket holds each wanted rank, and only the
values of those few buckets are fetched (a bucket too full to fetch is split again). The answer is the order
statistic itself, interpolated exactly as numpy's default ("linear") method does, so it equals `np.percentile`
on the same values.

A group is (run, kind, key): kind "run" (key ALL) is a whole run; any other kind names a column of the data
(e.g. "worker" or "window") and key is its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

RUN = "run"  # kind of the groups that are whole runs
ALL = -1  # their key
GROUP = ["run", "kind", "key"]
BUCKETS_PER_OCTAVE = 64  # bucket width ~1.1% of the value: a plot-ready CDF and small buckets to fetch
_OFFSET = 100_000  # keeps log buckets of positive values above zero (log2 of a double lies in [-1075, 1024])
FETCH_LIMIT = 250_000  # values of one bucket brought to the driver at most; fuller buckets are split first
SPLIT = 4096  # sub-buckets a too-full bucket is split into
MAX_ROUNDS = 8


def log_bucket(x: Column) -> Column:
    """A bucket id that never decreases as x grows: 64 per octave of |x|, negatives mirrored, zero alone; null for
    null or NaN."""
    magnitude = F.floor(F.log2(F.abs(x)) * BUCKETS_PER_OCTAVE) + _OFFSET
    return F.when(x > 0, magnitude).when(x < 0, -magnitude).when(x == 0, F.lit(0).cast("long"))


def exact_quantiles(data: DataFrame, hist: pd.DataFrame, percents: Sequence[float], value: str = "latency_ms",
                    ) -> pd.DataFrame:
    """Percentiles of `value` in every group of `hist`, numpy-exact.

    `hist` is the collected log-bucket histogram of `data`'s `value`: columns run, kind, key, bucket and n, lo, hi
    (count, min and max of the bucket); `data` has column run, `value` and a column per kind other than "run".
    Returns columns run, kind, key, percent, value.
    """
    hist = hist.sort_values([*GROUP, "bucket"], ignore_index=True)
    hist["end"] = hist.groupby(GROUP)["n"].cumsum()
    counts = hist.groupby(GROUP, as_index=False)["n"].sum()
    targets = _targets(counts, percents)
    ranks = pd.concat([targets[[*GROUP, "rank"]], targets[[*GROUP, "upper_rank"]].rename(columns={"upper_rank":
                                                                                                  "rank"})])
    values = _select(data, value, _locate(hist, ranks.drop_duplicates(ignore_index=True)))
    out = targets.merge(values.rename(columns={"v": "lower"}), on=[*GROUP, "rank"])
    out = out.merge(values.rename(columns={"rank": "upper_rank", "v": "upper"}), on=[*GROUP, "upper_rank"])
    out["value"] = _lerp(out["lower"].to_numpy(), out["upper"].to_numpy(), out["gamma"].to_numpy())
    return out[[*GROUP, "percent", "value"]].sort_values([*GROUP, "percent"], ignore_index=True)


def _targets(counts: pd.DataFrame, percents: Sequence[float]) -> pd.DataFrame:
    """The two order statistics (0-based ranks) each percentile interpolates between, as numpy picks them."""
    n = np.repeat(counts["n"].to_numpy(), len(percents))
    q = np.tile(np.asarray(percents, dtype=float), len(counts))
    virtual = (q / 100) * (n - 1)  # numpy: quantile = q / 100, virtual index = quantile * (n - 1)
    rank = np.floor(virtual).astype(np.int64)
    out = counts.loc[counts.index.repeat(len(percents)), GROUP].reset_index(drop=True)
    out["percent"], out["rank"], out["upper_rank"], out["gamma"] = q, rank, np.minimum(rank + 1, n - 1), virtual - rank
    return out


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's own interpolation (numpy.lib._function_base_impl._lerp), for bit-identical percentiles."""
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def _locate(hist: pd.DataFrame, ranks: pd.DataFrame) -> pd.DataFrame:
    """For each wanted rank, the bucket holding it: its (lo, hi, n) and the rank's offset inside it."""
    # one sorted search over all groups at once: group g's buckets end at global position offsets[g] + end
    groups = hist[GROUP].drop_duplicates(ignore_index=True)
    groups["g"] = np.arange(len(groups))
    hist = hist.merge(groups, on=GROUP).sort_values(["g", "end"], ignore_index=True)
    ranks = ranks.merge(groups, on=GROUP)
    span = int(hist["end"].max()) + 1
    ends = hist["g"].to_numpy(np.int64) * span + hist["end"].to_numpy(np.int64)
    at = np.searchsorted(ends, ranks["g"].to_numpy(np.int64) * span + ranks["rank"].to_numpy(np.int64), side="right")
    hit = hist.iloc[at][[*GROUP, "lo", "hi", "n", "end"]].reset_index(drop=True)
    hit["rank"] = ranks["rank"].to_numpy()
    hit["offset"] = hit["rank"] - (hit["end"] - hit["n"])
    return hit.drop(columns="end")


def _select(data: DataFrame, value: str, located: pd.DataFrame) -> pd.DataFrame:
    """The value at each located rank: read off the bucket's min or max when it must be one, else fetched."""
    located = located.copy()
    located["v"] = np.where((located["offset"] == 0) | (located["lo"] == located["hi"]), located["lo"],
                            np.where(located["offset"] == located["n"] - 1, located["hi"], np.nan))
    interval_of = [*GROUP, "lo", "hi", "n"]
    for round_ in range(MAX_ROUNDS):
        open_ = located[located["v"].isna()]
        if open_.empty:
            break
        intervals = open_[interval_of].drop_duplicates(ignore_index=True)
        intervals["interval"] = np.arange(len(intervals), dtype=np.int32)
        fetch = intervals["n"] <= FETCH_LIMIT
        if round_ == MAX_ROUNDS - 1:
            fetch[:] = True  # a bucket that would not split (values too close to subtract): fetch it whole
        keyed = located.merge(intervals, on=interval_of, how="left")
        if fetch.any():
            values = _matches(data, value, intervals[fetch]).withColumnRenamed(value, "v").toPandas()
            sorted_ = {i: np.sort(v.to_numpy()) for i, v in values.groupby("interval")["v"]}
            pick = keyed["interval"].isin(intervals.loc[fetch, "interval"]) & keyed["v"].isna()
            keyed.loc[pick, "v"] = [sorted_[int(i)][int(o)] for i, o in keyed.loc[pick, ["interval", "offset"]]
                                    .itertuples(index=False)]
        if (~fetch).any():
            keyed = _split(data, value, intervals[~fetch], keyed)
        located = keyed.drop(columns="interval")
    return located[[*GROUP, "rank", "v"]]


def _matches(data: DataFrame, value: str, intervals: pd.DataFrame) -> DataFrame:
    """Rows of `data` inside each interval (a group's [lo, hi]), as (interval, value)."""
    spark = data.sparkSession
    parts = []
    for kind, some in intervals.groupby("kind"):
        columns = {"run": some["run"].astype("int32"), "lo": some["lo"].astype("float64"),
                   "hi": some["hi"].astype("float64"), "interval": some["interval"].astype("int32")}
        on = ["run"]
        if kind != RUN:
            columns[kind] = some["key"].astype("int32")
            on.append(kind)
        # an equi-join per kind keeps each row's comparisons to the few intervals of its own group
        table = F.broadcast(spark.createDataFrame(pd.DataFrame(columns)))
        inside = F.col(value).between(F.col("lo"), F.col("hi"))
        parts.append(data.join(table, on).where(inside).select("interval", value))
    return reduce(DataFrame.unionByName, parts)


def _split(data: DataFrame, value: str, intervals: pd.DataFrame, keyed: pd.DataFrame) -> pd.DataFrame:
    """Narrow the ranks that fall in too-full intervals to one of SPLIT equal sub-intervals each."""
    bounds = data.sparkSession.createDataFrame(pd.DataFrame({
        "interval": intervals["interval"].astype("int32"), "lo_": intervals["lo"].astype("float64"),
        "hi_": intervals["hi"].astype("float64")}))
    sub = F.floor((F.col(value) - F.col("lo_")) / (F.col("hi_") - F.col("lo_")) * SPLIT)  # monotone in the value
    hist = (_matches(data, value, intervals).join(F.broadcast(bounds), "interval")
            .groupBy("interval", sub.alias("sub"))
            .agg(F.count("*").alias("n2"), F.min(value).alias("lo2"), F.max(value).alias("hi2"))
            .toPandas().sort_values(["interval", "sub"], ignore_index=True))
    hist["start"] = hist.groupby("interval")["n2"].cumsum() - hist["n2"]
    for idx in keyed.index[keyed["interval"].isin(intervals["interval"]) & keyed["v"].isna()]:
        part = hist[hist["interval"] == keyed.at[idx, "interval"]]
        offset = keyed.at[idx, "offset"]
        row = part.iloc[int(np.searchsorted(part["start"].to_numpy(), offset, side="right")) - 1]
        new_offset = offset - row["start"]
        keyed.loc[idx, ["lo", "hi", "n", "offset"]] = [row["lo2"], row["hi2"], row["n2"], new_offset]
        if new_offset == 0 or row["lo2"] == row["hi2"]:
            keyed.at[idx, "v"] = row["lo2"]
        elif new_offset == row["n2"] - 1:
            keyed.at[idx, "v"] = row["hi2"]
    return keyed
