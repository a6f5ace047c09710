"""Stream datasets on disk: a directory of `part-*.parquet` files plus `_meta.json`.

Columns: `seq` (int64, global order), `key` (string), `ts` (float64 seconds >= 0, optional), `value` (optional).
Writing is atomic (a temporary directory beside the target, then a rename); reading checks every part and
turns each problem into a one-line `StreamError` that names the file. `load_stream` opens a stream by name: an
inline spec (`zipf:...`, `drift:...`) or a dataset directory.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from topo.data.streams import Stream, key_stats, spec_meta, stream_from_spec
from topo.data.streamspec import StreamError, StreamSpec, is_inline_spec, key_names, parse_stream_spec

META_FILE = "_meta.json"
PART_GLOB = "part-*.parquet"
FORMAT_VERSION = 1
_OPTIONAL = ("ts", "value")


def _one_line(err: BaseException) -> str:
    """First line of an exception's message, short enough for a one-line error."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."


# ---------------------------------------------------------------- writing


def _part_name(i: int) -> str:
    """File name of part i."""
    return f"part-{i:05d}.parquet"


def _bounds(messages: int, partitions: int) -> list[tuple[int, int]]:
    """Seq range of each of `partitions` nearly equal parts of [0, messages)."""
    cuts = [messages * i // partitions for i in range(partitions + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _key_column(key_id: np.ndarray, table: np.ndarray) -> pa.Array:
    """A plain string column from dense ids into a table of distinct keys (no Python string per message)."""
    indices = pa.array(key_id, type=pa.int64())
    return pa.DictionaryArray.from_arrays(indices, pa.array(table, type=pa.string())).dictionary_decode()


def _stream_parts(stream: Stream, partitions: int):
    """Arrow tables of the parts of a materialized stream."""
    for lo, hi in _bounds(stream.messages, partitions):
        cols = {
            "seq": pa.array(np.arange(lo, hi, dtype=np.int64)),
            "key": _key_column(stream.key_id[lo:hi], stream.key_table),
        }
        if stream.ts is not None:
            cols["ts"] = pa.array(stream.ts[lo:hi])
        if stream.values is not None:
            cols["value"] = pa.array(stream.values[lo:hi])
        yield pa.table(cols)


def _spec_parts(spec: StreamSpec, partitions: int, counts: np.ndarray):
    """Arrow tables of the parts of an inline spec, each sampled on its own (adds key counts to `counts`)."""
    for lo, hi in _bounds(spec.messages, partitions):
        ids = spec.sample(lo, hi)
        counts += np.bincount(ids, minlength=counts.size)
        present = np.flatnonzero(np.bincount(ids, minlength=counts.size))
        dense = np.zeros(counts.size, dtype=np.int64)
        dense[present] = np.arange(present.size)
        key = _key_column(dense[ids], key_names(present))
        yield pa.table({"seq": pa.array(np.arange(lo, hi, dtype=np.int64)), "key": key})


def _json_safe(meta: dict) -> dict:
    """Metadata with numpy scalars turned into plain Python numbers."""
    return json.loads(json.dumps(meta, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


def write_dataset(
    stream_or_spec: Stream | StreamSpec | str,
    out_dir: str | os.PathLike,
    partitions: int = 1,
    overwrite: bool = False,
) -> Path:
    """Write a stream (or an inline spec, sampled part by part) as a dataset directory; returns its path."""
    out = Path(out_dir)
    if int(partitions) != partitions or partitions < 1:
        raise StreamError(f"{out}: partitions must be a whole number >= 1 (got {partitions})")
    if out.exists() and not out.is_dir():
        raise StreamError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise StreamError(f"{out}: directory exists and is not empty (pass overwrite=True to replace it)")
    source: Stream | StreamSpec
    if (
        isinstance(stream_or_spec, str)
        and is_inline_spec(stream_or_spec)
        and not Path(stream_or_spec).exists()
    ):
        source = parse_stream_spec(stream_or_spec)
    elif isinstance(stream_or_spec, (str, os.PathLike)):
        source = load_stream(stream_or_spec)
    else:
        source = stream_or_spec

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        if isinstance(source, StreamSpec):
            counts = np.zeros(int(source.params["keys"]), dtype=np.int64)
            for i, table in enumerate(_spec_parts(source, partitions, counts)):
                pq.write_table(table, tmp / _part_name(i))
            present = np.flatnonzero(counts)
            names = key_names(present)
            order = np.argsort(names, kind="stable")
            meta = {**spec_meta(source), **key_stats(counts[present][order], names[order])}
        else:
            for i, table in enumerate(_stream_parts(source, partitions)):
                pq.write_table(table, tmp / _part_name(i))
            meta = {k: v for k, v in source.meta.items() if k != "source"}
        meta.update(partitions=int(partitions), format_version=FORMAT_VERSION)
        (tmp / META_FILE).write_text(json.dumps(_json_safe(meta), indent=2) + "\n")
        _replace_dir(tmp, out)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, (pa.ArrowException, OSError)):
            raise StreamError(f"{out}: cannot write dataset ({_one_line(err)})") from None
        raise
    return out


def _replace_dir(tmp: Path, out: Path) -> None:
    """Move the finished `tmp` to `out`, replacing an existing `out` only once `tmp` is complete."""
    if not out.exists():
        os.replace(tmp, out)
        return
    if not any(out.iterdir()):
        out.rmdir()
        os.replace(tmp, out)
        return
    old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
    os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- reading


def _read_meta(root: Path) -> dict:
    """The parsed `_meta.json` of a dataset directory."""
    path = root / META_FILE
    if not path.is_file():
        raise StreamError(f"{path}: missing (a dataset directory holds {PART_GLOB} files and {META_FILE})")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise StreamError(
            f"{path}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise StreamError(f"{path}: cannot read ({_one_line(err)})") from None
    if not isinstance(meta, dict):
        raise StreamError(f"{path}: must hold a JSON object, not {type(meta).__name__}")
    return meta


def _is_string(t: pa.DataType) -> bool:
    """True for Arrow string types, dictionary-encoded or not."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (
        pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", bool)(t)
    )


def _read_part(path: Path) -> pa.Table:
    """One part with its columns checked and cast to seq int64, key large_string, ts float64."""
    try:
        if path.stat().st_size == 0:
            raise StreamError(f"{path}: empty file (not Parquet)")
        schema = pq.read_schema(path)
    except OSError as err:
        raise StreamError(f"{path}: cannot read ({_one_line(err)})") from None
    except pa.ArrowException as err:
        raise StreamError(f"{path}: not a readable Parquet file ({_one_line(err)})") from None
    names = set(schema.names)
    for col in ("seq", "key"):
        if col not in names:
            raise StreamError(
                f"{path}: column '{col}' is missing (columns: {', '.join(schema.names) or 'none'})"
            )
    checks = {
        "seq": (pa.types.is_integer, "an integer type (int64)"),
        "key": (_is_string, "string"),
        "ts": (lambda t: pa.types.is_floating(t) or pa.types.is_integer(t), "float64 seconds"),
    }
    for col, (ok, expected) in checks.items():
        if col in names and not ok(schema.field(col).type):
            raise StreamError(
                f"{path}: column '{col}' has type {schema.field(col).type}, expected {expected}"
            )
    columns = ["seq", "key", *(c for c in _OPTIONAL if c in names)]
    try:
        table = pq.read_table(path, columns=columns)
    except pa.ArrowException as err:
        raise StreamError(f"{path}: not a readable Parquet file ({_one_line(err)})") from None
    except OSError as err:
        raise StreamError(f"{path}: cannot read ({_one_line(err)})") from None
    for col in ("seq", "key", "ts"):
        if col in names and table.column(col).null_count:
            raise StreamError(f"{path}: column '{col}' has {table.column(col).null_count} null values")
    key = table.column("key")
    if pa.types.is_dictionary(key.type):
        key = pc.cast(key, key.type.value_type)
    table = table.set_column(table.schema.get_field_index("key"), "key", pc.cast(key, pa.large_string()))
    table = table.set_column(0, "seq", pc.cast(table.column("seq"), pa.int64()))
    if "ts" in names:
        ts = pc.cast(table.column("ts"), pa.float64())
        _check_times(path, ts)
        table = table.set_column(table.schema.get_field_index("ts"), "ts", ts)
    return table


def _check_times(path: Path, ts: pa.ChunkedArray) -> None:
    """StreamError unless every arrival time is a finite number of seconds >= 0 (NaN would stall a run)."""
    if not len(ts):
        return
    bad = len(ts) - pc.sum(pc.is_finite(ts)).as_py()
    if bad:
        raise StreamError(f"{path}: column 'ts' has {bad} NaN or infinite values (expected seconds >= 0)")
    low = pc.min(ts).as_py()
    if low < 0:
        raise StreamError(f"{path}: column 'ts' has negative values (the lowest is {low:g}; expected seconds >= 0)")


def find_dataset(path: str | os.PathLike) -> Path:
    """The dataset directory at `path`, or StreamError if there is none; reads no data."""
    root = Path(path)
    if not root.exists():
        raise StreamError(f"{root}: no such dataset directory (nor an inline spec such as zipf:z=1.2,...)")
    if not root.is_dir():
        raise StreamError(
            f"{root}: not a directory (a dataset is a directory of {PART_GLOB} and {META_FILE})"
        )
    return root


def _meta_and_parts(path: str | os.PathLike) -> tuple[Path, dict, list[Path]]:
    """The dataset directory, its parsed `_meta.json` and its part files, or StreamError; reads no data."""
    root = find_dataset(path)
    meta = _read_meta(root)
    parts = sorted(root.glob(PART_GLOB))
    if not parts:
        raise StreamError(f"{root}: no {PART_GLOB} files")
    return root, meta, parts


def read_dataset(path: str | os.PathLike) -> Stream:
    """Load a dataset directory as a Stream in seq order, or raise StreamError naming the bad file."""
    root, meta, parts = _meta_and_parts(path)
    tables = [_read_part(p) for p in parts]
    for p, t in zip(parts[1:], tables[1:], strict=True):
        for col in _OPTIONAL:
            if (col in t.column_names) != (col in tables[0].column_names):
                has, lacks = (p, parts[0]) if col in t.column_names else (parts[0], p)
                raise StreamError(f"{lacks}: column '{col}' is missing but {has.name} has it")
    try:
        table = pa.concat_tables(tables)
    except pa.ArrowException as err:
        raise StreamError(f"{root}: parts disagree on column types ({_one_line(err)})") from None
    n = table.num_rows
    if n == 0:
        raise StreamError(f"{root}: the dataset holds no messages")
    if isinstance(meta.get("messages"), int) and meta["messages"] != n:
        raise StreamError(f"{root / META_FILE}: says {meta['messages']} messages but the parts hold {n}")

    seq = table.column("seq").to_numpy()
    order = None
    if not np.all(seq[1:] > seq[:-1]):
        order = np.argsort(seq, kind="stable")
        seq = seq[order]
    dup = np.flatnonzero(seq[1:] == seq[:-1])
    if dup.size:
        s = int(seq[dup[0]])
        in_files = sorted(
            {parts[i].name for i, t in enumerate(tables) if np.any(t.column("seq").to_numpy() == s)}
        )
        raise StreamError(f"{root}: seq {s} appears more than once (in {', '.join(in_files)})")

    encoded = pc.dictionary_encode(table.column("key")).combine_chunks()
    dictionary = encoded.dictionary
    by_text = pc.array_sort_indices(dictionary).to_numpy()
    # dense ids follow the sorted key table, the canonical order of every Stream
    rank = np.empty(len(dictionary), dtype=np.int64)
    rank[by_text] = np.arange(len(dictionary))
    key_id = rank[encoded.indices.to_numpy()]
    key_table = np.asarray(dictionary.take(pa.array(by_text)).to_pylist(), dtype=object)

    def column(name: str) -> np.ndarray | None:
        if name not in table.column_names:
            return None
        arr = table.column(name).to_numpy()
        return arr if order is None else arr[order]

    if order is not None:
        key_id = key_id[order]
    meta["source"] = str(root)
    return Stream(key_id, key_table, meta=meta, ts=column("ts"), values=column("value"))


# ---------------------------------------------------------------- opening a stream by name


def _inline(spec: str | os.PathLike) -> bool:
    text = os.fspath(spec)
    return not isinstance(spec, os.PathLike) and is_inline_spec(text) and not Path(text).exists()


def find_stream(spec: str | os.PathLike) -> None:
    """Raise StreamError if `spec` names no stream (an inline spec that does not parse, no dataset directory, or one
    whose `_meta.json` or part list is broken); reads no data, so a caller can check the name before it starts
    anything costly."""
    if not os.fspath(spec).strip():  # Path("") would be the current directory
        raise StreamError("empty stream name (expected a dataset directory or an inline spec such as zipf:z=1.2,...)")
    if _inline(spec):
        parse_stream_spec(os.fspath(spec))
    else:
        _meta_and_parts(spec)


def load_stream(spec: str | os.PathLike) -> Stream:
    """The stream named by an inline spec (`zipf:...`, `drift:...`) or a dataset directory."""
    if _inline(spec):
        return stream_from_spec(parse_stream_spec(os.fspath(spec)))
    return read_dataset(os.fspath(spec))
