"""Run summary and time series on tiny hand-made tuple logs."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from contract import LATENCY_KEYS, SUMMARY_KEYS, WORKER_KEYS

from topo.results import rundir
from topo.results.metrics import (
    RunResult,
    TupleLog,
    imbalance,
    latency_stats,
    replication,
    summarize,
    timeseries,
    write_outputs,
)
from topo.results.passes import sampled, worker_loads
from topo.results.rundir import LATENCY_FILE, SUMMARY_FILE, TIMESERIES_FILE

CONTRACT = SUMMARY_KEYS


def make_log(rows: list[tuple[int, int, float, float, float]]) -> TupleLog:
    """Rows of (worker, source, arrival = enqueue, start, finish); seq is the row number."""
    w, s, a, b, f = (np.array(c) for c in zip(*rows, strict=True))
    return TupleLog(np.arange(len(rows)), s.astype(np.int32), w.astype(np.int32), a, a, b, f)


# worker 0 serves [0, 1] and [2, 3]; worker 1 serves three tuples back to back from 0 to 3 (one waits twice)
LOG = make_log(
    [
        (0, 0, 0.0, 0.0, 1.0),
        (1, 1, 0.0, 0.0, 1.0),
        (1, 0, 0.5, 1.0, 2.0),
        (1, 1, 0.5, 2.0, 3.0),
        (0, 0, 2.0, 2.0, 3.0),
        # worker 2 only at the end
        (2, 1, 3.5, 3.5, 4.0),
    ]
)


def summary(**kw):
    args = dict(
        grouping="kg",
        engine="sim",
        capacities=[1.0, 1.0, 0.5],
        sources=2,
        tuples_in=6,
        distinct_keys=[2, 3, 1],
        keys_total=4,
        exact=True,
    )
    args.update(kw)
    return summarize(LOG, **args)


def test_imbalance_is_relative_to_capacity():
    assert imbalance([10, 10], [1, 1]) == 0.0
    assert imbalance([30, 10], [3, 1]) == 0.0
    assert imbalance([20, 10], [1, 1]) == pytest.approx(20 / 15 - 1)
    assert imbalance([0, 0], [1, 1]) == 0.0


def test_replication_counts_key_worker_pairs():
    assert replication([3, 2], 4) == 1.25
    assert replication([4], 4) == 1.0
    assert replication([0], 0) == 0.0


def test_latency_stats():
    lat = np.arange(1, 101, dtype=float)
    s = latency_stats(lat)
    assert s["mean"] == 50.5 and s["max"] == 100.0 and s["p50"] == pytest.approx(50.5)
    assert s["p99"] == pytest.approx(99.01)
    assert latency_stats(np.empty(0))["max"] == 0.0


def test_summary_formulas_on_a_tiny_log():
    s = summary()
    assert list(s)[: len(CONTRACT)] == CONTRACT
    assert s["duration_s"] == 4.0 and s["throughput_tps"] == 6 / 4.0
    assert s["tuples_processed"] == 6 and s["workers"] == 3
    # L/c = 2, 3, 2 -> max 3 over mean 7/3
    assert s["imbalance"] == pytest.approx(3 / (7 / 3) - 1)
    assert s["replication"] == 6 / 4
    busy = [p["busy_fraction"] for p in s["per_worker"]]
    assert busy == pytest.approx([2 / 4, 3 / 4, 0.5 / 4])
    assert [p["tuples"] for p in s["per_worker"]] == [2, 3, 1]
    assert [p["queue_max"] for p in s["per_worker"]] == [1, 3, 1]
    assert s["per_worker"][2] == {
        "id": 2,
        "capacity": 0.5,
        "tuples": 1,
        "distinct_keys": 1,
        "busy_fraction": 0.125,
        "queue_max": 1,
    }
    # latency = finish - arrival, in ms
    assert s["latency_ms"]["max"] == 2500.0
    assert s["latency_ms"]["mean"] == pytest.approx(1000 * (1 + 1 + 1.5 + 2.5 + 1 + 0.5) / 6)
    assert s["utilization_spread"] == pytest.approx(0.75 - 0.125)


def test_extras_never_override_the_contract():
    s = summary(extra={"imbalance": -1, "seed": np.int64(4), "arr": np.arange(2)})
    assert s["imbalance"] > 0 and s["seed"] == 4 and s["arr"] == [0, 1]
    json.dumps(s, allow_nan=False)


def test_timeseries_samples_queue_utilization_and_progress():
    ts = timeseries(LOG, 3, interval_s=1.0).to_pydict()
    assert ts["t_s"] == [1.0] * 3 + [2.0] * 3 + [3.0] * 3 + [4.0] * 3
    assert ts["worker"] == [0, 1, 2] * 4
    # at t = 1: worker 0 just finished its first tuple; worker 1 finished one and holds two
    assert ts["queue_len"] == [0, 2, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    assert ts["utilization"] == pytest.approx([1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0.5])
    assert ts["processed"] == [1, 1, 0, 1, 2, 0, 2, 3, 0, 2, 3, 1]


def test_timeseries_default_has_about_two_hundred_samples():
    ts = timeseries(LOG, 3)
    assert ts.num_rows == 3 * 200
    assert ts.column("t_s").to_pylist()[-1] == pytest.approx(4.0)


def test_empty_log():
    ids, times = np.empty(0, np.int32), np.empty(0)
    empty = TupleLog(ids.astype(np.int64), ids, ids, times, times, times, times)
    s = summarize(
        empty,
        grouping="kg",
        engine="sim",
        capacities=[1.0],
        sources=1,
        tuples_in=0,
        distinct_keys=[0],
        keys_total=0,
        exact=True,
    )
    assert s["tuples_processed"] == 0 and s["throughput_tps"] is None and s["imbalance"] == 0.0
    assert timeseries(empty, 1).num_rows == 0


def test_an_unordered_log_is_sorted_per_worker_first():
    log = TupleLog(np.arange(2), np.zeros(2, np.int32), np.zeros(2, np.int32), np.array([1.0, 0.0]),
                   np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([2.0, 1.0]))
    loads = worker_loads(log, 1)
    assert loads.runs is not None and loads.tuples.tolist() == [2] and loads.busy_s.tolist() == [2.0]
    enqueued, finished, busy = sampled(log, loads, np.array([0.5, 1.0, 1.5, 2.0, 5.0]))
    assert (enqueued - finished)[0].tolist() == [1, 1, 1, 0, 0]
    assert busy[0].tolist() == [0.5, 1.0, 1.5, 2.0, 2.0]


def test_log_arrays_must_have_equal_length():
    with pytest.raises(ValueError, match="worker"):
        TupleLog(np.arange(2), np.zeros(2), np.zeros(3), np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2))


def test_worker_ids_out_of_range_are_rejected():
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        timeseries(LOG, 2)


def test_write_outputs(tmp_path):
    result = RunResult(summary(), timeseries(LOG, 3), LOG)
    write_outputs(result, tmp_path)
    assert json.loads((tmp_path / SUMMARY_FILE).read_text()) == result.summary
    assert pq.read_table(tmp_path / TIMESERIES_FILE).equals(result.timeseries)
    lat = pq.read_table(tmp_path / LATENCY_FILE).to_pydict()
    assert lat["seq"] == list(range(6)) and lat["latency_ms"][3] == pytest.approx(2500.0)
    # the tables hold exactly the columns the run-directory module declares, of the kinds it declares
    kinds = {"int": "int", "double": "float"}
    for name, columns in ((LATENCY_FILE, rundir.LATENCY_COLUMNS), (TIMESERIES_FILE, rundir.TIMESERIES_COLUMNS)):
        schema = pq.read_schema(tmp_path / name)
        assert schema.names == list(columns)
        assert [kinds[str(t).rstrip("0123456789")] for t in schema.types] == list(columns.values())


def test_the_run_directory_module_declares_the_pinned_contract():
    assert list(rundir.SUMMARY_KEYS) == SUMMARY_KEYS
    assert set(rundir.LATENCY_KEYS) == LATENCY_KEYS and set(rundir.WORKER_KEYS) == WORKER_KEYS


def _alone(enqueue, start, finish):
    """One worker by the definitions: its columns sorted, busy seconds before each tuple, and the counts by time."""
    e, st, f = np.sort(enqueue), np.sort(start), np.sort(finish)
    busy = np.concatenate(([0.0], np.cumsum(f - st)))

    def at(t):
        done = np.searchsorted(f, t, side="right")
        held = np.searchsorted(e, t, side="right") - done
        partial = np.where(done < len(f), np.maximum(t - st[np.minimum(done, len(f) - 1)] if len(f) else 0.0, 0.0),
                           0.0)
        return held, done, busy[done] + partial

    return e, busy, at


def _fifo_log(rng, n, workers, rep):
    # FIFO workers fed at sorted enqueue times (ties and zero service when asked): the simulator's kind of log
    enqueue = np.sort(np.round(rng.random(n) * 100, rep % 3))
    worker = rng.integers(0, workers, n).astype(np.int32)
    start, finish, free = np.empty(n), np.empty(n), np.zeros(workers)
    for i in range(n):
        start[i] = max(enqueue[i], free[worker[i]])
        finish[i] = free[worker[i]] = start[i] + (rng.random() * 2 if rep % 2 else 0.0)
    return TupleLog(np.arange(n), np.zeros(n, np.int32), worker, enqueue, enqueue, start, finish)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_queue_max_is_the_most_held_at_any_enqueue_instant(chunk, monkeypatch):
    """The chunked pass agrees with counting by binary search at every enqueue time (ties and zero service), however
    the log is cut into chunks."""
    from topo.results import passes

    monkeypatch.setattr(passes, "CHUNK", chunk)
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 300, 2000):
        for rep in range(6):
            log = _fifo_log(rng, n, 3, rep)
            loads = worker_loads(log, 3)
            assert loads.runs is None
            for w in range(3):
                mine = log.worker == w
                e, busy, at = _alone(log.enqueue_s[mine], log.start_s[mine], log.finish_s[mine])
                assert loads.queue_max[w] == (int(at(e)[0].max()) if len(e) else 0)
                assert loads.tuples[w] == mine.sum() and loads.busy_s[w] == busy[-1]


@pytest.mark.parametrize("chunk", [5, 1 << 20])
def test_the_time_series_of_every_worker_is_what_its_own_tuples_give(chunk, monkeypatch):
    """Queue length, utilization and tuples done of each worker at every sample are what its own sorted columns
    give by bisection, for unsorted logs (sorted once), in-order logs cut into chunks, and idle workers."""
    from topo.results import passes

    rng = np.random.default_rng(11)
    n = 3000
    worker = rng.integers(0, 6, n).astype(np.int32)
    worker[worker == 2] = 3  # worker 2 idle
    enqueue = rng.random(n) * 5
    start = enqueue + rng.random(n)
    finish = start + rng.random(n) * 0.05
    unsorted = TupleLog(np.arange(n), np.zeros(n, np.int32), worker, enqueue - 0.1, enqueue, start, finish)
    in_order = _fifo_log(rng, n, 7, 1)
    whole = {id(log): timeseries(log, 7, 0.25).to_pydict() for log in (unsorted, in_order)}
    monkeypatch.setattr(passes, "CHUNK", chunk)
    for log in (unsorted, in_order):
        ts = timeseries(log, 7, 0.25).to_pydict()
        t = np.unique(ts["t_s"])
        first = log.arrival_s.min()
        for w in range(7):
            mine = log.worker == w
            _, busy, at = _alone(log.enqueue_s[mine], log.start_s[mine], log.finish_s[mine])
            held, done, _ = at(t)
            rows = np.asarray(ts["worker"]) == w
            assert np.array_equal(np.asarray(ts["queue_len"])[rows], held)
            assert np.array_equal(np.asarray(ts["processed"])[rows], done)
            busy_at = at(np.concatenate(([first], t)))[2]
            assert np.array_equal(np.asarray(ts["utilization"])[rows], np.diff(busy_at) / 0.25)
        assert ts == whole[id(log)]  # the same series however the log is cut
    idle = np.asarray(timeseries(unsorted, 7, 0.25)["worker"]) == 2
    assert not any(np.asarray(timeseries(unsorted, 7, 0.25)["processed"])[idle])


@pytest.mark.parametrize("chunk", [4, 7, 1 << 20])
def test_every_step_th_row_whatever_the_chunks(chunk, monkeypatch):
    from topo.results import passes

    monkeypatch.setattr(passes, "CHUNK", chunk)
    rng = np.random.default_rng(4)
    log = _fifo_log(rng, 50, 3, 1)
    for step in (1, 3, 7, 60):
        thin = log.every(step)
        assert np.array_equal(thin.seq, log.seq[::step]) and np.array_equal(thin.finish_s, log.finish_s[::step])
        assert np.array_equal(thin.latency_ms, log.latency_ms[::step])
    empty = TupleLog(*(c[:0] for c in (log.seq, log.source, log.worker, log.arrival_s, log.enqueue_s, log.start_s,
                                       log.finish_s)))
    assert len(empty.every(3)) == 0
