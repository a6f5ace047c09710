"""Inline stream specs, the seeded sampler, Stream objects and dataset directories."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupings.hashing import hash_keys
from topo.data.dataset import load_stream, write_dataset
from topo.data.streams import (
    BLOCK,
    Stream,
    StreamError,
    key_names,
    parse_stream_spec,
    sample_key_ids,
)
from topo.data.streamspec import epoch_offsets
from topo.data.zipf import zipf_pmf

ZIPF = {"z": 1.1, "keys": 5000, "seed": 42}
DRIFT = {"z": 1.1, "keys": 5000, "shift_every": 30_000, "seed": 42}
N = 2 * BLOCK + 777  # spans three blocks, so splits cut blocks in the middle


@pytest.fixture(scope="module")
def whole() -> dict[str, np.ndarray]:
    return {"zipf": sample_key_ids("zipf", ZIPF, 0, N), "drift": sample_key_ids("drift", DRIFT, 0, N)}


# ---------------------------------------------------------------- sampler


@settings(max_examples=40, deadline=None)
@given(
    generator=st.sampled_from(["zipf", "drift"]),
    cuts=st.lists(st.integers(min_value=0, max_value=N), max_size=6),
)
def test_any_split_concatenates_to_the_same_stream(generator: str, cuts: list[int], whole) -> None:
    params = ZIPF if generator == "zipf" else DRIFT
    bounds = [0, *sorted(cuts), N]
    parts = [sample_key_ids(generator, params, a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    assert np.array_equal(np.concatenate(parts), whole[generator])


def test_sampler_output_type_and_range(whole) -> None:
    ids = whole["zipf"]
    assert ids.dtype == np.int64 and ids.shape == (N,)
    assert ids.min() >= 0 and ids.max() < ZIPF["keys"]
    assert sample_key_ids("zipf", ZIPF, 10, 10).size == 0


def test_seed_changes_the_stream_and_the_hot_key() -> None:
    a = sample_key_ids("zipf", {**ZIPF, "seed": 1}, 0, 50_000)
    b = sample_key_ids("zipf", {**ZIPF, "seed": 2}, 0, 50_000)
    assert not np.array_equal(a, b)
    assert np.bincount(a).argmax() != np.bincount(b).argmax()


def test_drift_with_one_epoch_is_zipf() -> None:
    drift = sample_key_ids("drift", {**ZIPF, "shift_every": 10**9}, 0, 70_000)
    assert np.array_equal(drift, sample_key_ids("zipf", ZIPF, 0, 70_000))


def test_drift_rotates_the_hot_key_and_keeps_the_rank_law(whole) -> None:
    ids, every, keys = whole["drift"], DRIFT["shift_every"], DRIFT["keys"]
    epochs = np.arange(N) // every
    hot = [np.bincount(ids[epochs == e], minlength=keys).argmax() for e in range(epochs.max() + 1)]
    assert len(set(hot)) == len(hot)
    offsets = epoch_offsets(DRIFT["seed"], keys, np.arange(epochs.max() + 1))
    assert list(hot) == list(offsets)
    ranks = (ids - offsets[epochs]) % keys
    pmf = zipf_pmf(DRIFT["z"], keys)
    for e in range(2):
        freq = np.bincount(ranks[epochs == e], minlength=keys) / every
        sd = np.sqrt(pmf[:3] * (1 - pmf[:3]) / every)
        assert np.all(np.abs(freq[:3] - pmf[:3]) < 5 * sd)


def test_sampler_rejects_bad_input() -> None:
    with pytest.raises(StreamError):
        sample_key_ids("pareto", ZIPF, 0, 10)
    with pytest.raises(StreamError):
        sample_key_ids("zipf", ZIPF, 5, 4)
    with pytest.raises(StreamError):
        sample_key_ids("drift", ZIPF, 0, 4)


def test_key_names() -> None:
    assert key_names(np.array([0, 7, 123])).tolist() == ["k0", "k7", "k123"]


# ---------------------------------------------------------------- spec parsing


def test_parse_spec_with_defaults_and_canonical_text() -> None:
    spec = parse_stream_spec("zipf:z=1.2,keys=1e5,messages=1000000")
    assert spec.generator == "zipf" and spec.messages == 1_000_000
    assert spec.params == {"z": 1.2, "keys": 100_000, "seed": 0}
    assert spec.text == "zipf:z=1.2,keys=100000,messages=1000000,seed=0"
    drift = parse_stream_spec(" drift: z=1 , keys=10, messages=20, shift_every=5, seed=7")
    assert drift.params == {"z": 1.0, "keys": 10, "shift_every": 5, "seed": 7}
    assert parse_stream_spec(drift.text) == drift


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("zipf:z=abc", "z must be a number"),
        ("pareto:z=1,keys=5,messages=5", "unknown generator 'pareto'"),
        ("zipf:z=1,keys=5", "missing parameter messages"),
        ("drift:z=1,keys=5,messages=5", "missing parameter shift_every"),
        ("zipf:z=1,keys=5,messages=5,colour=red", "unknown parameter 'colour'"),
        ("zipf:z=1,keys=5,messages=5,shift_every=3", "unknown parameter 'shift_every'"),
        ("zipf:z=1,keys=5,messages=5,z=2", "'z' is given twice"),
        ("zipf:z=1,keys,messages=5", "'keys' is not name=value"),
        ("zipf:z=1,keys=0,messages=5", "keys must be at least 1"),
        ("zipf:z=1,keys=2.5,messages=5", "keys must be a whole number"),
        ("zipf:z=1,keys=5,messages=0", "messages must be at least 1"),
        ("zipf:z=-0.5,keys=5,messages=5", "z must be at least 0"),
        ("zipf:z=inf,keys=5,messages=5", "z must be a finite number"),
        ("zipf:z=1,keys=5,messages=5,seed=-1", "seed must be at least 0"),
        ("drift:z=1,keys=5,messages=5,shift_every=0", "shift_every must be at least 1"),
    ],
)
def test_parse_errors_name_the_problem_on_one_line(spec: str, problem: str) -> None:
    with pytest.raises(StreamError) as err:
        parse_stream_spec(spec)
    message = str(err.value)
    assert message.startswith(f"stream '{spec}': ")
    assert problem in message and "\n" not in message


def test_stream_error_is_a_value_error() -> None:
    assert issubclass(StreamError, ValueError)


# ---------------------------------------------------------------- Stream


@pytest.fixture(scope="module")
def small() -> Stream:
    return load_stream("zipf:z=1.2,keys=2000,messages=50000,seed=7")


def test_inline_stream_arrays_and_meta(small: Stream) -> None:
    spec = parse_stream_spec("zipf:z=1.2,keys=2000,messages=50000,seed=7")
    raw = spec.sample()
    assert small.messages == 50_000 and small.key_id.dtype == np.int64 and small.key_hash.dtype == np.uint64
    assert np.array_equal(small.keys(), key_names(raw))
    assert list(small.key_table) == sorted(small.key_table)
    assert small.distinct_keys == np.unique(raw).size == small.meta["distinct_keys"]
    assert np.array_equal(small.key_hash, hash_keys(small.keys()))
    assert small.ts is None
    meta = small.meta
    assert meta["generator"] == "zipf" and meta["seed"] == 7 and meta["messages"] == 50_000
    assert meta["params"] == {"z": 1.2, "keys": 2000, "seed": 7}
    counts = np.bincount(raw)
    assert meta["p1"] == counts.max() / 50_000
    assert meta["top_keys"][0] == [f"k{counts.argmax()}", int(counts.max())]
    assert len(meta["top_keys"]) == 10
    assert [c for _, c in meta["top_keys"]] == sorted((c for _, c in meta["top_keys"]), reverse=True)
    assert 0 < meta["p1_exact"] < 1


def test_slice_is_a_stream_of_its_own(small: Stream) -> None:
    part = small.slice(1000, 1500)
    assert part.messages == 500
    assert np.array_equal(part.keys(), small.keys()[1000:1500])
    assert np.array_equal(part.key_hash, small.key_hash[1000:1500])
    assert part.distinct_keys == np.unique(small.key_id[1000:1500]).size == part.key_id.max() + 1
    assert part.meta["slice"] == [1000, 1500]
    assert part.slice(100, 200).meta["slice"] == [1100, 1200]


def test_load_stream_rejects_unknown_things(tmp_path: Path) -> None:
    with pytest.raises(StreamError, match="unknown generator"):
        load_stream("uniform:keys=5,messages=5")
    with pytest.raises(StreamError, match="no such dataset directory"):
        load_stream(str(tmp_path / "absent"))


# ---------------------------------------------------------------- datasets


def _same(a: Stream, b: Stream) -> bool:
    return (
        np.array_equal(a.key_id, b.key_id)
        and np.array_equal(a.key_hash, b.key_hash)
        and np.array_equal(a.key_table, b.key_table)
        and all(a.meta[k] == b.meta[k] for k in ("messages", "distinct_keys", "p1", "top_keys"))
    )


@pytest.mark.parametrize("partitions", [1, 3])
def test_dataset_round_trip(small: Stream, tmp_path: Path, partitions: int) -> None:
    out = write_dataset(small, tmp_path / "ds", partitions=partitions)
    assert sorted(p.name for p in out.iterdir()) == ["_meta.json"] + [
        f"part-{i:05d}.parquet" for i in range(partitions)
    ]
    back = load_stream(str(out))
    assert _same(small, back)
    assert back.meta["generator"] == "zipf" and back.meta["partitions"] == partitions
    assert json.loads((out / "_meta.json").read_text())["p1"] == small.meta["p1"]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_writing_a_spec_part_by_part_gives_the_same_stream(tmp_path: Path) -> None:
    spec = "drift:z=1.4,keys=3000,messages=150001,shift_every=40000,seed=9"
    back = load_stream(write_dataset(spec, tmp_path / "ds", partitions=4))
    assert _same(load_stream(spec), back)
    assert back.meta["spec"] == spec


def test_round_trip_with_times_and_values(tmp_path: Path) -> None:
    table = np.array(["b", "a", "c", "a"], dtype=object)
    stream = Stream(
        np.array([1, 0, 2, 0]),
        table,
        meta={"generator": "test"},
        ts=[0.0, 0.5, 1.0, 1.5],
        values=np.arange(4.0),
    )
    back = load_stream(write_dataset(stream, tmp_path / "ds", partitions=2))
    assert back.keys().tolist() == stream.keys().tolist()
    assert np.array_equal(back.ts, stream.ts) and np.array_equal(back.values, stream.values)


def test_write_refuses_to_overwrite_unless_asked(small: Stream, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(StreamError, match="not empty"):
        write_dataset(small, out)
    assert (out / "keep.txt").exists()
    write_dataset(small.slice(0, 100), out, overwrite=True)
    assert not (out / "keep.txt").exists() and load_stream(str(out)).messages == 100
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    bad = Stream(np.array([0, 0]), np.array(["a"], dtype=object), values=np.array([{1}, "x"], dtype=object))
    with pytest.raises(StreamError, match="cannot write"):
        write_dataset(bad, tmp_path / "ds")
    assert list(tmp_path.iterdir()) == []


def test_reading_sorts_by_seq_across_parts(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "_meta.json").write_text("{}")
    pq.write_table(pa.table({"seq": [3, 2], "key": ["x", "y"]}), ds / "part-0.parquet")
    pq.write_table(pa.table({"seq": pa.array([1, 0], pa.int32()), "key": ["z", "x"]}), ds / "part-1.parquet")
    stream = load_stream(str(ds))
    assert stream.keys().tolist() == ["x", "z", "y", "x"]
    assert stream.meta["distinct_keys"] == 3 and stream.meta["top_keys"][0] == ["x", 2]


def _dataset(root: Path, *tables: pa.Table, meta: str | None = "{}") -> Path:
    root.mkdir()
    if meta is not None:
        (root / "_meta.json").write_text(meta)
    for i, t in enumerate(tables):
        pq.write_table(t, root / f"part-{i}.parquet")
    return root


GOOD = pa.table({"seq": pa.array([0, 1, 2], pa.int64()), "key": ["a", "b", "a"]})


@pytest.mark.parametrize(
    ("build", "culprit", "problem"),
    [
        (lambda d: _dataset(d, GOOD.drop_columns(["key"])), "part-0.parquet", "column 'key' is missing"),
        (
            lambda d: _dataset(d, pa.table({"seq": [0.5], "key": ["a"]})),
            "part-0.parquet",
            "column 'seq' has type double",
        ),
        (
            lambda d: _dataset(d, pa.table({"seq": [0], "key": [5]})),
            "part-0.parquet",
            "column 'key' has type int64",
        ),
        (
            lambda d: _dataset(d, GOOD, pa.table({"seq": [3, 4, 5, 6], "key": ["a", None, None, None]})),
            "part-1.parquet",
            "column 'key' has 3 null values",
        ),
        (
            lambda d: _dataset(d, GOOD, pa.table({"seq": [3], "key": ["a"], "ts": ["noon"]})),
            "part-1.parquet",
            "column 'ts'",
        ),
        (lambda d: _dataset(d, GOOD, meta=None), "_meta.json", "missing"),
        (lambda d: _dataset(d, GOOD, meta="{not json"), "_meta.json", "not valid JSON"),
        (lambda d: _dataset(d, GOOD, meta="[1, 2]"), "_meta.json", "must hold a JSON object"),
        (
            lambda d: _dataset(d, GOOD, meta='{"messages": 4}'),
            "_meta.json",
            "says 4 messages but the parts hold 3",
        ),
        (lambda d: _dataset(d), "", "no part-*.parquet files"),
        (lambda d: _dataset(d, GOOD.slice(0, 0)), "", "holds no messages"),
        (
            lambda d: _dataset(d, GOOD, GOOD.slice(2, 1)),
            "",
            "seq 2 appears more than once (in part-0.parquet, part-1.parquet)",
        ),
    ],
)
def test_malformed_datasets_name_the_file(tmp_path: Path, build, culprit: str, problem: str) -> None:
    root = build(tmp_path / "ds")
    with pytest.raises(StreamError) as err:
        load_stream(str(root))
    message = str(err.value)
    assert message.startswith(str(root / culprit) if culprit else f"{root}: "), message
    assert problem in message and "\n" not in message


@pytest.mark.parametrize(
    ("content", "problem"), [(b"", "empty file"), (b"PAR1 garbage bytes", "not a readable Parquet file")]
)
def test_broken_parquet_files_are_reported(tmp_path: Path, content: bytes, problem: str) -> None:
    root = _dataset(tmp_path / "ds", GOOD)
    (root / "part-1.parquet").write_bytes(content)
    with pytest.raises(StreamError) as err:
        load_stream(str(root))
    assert str(err.value).startswith(f"{root / 'part-1.parquet'}: {problem}") and "\n" not in str(err.value)


def test_a_file_is_not_a_dataset(tmp_path: Path) -> None:
    path = tmp_path / "stream.parquet"
    pq.write_table(GOOD, path)
    with pytest.raises(StreamError, match=f"^{path}: not a directory"):
        load_stream(str(path))
