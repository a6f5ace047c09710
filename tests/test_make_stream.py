"""make_stream.py: Spark-made stream datasets (zipf, drift, words, import) and their arrival times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from side_by_side import run_all

from spark.streams import generate
from spark.streams_arrivals import BLOCK, Arrivals, poisson_times
from spark.streams_import import ImportSource, import_stream
from spark.streams_keys import PermutedDrift, SpecKeys, permute_ids, word_keys
from topo.data.dataset import load_stream, read_dataset
from topo.data.streams import StreamError, parse_stream_spec, stream_from_spec
from topo.data.zipf import zipf_p1

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "make_stream.py"
N = 2 * BLOCK + 777  # three blocks, so parts cut blocks in the middle


def _spec(text: str) -> SpecKeys:
    return SpecKeys(parse_stream_spec(text))


def _meta(path: Path) -> dict:
    return json.loads((path / "_meta.json").read_text())


# ---------------------------------------------------------------- zipf and drift


def test_zipf_p1_follows_the_law(spark, tmp_path) -> None:
    keys = _spec("zipf:z=1.2,keys=100000,messages=200000,seed=1")
    meta = generate(spark, keys, 200_000, tmp_path / "z", partitions=2)
    assert abs(meta["p1"] / zipf_p1(1.2, 100_000) - 1) < 0.02
    assert meta["messages"] == 200_000 and meta["partitions"] == 2 and meta["generator"] == "zipf"
    assert meta == _meta(tmp_path / "z")
    assert load_stream(str(tmp_path / "z")).messages == 200_000


@pytest.mark.slow
def test_zipf_p1_follows_the_law_at_two_million(spark, tmp_path) -> None:
    keys = _spec("zipf:z=1.2,keys=100000,messages=2000000,seed=0")
    meta = generate(spark, keys, 2_000_000, tmp_path / "z")
    assert abs(meta["p1"] / zipf_p1(1.2, 100_000) - 1) < 0.02


def test_any_partitioning_gives_the_single_process_stream(spark, tmp_path) -> None:
    text = f"zipf:z=1.1,keys=5000,messages={N},seed=9"
    metas = [generate(spark, _spec(text), N, tmp_path / f"p{p}", partitions=p) for p in (1, 8)]
    one, eight, ref = read_dataset(tmp_path / "p1"), read_dataset(tmp_path / "p8"), stream_from_spec(text)
    assert len(list((tmp_path / "p8").glob("part-*.parquet"))) == 8
    for got in (one, eight):
        assert np.array_equal(got.keys(), ref.keys())
    assert np.array_equal(eight.key_table, ref.key_table) and np.array_equal(eight.key_id, ref.key_id)
    for meta in metas:
        for field in ("messages", "distinct_keys", "p1", "top_keys", "spec", "params", "seed"):
            assert meta[field] == json.loads(json.dumps(ref.meta[field]))


def test_drift_rotate_is_the_inline_drift_spec(spark, tmp_path) -> None:
    text = f"drift:z=1.1,keys=3000,messages={N},shift_every=40000,seed=4"
    meta = generate(spark, _spec(text), N, tmp_path / "d", partitions=3)
    assert np.array_equal(read_dataset(tmp_path / "d").keys(), stream_from_spec(text).keys())
    assert meta["drift_mode"] == "rotate" and meta["spec"] == text


def test_permutation_is_a_bijection_per_epoch() -> None:
    for keys in (1, 2, 7, 1000, 4099):
        ranks = np.arange(keys)
        perms = [permute_ids(ranks, np.full(keys, e), 3, keys) for e in range(3)]
        for perm in perms:
            assert np.array_equal(np.sort(perm), ranks)
        if keys > 2:
            assert not np.array_equal(perms[0], perms[1])


def test_drift_permute_moves_the_hot_key_and_keeps_the_law(spark, tmp_path) -> None:
    every, keys = 30_000, 2000
    gen = PermutedDrift(1.2, keys, every, 5)
    generate(spark, gen, 4 * every, tmp_path / "a", partitions=1)
    generate(spark, gen, 4 * every, tmp_path / "b", partitions=5)
    a, b = read_dataset(tmp_path / "a"), read_dataset(tmp_path / "b")
    assert np.array_equal(a.keys(), b.keys())
    ids = np.array([int(k[1:]) for k in a.key_table])[a.key_id]
    assert np.array_equal(ids, gen.sample(0, 4 * every))
    counts = [np.bincount(ids[e * every : (e + 1) * every], minlength=keys) for e in range(4)]
    hot = [c.argmax() for c in counts]
    assert len(set(hot)) == 4  # a new ranking every interval
    for c in counts:
        assert abs(c.max() / every / zipf_p1(1.2, keys) - 1) < 0.05
    # the whole ranking changes, not just a rotation: the gaps between the top keys differ
    top = [np.argsort(-c, kind="stable")[:5] for c in counts]
    assert len({tuple(np.diff(t) % keys) for t in top}) == 4


# ---------------------------------------------------------------- words


def test_words_are_real_words_with_the_on_top(spark, tmp_path) -> None:
    gen = word_keys("en", "small", keys=5000, seed=2)
    meta = generate(spark, gen, 50_000, tmp_path / "w1", partitions=1)
    generate(spark, gen, 50_000, tmp_path / "w3", partitions=3)
    one, three = read_dataset(tmp_path / "w1"), read_dataset(tmp_path / "w3")
    assert np.array_equal(one.keys(), three.keys())
    assert meta["top_keys"][0][0] == "the" and meta["generator"] == "words"
    assert {"and", "of", "to"} <= {k for k, _ in meta["top_keys"]}
    assert abs(meta["p1"] / meta["p1_exact"] - 1) < 0.05
    assert set(one.key_table) <= set(gen.words)


def test_words_refuse_unknown_language_wordlist_and_size() -> None:
    with pytest.raises(StreamError, match="--lang 'xx'"):
        word_keys("xx")
    with pytest.raises(StreamError, match="--wordlist 'huge'"):
        word_keys("en", "huge")
    with pytest.raises(StreamError, match="--keys 10000000"):
        word_keys("en", "small", keys=10_000_000)


# ---------------------------------------------------------------- arrivals


def test_rate_arrivals_are_exact(spark, tmp_path) -> None:
    gen = _spec("zipf:z=1,keys=100,messages=1000,seed=0")
    meta = generate(spark, gen, 1000, tmp_path / "r", partitions=3, arrivals=Arrivals("rate", rate=250.0))
    ts = read_dataset(tmp_path / "r").ts
    assert np.array_equal(ts, np.arange(1000) / 250.0)
    assert meta["arrivals"] == {"mode": "rate", "rate": 250.0, "seed": 0, "mean_rate": 250.0}


def test_poisson_arrivals_any_split_same_times() -> None:
    whole = poisson_times(7, 50.0, 0, N)
    cuts = [0, 5, BLOCK, BLOCK + 1, 2 * BLOCK + 100, N]
    parts = [poisson_times(7, 50.0, a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    assert np.array_equal(np.concatenate(parts), whole)
    gaps = np.diff(whole)
    assert np.all(gaps >= 0)
    assert abs(gaps.mean() * 50.0 - 1) < 0.02
    assert abs(gaps.std() / gaps.mean() - 1) < 0.03  # exponential gaps: coefficient of variation 1


def test_poisson_arrivals_through_spark(spark, tmp_path) -> None:
    gen = _spec(f"zipf:z=1,keys=100,messages={N},seed=0")
    arrivals = Arrivals("poisson", rate=1000.0, seed=3)
    generate(spark, gen, N, tmp_path / "a", partitions=1, arrivals=arrivals)
    generate(spark, gen, N, tmp_path / "b", partitions=4, arrivals=arrivals)
    a, b = read_dataset(tmp_path / "a").ts, read_dataset(tmp_path / "b").ts
    assert np.array_equal(a, b)
    assert abs(np.diff(a).mean() * 1000.0 - 1) < 0.02


def test_bursts_raise_the_rate_inside_bursts() -> None:
    arrivals = Arrivals("bursts", rate=100.0, burst_every=10.0, burst_length=2.0, burst_factor=5.0, seed=1).check()
    ts = arrivals.times(0, 200_000)
    assert np.all(np.diff(ts) >= 0)
    phase = ts % 10.0
    inside = phase >= 8.0  # each 10 s period ends with its 2 s burst
    periods = np.floor(ts[-1] / 10.0)
    rate_in = inside.sum() / (2.0 * periods)
    rate_out = (~inside).sum() / (8.0 * periods)
    assert abs(rate_out / 100.0 - 1) < 0.05 and abs(rate_in / 500.0 - 1) < 0.05
    assert abs(200_000 / ts[-1] / arrivals.mean_rate - 1) < 0.02


def test_arrival_options_are_checked() -> None:
    with pytest.raises(StreamError, match="needs --rate"):
        Arrivals("poisson").check()
    with pytest.raises(StreamError, match="--burst-length 5 must be shorter"):
        Arrivals("bursts", rate=1.0, burst_every=5.0, burst_length=5.0, burst_factor=2.0).check()
    with pytest.raises(StreamError, match="need --arrivals bursts"):
        Arrivals("rate", rate=1.0, burst_factor=2.0).check()
    with pytest.raises(StreamError, match="--rate -1"):
        Arrivals("rate", rate=-1.0).check()


# ---------------------------------------------------------------- import


@pytest.fixture()
def logs(tmp_path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "a.csv").write_text(
        "user,ts,text,v\n"
        "u1,2024-01-01T00:00:05Z,Hello world,1\n"
        "u2,2024-01-01T00:00:01Z,\"The cat, the HAT\",2\n"
        "u3,2024-01-01T00:00:05Z,don't stop,3\n"
        "u1,2024-01-01T00:00:03.5Z,!!,4\n"
    )
    (d / "b.json").write_text(
        '{"user": "x", "ts": 12.5, "v": "p"}\n{"user": "y", "ts": 10, "v": "q"}\n{"user": "z", "ts": 12.5}\n'
    )
    return d


def test_import_csv_orders_by_time_keeping_input_order_on_ties(spark, tmp_path, logs) -> None:
    src = ImportSource((str(logs / "a.csv"),), "csv", key_col="user", ts_col="ts", value_col="v")
    meta = import_stream(spark, src, tmp_path / "o", partitions=2)
    s = read_dataset(tmp_path / "o")
    assert list(s.keys()) == ["u2", "u1", "u1", "u3"]
    assert np.array_equal(s.ts, [0.0, 2.5, 4.0, 4.0])
    assert list(s.values) == ["2", "4", "1", "3"]
    assert meta["messages"] == 4 and meta["top_keys"][0] == ["u1", 2] and meta["p1"] == 0.5
    assert meta["arrivals"]["mode"] == "ts-col" and meta["ts_origin"] == 1704067201.0


def test_import_text_splits_into_lowercase_words(spark, tmp_path, logs) -> None:
    src = ImportSource((str(logs / "a.csv"),), "csv", text_col="text", ts_col="ts")
    meta = import_stream(spark, src, tmp_path / "o")
    s = read_dataset(tmp_path / "o")
    assert list(s.keys()) == ["the", "cat", "the", "hat", "hello", "world", "don't", "stop"]
    assert np.array_equal(s.ts, [0, 0, 0, 0, 4, 4, 4, 4])
    assert meta["top_keys"][0] == ["the", 2]


def test_import_json_lines_and_several_files_in_order(spark, tmp_path, logs) -> None:
    src = ImportSource((str(logs / "b.json"),), "json", key_col="user", ts_col="ts", value_col="v")
    import_stream(spark, src, tmp_path / "j")
    s = read_dataset(tmp_path / "j")
    assert list(s.keys()) == ["y", "x", "z"] and np.array_equal(s.ts, [0.0, 2.5, 2.5])
    # no time column: input order, file by file as given, and seq-invariant generated arrivals
    src = ImportSource((str(logs / "b.json"), str(logs / "b.json")), "json", key_col="user")
    meta = import_stream(spark, src, tmp_path / "k", arrivals=Arrivals("rate", rate=10.0))
    s = load_stream(str(tmp_path / "k"))
    assert list(s.keys()) == ["x", "y", "z"] * 2 and np.array_equal(s.ts, np.arange(6) / 10.0)
    assert meta["arrivals"]["mode"] == "rate"


def test_import_no_header_by_position(spark, tmp_path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text("a\t1\nb\t0\n")
    import_stream(spark, ImportSource((str(path),), "tsv", key_col="0", ts_col="1", header=False), tmp_path / "o")
    assert list(read_dataset(tmp_path / "o").keys()) == ["b", "a"]


def _refused(spark, tmp_path, src: ImportSource, match: str, **kw) -> None:
    out = tmp_path / "never"
    with pytest.raises(StreamError, match=match):
        import_stream(spark, src, out, **kw)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".never")]


def test_import_refuses_missing_and_empty_files(spark, tmp_path) -> None:
    empty, header_only = tmp_path / "e.csv", tmp_path / "h.csv"
    empty.write_text("")
    header_only.write_text("user,ts\n")
    _refused(spark, tmp_path, ImportSource((str(tmp_path / "nope.csv"),), key_col="user"), "nope.csv: no such file")
    _refused(spark, tmp_path, ImportSource((str(empty),), key_col="user"), "e.csv: empty file")
    _refused(spark, tmp_path, ImportSource((str(header_only),), key_col="user"), "h.csv: no rows")


def test_import_refuses_missing_and_mistyped_columns(spark, tmp_path, logs) -> None:
    csv, js = str(logs / "a.csv"), str(logs / "b.json")
    _refused(spark, tmp_path, ImportSource((csv,), key_col="name"),
             r"a.csv: --key-col column 'name' is missing \(columns: user, ts, text, v\)")
    _refused(spark, tmp_path, ImportSource((csv,), key_col="user", ts_col="text"),
             "a.csv: --ts-col column 'text' is neither numeric .* such as 'Hello world'")
    nested = tmp_path / "n.json"
    nested.write_text('{"user": {"id": 1}, "ts": 1}\n')
    _refused(spark, tmp_path, ImportSource((str(nested),), "json", key_col="user"),
             "n.json: --key-col column 'user' holds struct<id:bigint> values")
    _refused(spark, tmp_path, ImportSource((js, csv), "json", key_col="user"), "a.csv: no line is a JSON object")
    bad = tmp_path / "bad.json"
    bad.write_text('{"user": "a"}\nnot json\n')
    _refused(spark, tmp_path, ImportSource((str(bad),), "json", key_col="user"), "bad.json: 1 lines are not JSON")


def test_import_null_keys_refused_or_dropped(spark, tmp_path) -> None:
    path = tmp_path / "k.csv"
    path.write_text("user,ts\na,1\n,2\n  ,3\nb,\nc,4\n")
    _refused(spark, tmp_path, ImportSource((str(path),), key_col="user"),
             "k.csv: --key-col column 'user' has 2 null or empty values .*--drop-nulls")
    _refused(spark, tmp_path, ImportSource((str(path),), key_col="user", ts_col="ts"), "has 2 null or empty")
    meta = import_stream(spark, ImportSource((str(path),), key_col="user", ts_col="ts", drop_nulls=True),
                         tmp_path / "o")
    assert list(read_dataset(tmp_path / "o").keys()) == ["a", "c"] and meta["rows_dropped"] == 3


# ---------------------------------------------------------------- command line


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_cli_refuses_before_starting_spark(tmp_path) -> None:
    out = tmp_path / "o"
    cases = {
        ("import", "nope.csv", "--key-col", "k"): "nope.csv: no such file",
        ("zipf", "--messages", "10", "--z", "-1"): "--z must be at least 0",
        ("words", "--messages", "10", "--lang", "xx"): "--lang 'xx'",
        ("zipf", "--messages", "10", "--arrivals", "poisson"): "needs --rate",
    }
    done = run_all({args: ([sys.executable, str(SCRIPT), *args, "--out", str(out)], tmp_path) for args in cases})
    for args, message in cases.items():
        res = done[args]
        assert res.returncode == 2, res.stderr
        assert len(res.stderr.splitlines()) == 1 and message in res.stderr and not res.stdout
        assert not out.exists()


@pytest.mark.slow
def test_cli_input_error_found_by_spark_is_one_line(tmp_path) -> None:
    (tmp_path / "a.csv").write_text("user,ts\na,1\nb,x\n")
    res = _cli("import", "a.csv", "--key-col", "user", "--ts-col", "ts", "--out", "o", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        "make_stream.py: error: a.csv: --ts-col column 'ts' is neither numeric (seconds) nor a timestamp "
        "(1 values such as 'x' do not parse)"
    ]
    assert not (tmp_path / "o").exists() and list(tmp_path.iterdir()) == [tmp_path / "a.csv"]


@pytest.mark.slow
def test_cli_writes_a_dataset(tmp_path) -> None:
    res = _cli("drift", "--z", "1.1", "--keys", "1000", "--messages", "5e4", "--shift-every", "10000",
               "--partitions", "3", "--arrivals", "poisson", "--rate", "100", "--seed", "3", "--out", "d",
               cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("make_stream.py: wrote d: 50000 messages") and not res.stderr
    s = load_stream(str(tmp_path / "d"))
    assert np.array_equal(s.keys(), stream_from_spec("drift:z=1.1,keys=1000,messages=50000,shift_every=10000,"
                                                     "seed=3").keys())
    assert s.meta["arrivals"]["mode"] == "poisson" and s.ts is not None


def test_cli_in_process_writes_words_with_arrivals(spark, tmp_path, capsys) -> None:
    from spark.streams_cli import main

    out = tmp_path / "w"
    status = main(["words", "--messages", "20000", "--wordlist", "small", "--keys", "1000", "--partitions", "2",
                   "--arrivals", "bursts", "--rate", "100", "--burst-every", "10", "--burst-length", "1",
                   "--burst-factor", "4", "--out", str(out)])
    res = capsys.readouterr()
    assert status == 0 and not res.err
    assert res.out.startswith(f"make_stream.py: wrote {out}: 20000 messages")
    s = load_stream(str(out))
    assert s.meta["top_keys"][0][0] == "the" and s.meta["arrivals"]["burst_factor"] == 4.0
    assert np.all(np.diff(s.ts) >= 0)


def test_cli_in_process_input_error_found_by_spark(spark, tmp_path, capsys) -> None:
    from spark.streams_cli import main

    (tmp_path / "a.csv").write_text("user,ts\na,1\n")
    out = tmp_path / "o"
    status = main(["import", str(tmp_path / "a.csv"), "--key-col", "name", "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1
    assert "a.csv: --key-col column 'name' is missing (columns: user, ts)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]


def test_cli_job_failure_is_one_line_and_status_1(spark, tmp_path, capsys, monkeypatch) -> None:
    import spark.streams as streams_module
    from spark.streams_cli import main

    def boom(*args, **kwargs):
        raise RuntimeError("An error occurred while calling o7.collect.\n: java...\nValueError: task exploded")

    monkeypatch.setattr(streams_module, "generate", boom)
    status = main(["zipf", "--messages", "100", "--out", str(tmp_path / "z")])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("make_stream.py: error: the Spark job failed: ValueError: task exploded")
    assert len(err.splitlines()) == 1 and not (tmp_path / "z").exists()
