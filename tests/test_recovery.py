"""Recovery's parts without a cluster: the chaos grammar, durable checkpoint parts, and the aggregator's commit log
(commit = durable, restart = the last checkpoint, fences for dead worker and source incarnations)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from topo.chaos import check_events, parse_event, resolve_any
from topo.ray_engine.aggregator import Aggregator
from topo.ray_engine.checkpoint import CheckpointStore
from topo.ray_engine.protocol import Flush, batch_log, tag
from topo.spec import SpecError, TopologySpec

# --- the chaos grammar


@pytest.mark.parametrize(("text", "event"), [
    ("kill-worker:2@5", ("kill-worker", 2, 5.0)),
    ("kill-source:0@1.5s", ("kill-source", 0, 1.5)),
    ("kill-aggregator@3", ("kill-aggregator", None, 3.0)),
    ("kill-controller@0", ("kill-controller", None, 0.0)),
    (" kill-any@7 ", ("kill-any", None, 7.0)),
])
def test_chaos_events_parse(text, event):
    assert parse_event(text) == event


@pytest.mark.parametrize(("text", "says"), [
    ("kill-node:1@5", "the action must be one of"),
    ("kill-worker@5", "expected kill-worker:I@S"),
    ("kill-aggregator:1@5", "expected kill-aggregator@S"),
    ("kill-worker:x@5", "expected kill-worker:I@S, kill-source:I@S"),
    ("kill-worker:1", "the time must be"),
    ("kill-source:1@-2", "the time must be"),
    ("kill-any@nan", "the time must be"),
])
def test_bad_chaos_events_are_one_clear_error(text, says):
    with pytest.raises(SpecError, match=says):
        parse_event(text)


def test_chaos_targets_are_checked_against_the_topology():
    with pytest.raises(SpecError, match="there are 2 sources"):
        check_events(["kill-source:2@1"], workers=4, sources=2)
    with pytest.raises(SpecError, match="no controller"):
        check_events(["kill-controller@1"], workers=4, sources=2, controller=False)
    with pytest.raises(SpecError, match="there are 4 workers"):
        TopologySpec(engine="ray", workers=4, chaos=(("kill-worker", 4, 1.0),))
    assert check_events(["kill-any@3", "kill-worker:1@1"], 4, 2) == [("kill-worker", 1, 1.0), ("kill-any", None, 3.0)]


def test_kill_any_draws_from_every_actor_with_the_seed():
    events = [("kill-any", None, float(i)) for i in range(40)]
    drawn = resolve_any(events, seed=5, workers=3, sources=2, controller=True)
    assert drawn == resolve_any(events, seed=5, workers=3, sources=2, controller=True)
    assert drawn != resolve_any(events, seed=6, workers=3, sources=2, controller=True)
    kinds = {action for action, _, _ in drawn}
    assert kinds == {"kill-worker", "kill-source", "kill-aggregator", "kill-controller"}
    assert "kill-controller" not in {a for a, _, _ in resolve_any(events, 5, 3, 2, controller=False)}


# --- checkpoint parts


def test_parts_are_written_whole_and_read_back_in_order(tmp_path):
    store = CheckpointStore(tmp_path, "aggregator")
    for i in range(3):
        store.write({"part": i})
    (tmp_path / ".aggregator-crashed.tmp").write_bytes(b"half a pick")  # a writer that died mid-write
    assert [p["part"] for p in store.load()] == [0, 1, 2]
    again = CheckpointStore(tmp_path, "aggregator")  # a restarted writer goes on after the parts that survived
    again.write({"part": 3})
    assert [p["part"] for p in again.load()] == [0, 1, 2, 3]
    kept = CheckpointStore(tmp_path, "controller")
    kept.write("v1", replace=True)
    kept.write("v2", replace=True)
    assert kept.load() == ["v2"]
    assert [p["part"] for p in store.load()] == [0, 1, 2, 3]  # each kind has its own parts


class Unpicklable:
    def __reduce__(self):
        raise pickle.PicklingError("no")


def test_a_part_that_cannot_be_written_leaves_nothing(tmp_path):
    store = CheckpointStore(tmp_path, "aggregator")
    with pytest.raises(pickle.PicklingError):
        store.write({"state": Unpicklable()})
    assert list(tmp_path.iterdir()) == [] and store.load() == []


# --- the aggregator's commit log (a plain object here; on Ray it is an actor)

SOURCES, SHARE = 2, 50


def _flush(worker: int, incarnation: int, batches: list[tuple[int, int, list[int]]], op) -> Flush:
    """A flush of `batches` = (source, batch id, input positions) with keys = positions."""
    sources, ids, logs, keys = [], [], [], []
    for source, batch_id, positions in batches:
        seq = source + SOURCES * np.asarray(positions, np.int64)
        sources.append(source)
        ids.append(batch_id)
        logs.append(batch_log(seq, source, seq * 0.0, 0.0, 0.0, seq * 0.0 + 1.0))
        keys.append(np.asarray(positions, np.uint64))
    state = op.update(op.empty(), np.concatenate(keys), None)
    log = {name: np.concatenate([part[name] for part in logs]) for name in logs[0]}
    return Flush(worker, incarnation, np.asarray(sources, np.int32), np.asarray(ids, np.int64), state, log)


def _aggregator(directory, every_s: float | None = 3600.0) -> Aggregator:
    return Aggregator("wordcount", workers=2, sources=SOURCES, shares=[SHARE] * SOURCES,
                      checkpoint_dir=None if directory is None else str(directory), checkpoint_every_s=every_s)


def test_a_batch_is_committed_only_once_durable(tmp_path):
    agg = _aggregator(tmp_path)
    w0, _ = agg.register(0, 1, {})
    accepted, told = agg.flush(_flush(0, w0, [(0, 1, [0, 1, 2])], agg.op))
    assert accepted and len(told) == 0  # merged, not yet durable: its source must keep it
    assert agg.committed(0, [1]) == [1]  # asking makes what is merged durable first
    accepted, told = agg.flush(_flush(0, w0, [(1, 7, [3])], agg.op))
    assert accepted and sorted(map(tuple, told.tolist())) == [(0, 1)]  # the worker hears of it on its next flush
    accepted, _ = agg.flush(_flush(0, w0, [(0, 1, [0, 1, 2])], agg.op))
    assert not accepted and agg.stats["duplicate"] == 1  # never merged twice
    accepted, _ = agg.flush(_flush(0, w0, [(1, 9, [8]), (1, 9, [8])], agg.op))
    assert not accepted and agg.stats["duplicate"] == 2  # not even twice within one flush


def test_a_restarted_aggregator_restores_its_last_checkpoint_and_fences(tmp_path):
    agg = _aggregator(tmp_path)
    w0, _ = agg.register(0, 1, {})
    w1, _ = agg.register(1, 2, {})
    agg.flush(_flush(0, w0, [(0, 1, [0, 1]), (1, 1, [0])], agg.op))
    agg.checkpoint_now()
    agg.flush(_flush(1, w1, [(0, 2, [2, 3])], agg.op))  # merged after the last checkpoint: lost with the aggregator
    back = _aggregator(tmp_path)
    assert back.alive()["starts"] == 2 and back.restored["parts"] >= 1
    assert back.committed(0, [1, 2]) == [1] and back.committed(1, [1]) == [1]
    state, log, stats = back.result()
    assert back.op.equal(state, back.op.exact(np.asarray([0, 1, 0], np.uint64), None))
    assert sorted(log["seq"].tolist()) == [0, 1, 2] and sorted(log["worker"].tolist()) == [0, 0, 0]
    assert [r["incarnation"] for r in stats["registrations"]] == [0, 0]
    # the lost flush is replayed and merged once; a late flush of a dead worker incarnation is refused
    assert back.flush(_flush(1, w1, [(0, 2, [2, 3])], back.op))[0]
    w1b, _ = back.register(1, 3, {})
    assert not back.flush(_flush(1, w1, [(0, 3, [4])], back.op))[0] and back.stats["stale"] == 1
    assert back.flush(_flush(1, w1b, [(0, 3, [4])], back.op))[0]


def test_a_restarted_source_resumes_after_what_is_committed(tmp_path):
    agg = _aggregator(tmp_path)
    w0, _ = agg.register(0, 1, {})
    assert agg.register_source(0) == 0
    agg.flush(_flush(0, w0, [(0, tag(0, 0), [0, 1, 2]), (0, tag(0, 2), [5])], agg.op))
    assert agg.register_source(0) == 1  # the source died and came back
    assert agg.register(1, 2, {})[1] == [1, 0]  # a worker starting now drops batches of source 0's dead incarnation
    agg.flush(_flush(0, w0, [(0, tag(0, 3), [6])], agg.op))  # served before the fence: still counts
    done = agg.resume_source(0, 1)
    assert np.flatnonzero(done).tolist() == [0, 1, 2, 5, 6]
    assert not agg.flush(_flush(0, w0, [(0, tag(0, 4), [7])], agg.op))[0]  # the dead incarnation, after the resume
    assert agg.stats["stale_source"] == 1
    assert agg.flush(_flush(0, w0, [(0, tag(1, 0), [3, 4, 7])], agg.op))[0]


def test_without_checkpoints_merged_is_committed_at_once():
    agg = _aggregator(None, every_s=None)
    w0, _ = agg.register(0, 1, {})
    accepted, told = agg.flush(_flush(0, w0, [(0, 1, [0])], agg.op))
    assert accepted and told.tolist() == [[0, 1]]


def test_worker_deaths_come_from_registrations_whatever_killed_them():
    """A worker process back under a new pid is a death: one a chaos kill explains is that kill's recovery (two
    kills of a process before its workers registered share one comeback), any other is a death from outside."""
    from types import SimpleNamespace

    from topo.ray_engine.outputs import _worker_deaths

    def reg(worker, pid, at):
        return {"worker": worker, "pid": pid, "at": 100.0 + at, "started": 100.0 + at - 0.5}

    registrations = [reg(0, 1, 0.1), reg(1, 1, 0.1), reg(2, 2, 0.1),  # the first incarnations
                     reg(0, 3, 2.0), reg(1, 3, 2.1),  # process of workers 0-1 back after the kills at 0.6 and 1.0
                     reg(2, 4, 3.0)]  # worker 2's process back: nothing in the run killed it
    got = SimpleNamespace(t0=100.0, aggregator={"registrations": registrations})
    kills = [{"action": "kill-worker", "actor": "worker 0", "process_workers": [0, 1], "done_s": at, "pid": 1}
             for at in (0.6, 1.0)]
    rows = _worker_deaths(got, kills)
    assert [(r["actor"], r["back_s"]) for r in rows] == [("worker 0", 2.0), ("worker 0", 2.0),
                                                         ("worker 2 (pid 4)", 3.0)]
    assert rows[2]["detected_s"] == 2.5 and "killed_s" not in rows[2] and rows[0]["killed_s"] == 0.6
