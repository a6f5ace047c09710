"""The simulator's changing world: capacity and scale schedules, controllers that migrate state, worker
delegation signals on acks, periodic aggregation."""

from __future__ import annotations

import numpy as np
import pytest

from groupings.control import Controller
from groupings.feedback import AckReport, WorkerReport
from topo.data.streams import StreamArrays
from topo.results.aggregation import aggregation_cost
from topo.schedule import Change, parse_capacity_schedule, parse_scale_schedule
from topo.sim import simulate
from topo.spec import SpecError, TopologySpec


class RoundRobin:
    """Tuple i goes to worker i mod n; keeps every ack report it gets."""

    def __init__(self, n: int) -> None:
        self.n, self.i = n, 0
        self.reports: list[AckReport] = []
        self.sizes: list[int] = []

    def route(self, keys, now=None):
        out = (self.i + np.arange(len(keys))) % self.n
        self.i += len(keys)
        return out.astype(np.int32)

    def feedback(self, report: AckReport) -> None:
        self.reports.append(report)

    def resize(self, workers: int) -> None:
        self.sizes.append(workers)
        self.n = workers

    def stats(self) -> dict:
        return {}


def keys(n: int, distinct: int | None = None) -> StreamArrays:
    ids = np.arange(n, dtype=np.uint64)
    return StreamArrays(ids if distinct is None else ids % np.uint64(distinct))


# --- schedules


def test_capacity_schedule_by_message_count():
    spec = TopologySpec(grouping="x", workers=1, sources=1, cost_ms=1.0, batch_size=10,
                        capacity_schedule=(Change(100, "messages", (2.0,)),))
    r = simulate(spec, keys(300), make_grouping=lambda s: RoundRobin(1))
    service = (r.log.finish_s - r.log.start_s) * 1e3
    order = np.argsort(r.log.seq)
    assert np.allclose(service[order][:100], 1.0)  # the batch that reaches message 100 still runs at the old speed
    assert np.allclose(service[order][100:], 0.5)
    assert r.summary["capacity_changes"][0]["capacities"] == [2.0]


def test_imbalance_uses_time_weighted_capacity():
    # two workers swap speeds halfway through in time: on average both had capacity 1.5
    spec = TopologySpec(grouping="x", workers=2, sources=1, cost_ms=1.0, capacities=(2.0, 1.0), rate=1000.0,
                        batch_size=1, linger_ms=0, capacity_schedule=(Change(1.0, "seconds", (1.0, 2.0)),))
    r = simulate(spec, keys(2000), make_grouping=lambda s: RoundRobin(2))
    caps = [w["capacity"] for w in r.summary["per_worker"]]
    assert caps == pytest.approx([1.5, 1.5], abs=0.01)


def test_scale_schedule_resizes_every_source_and_routes_to_new_workers():
    made: list[RoundRobin] = []

    def make(s: int) -> RoundRobin:
        made.append(RoundRobin(2))
        return made[-1]

    spec = TopologySpec(grouping="x", workers=2, sources=2, cost_ms=0.1, rate=10_000.0, batch_size=10,
                        scale_schedule=(Change(0.1, "seconds", 4), Change(0.2, "seconds", 3)))
    r = simulate(spec, keys(3000), make_grouping=make)
    assert all(g.sizes == [4, 3] for g in made)
    log = r.log
    assert not np.any(log.worker[log.arrival_s < 0.09] >= 2)
    assert np.any(log.worker[(log.arrival_s > 0.11) & (log.arrival_s < 0.19)] == 3)
    assert not np.any(log.worker[log.arrival_s > 0.21] == 3)
    assert len(r.summary["per_worker"]) == 4
    assert [a["workers"] for a in r.summary["active_workers"]] == [2, 4, 3]
    assert r.summary["exact"] is True


def test_routing_to_an_inactive_worker_is_an_error():
    class Deaf(RoundRobin):
        def resize(self, workers: int) -> None:
            pass  # keeps routing to the worker that left

    spec = TopologySpec(grouping="x", workers=2, sources=1, cost_ms=0.1, batch_size=10, max_pending=1,
                        scale_schedule=(Change(50, "messages", 1),))
    with pytest.raises(ValueError, match="active"):
        simulate(spec, keys(500), make_grouping=lambda s: Deaf(2))


@pytest.mark.parametrize(
    "text, fragment",
    [("6e6", "AT:VALUE"), ("x:1,1", "neither"), ("5:1,a", "numbers"), ("5:1", "1 capacities for 2"),
     ("5:1,0", "positive"), ("2s:1,1;1s:1,1", "time order"), ("5:1,1;2s:1,1", "mixes"), ("1.5:1,1", "whole")],
)
def test_capacity_schedule_errors(text, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_capacity_schedule(text, 2)


def test_scale_schedule_errors_and_capacities_for_the_largest_pool():
    with pytest.raises(SpecError, match="at least one"):
        parse_scale_schedule("3s:0")
    grow = parse_scale_schedule("3s:6")
    assert TopologySpec(workers=4, scale_schedule=grow).capacity_list == [1.0] * 6
    assert TopologySpec(workers=4, scale_schedule=grow, capacities=(2, 2, 2, 2, 1, 1)).capacity_list[4:] == [1, 1]
    with pytest.raises(SpecError, match="--capacities"):
        TopologySpec(workers=4, scale_schedule=grow, capacities=(2, 2, 2))


# --- controllers and migration


class Shift(Controller):
    """Version v sends key k to (k + v) mod n; moves everything once, at its first step."""

    def __init__(self, n: int) -> None:
        super().__init__(n, seed=0, period_s=0.05)
        self.reports: list[WorkerReport] = []

    def step(self, report: WorkerReport) -> bool:
        self.reports.append(report)
        if self.version == 0:
            self.versions.install(None)
            return True
        return False

    def lookup(self, keys, version=None):
        v = self.version if version is None else version
        return ((np.asarray(keys, dtype=np.uint64) + np.uint64(v)) % np.uint64(self.workers)).astype(np.int32)


class Follow:
    """A source grouping that routes with the controller's current version."""

    def __init__(self, controller: Shift) -> None:
        self.controller = controller
        controller.attach(self)

    def route(self, keys, now=None):
        return self.controller.lookup(keys)

    def feedback(self, report):
        pass

    def resize(self, workers):
        pass

    def stats(self):
        return {}


def test_controller_repartition_moves_state_of_seen_keys_and_pauses_workers():
    ctl = Shift(3)
    spec = TopologySpec(grouping="x", workers=3, sources=2, cost_ms=0.1, rate=20_000.0, batch_size=10,
                        migration_ms_per_key=1.0)
    r = simulate(spec, keys(4000, distinct=30), make_grouping=lambda s: Follow(ctl), controller=ctl)
    s = r.summary
    # by the first step (0.05 s = 1000 messages) all 30 keys were seen; all of them change owner
    assert s["migrations"] == 1 and s["migrated_keys"] == 30
    assert s["migration_pause_s"] == pytest.approx(2 * 30 * 1e-3)  # both ends pause 1 ms per key
    assert s["exact"] is True
    # reports cover consecutive periods and count what was done in each
    assert sum(int(rep.tuples.sum()) for rep in ctl.reports) <= 4000
    assert all(rep.period_s == 0.05 for rep in ctl.reports)
    # the pause shows: a tuple queued after the repartition does not start until its worker's pause is over
    later = r.log.enqueue_s > 0.05
    assert np.all(r.log.start_s[later] >= 0.05 + 0.02 - 1e-9)  # each worker sends 10 keys and takes 10


# --- worker delegation


class Toy:
    """Worker 0 always wants less, the others always want more, once per window."""

    window_s = 0.01

    def __init__(self) -> None:
        self.calls = 0

    def signal(self, worker, source, now, utilization):
        self.calls += 1
        assert 0.0 <= utilization <= 1.0
        return -1 if worker == 0 else 1

    def resize(self, workers):
        pass

    def stats(self):
        return {"calls": self.calls}


def test_delegation_signals_ride_on_acks_to_the_sender():
    made: list[RoundRobin] = []

    def make(s: int) -> RoundRobin:
        made.append(RoundRobin(3))
        return made[-1]

    toy = Toy()
    spec = TopologySpec(grouping="x", workers=3, sources=2, cost_ms=0.2, batch_size=9, max_pending=2)
    r = simulate(spec, keys(900), make_grouping=make, delegation=toy)
    for g in made:
        for rep in g.reports:
            assert np.all(rep.signals[rep.workers == 0] == -1) and np.all(rep.signals[rep.workers != 0] == 1)
    heard = sum(len(rep) for g in made for rep in g.reports)
    assert toy.calls >= heard > 0
    assert r.summary["signals"]["decrease"] > 0 and r.summary["signals"]["increase"] > 0


# --- periodic aggregation


def test_aggregation_counts_keys_per_worker_per_period():
    finish = np.array([0.1, 0.2, 0.3, 1.1, 1.2, 1.3])
    worker = np.array([0, 0, 1, 0, 1, 1], dtype=np.int32)
    key = np.array([7, 7, 7, 7, 8, 8], dtype=np.uint64)
    for size in (1, 2, 6):  # the log a chunk at a time: each worker's open period carries over
        cost = aggregation_cost(((key[a : a + size], worker[a : a + size], finish[a : a + size])
                                 for a in range(0, 6, size)), period_s=1.0)
        # period 0: w0 {7}, w1 {7}; period 1: w0 {7}, w1 {8}
        assert cost["flushes"] == 4 and cost["keys_flushed"] == 4


def test_aggregation_a_chunk_at_a_time_counts_what_the_whole_log_holds():
    rng = np.random.default_rng(4)
    for _ in range(100):
        n, workers = int(rng.integers(1, 300)), int(rng.integers(1, 6))
        worker = rng.integers(0, workers, n).astype(np.int32)
        finish = np.zeros(n)
        for w in range(workers):  # a FIFO worker finishes in log order
            rows = np.flatnonzero(worker == w)
            finish[rows] = np.cumsum(rng.exponential(0.1, rows.size))
        key = rng.integers(0, int(rng.integers(1, 20)), n).astype(np.uint64)
        period = float(rng.choice([0.05, 0.3, 10.0]))
        bucket = np.floor(finish / period).astype(int)
        flushes = {(int(w), int(b)) for w, b in zip(worker, bucket, strict=True)}
        flushed = {(int(w), int(b), int(k)) for w, b, k in zip(worker, bucket, key, strict=True)}
        for size in (1, 3, 50, n):
            cost = aggregation_cost(((key[a : a + size], worker[a : a + size], finish[a : a + size])
                                     for a in range(0, n, size)), period)
            assert (cost["flushes"], cost["keys_flushed"]) == (len(flushes), len(flushed))
    back = [(np.array([1], np.uint64), np.array([0]), np.array([2.5])),
            (np.array([1], np.uint64), np.array([0]), np.array([0.5]))]
    with pytest.raises(ValueError, match="go back"):
        aggregation_cost(back, 1.0)


def test_aggregation_in_the_summary():
    spec = TopologySpec(grouping="x", workers=2, sources=1, cost_ms=0.1, aggregate_every_s=0.01)
    r = simulate(spec, keys(2000, distinct=10), make_grouping=lambda s: RoundRobin(2))
    agg = r.summary["aggregation"]
    assert agg["period_s"] == 0.01 and agg["flushes"] >= 2 and agg["keys_flushed"] <= 2 * 10 * agg["flushes"]


class Drain(Shift):
    """Keeps every key where it is (version 0) and says worker 2 is still being drained after a shrink."""

    def step(self, report: WorkerReport) -> bool:
        self.reports.append(report)
        return False

    @property
    def draining(self) -> frozenset[int]:
        return frozenset({2}) if self.workers < 3 else frozenset()

    def lookup(self, keys, version=None):
        return (np.asarray(keys, dtype=np.uint64) % np.uint64(3)).astype(np.int32)  # the placement before the shrink


def test_workers_being_drained_may_still_take_tuples_after_a_shrink():
    ctl = Drain(3)
    spec = TopologySpec(grouping="x", workers=3, sources=1, cost_ms=0.1, rate=10_000.0, batch_size=10,
                        scale_schedule=(Change(0.05, "seconds", 2),))
    r = simulate(spec, keys(2000, distinct=30), make_grouping=lambda s: Follow(ctl), controller=ctl)
    assert np.any(r.log.worker[r.log.arrival_s > 0.06] == 2)  # the controller has not moved worker 2's keys yet
    assert r.summary["exact"] is True
