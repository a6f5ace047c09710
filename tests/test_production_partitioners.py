"""Today's production partitioners: Flink 2.x's adaptive partitioner and the Kafka producer's built-in one.

Both read the backlog a source sees on each channel (tuples sent there minus tuples acked), so the acks must
say how many tuples they acknowledge: the first tests check that they do.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import groupings
from groupings.adaptive.kafka_adaptive import next_channel
from groupings.feedback import AckReport
from groupings.reference import py_grouping
from topo.data.dataset import load_stream
from topo.data.streams import StreamArrays
from topo.sim import simulate
from topo.spec import CLI_BATCH_SIZE, TopologySpec


class Counting:
    """Round robin that adds up what it sent to each worker and what the acks say was acknowledged."""

    def __init__(self, n: int) -> None:
        self.n, self.i = n, 0
        self.sent, self.acked = np.zeros(n), np.zeros(n)
        self.sizes: list[float] = []

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        out = ((self.i + np.arange(len(keys))) % self.n).astype(np.int32)
        self.i += len(keys)
        self.sent += np.bincount(out, minlength=self.n)
        return out

    def feedback(self, report: AckReport) -> None:
        np.add.at(self.acked, report.workers, report.acked)
        self.sizes += report.acked.tolist()

    def resize(self, workers: int) -> None:
        self.n = workers

    def stats(self) -> dict:
        return {}


def test_acks_carry_the_size_of_the_buffer_they_acknowledge():
    made: list[Counting] = []

    def make(source: int) -> Counting:
        made.append(Counting(3))
        return made[-1]

    spec = TopologySpec(grouping="rr", workers=3, sources=2, cost_ms=0.5, batch_size=7, max_pending=2)
    simulate(spec, StreamArrays(np.arange(1000, dtype=np.uint64)), make_grouping=make)
    for g in made:
        assert np.array_equal(g.acked, g.sent)  # every tuple sent is acked once, by the worker it went to
        assert 1 <= min(g.sizes) and max(g.sizes) == 7  # one buffer each: at most batch_size tuples


def test_reports_built_without_acked_counts_carry_zeros():
    assert AckReport.of([0, 2], load=[0.1, 0.2]).acked.tolist() == [0.0, 0.0]
    assert AckReport.empty().acked.size == 0
    assert AckReport.of([1], acked=[5]).acked.dtype == np.float64


# --- both: registered with the production defaults, and equal to their plain per-tuple versions ------------------


NAMES = ["flink_adaptive", "kafka_adaptive"]
DEFAULTS = {
    "flink_adaptive": {"max_traverse": 4, "buffer_tuples": 0},  # max-traverse-size; 0: the run's --batch-size
    # batch.size is the command line's buffer; adaptive partitioning on, availability timeout off (Kafka's defaults)
    "kafka_adaptive": {"batch": CLI_BATCH_SIZE, "adaptive": True, "availability_timeout_ms": 0.0},
}


@pytest.mark.parametrize("name", NAMES)
def test_registered_after_lasg_with_the_production_defaults(name):
    names = groupings.names()
    assert names.index(name) == names.index("lasg") + 1 + NAMES.index(name)
    assert {p["name"]: p["default"] for p in groupings.describe(name)["params"]} == DEFAULTS[name]


@pytest.mark.parametrize(
    "name, params",
    [
        ("flink_adaptive", {"max_traverse": 1}),
        ("kafka_adaptive", {"batch": 0}),
        ("kafka_adaptive", {"availability_timeout_ms": -1}),
        ("kafka_adaptive", {"adaptive": "maybe"}),
    ],
)
def test_bad_parameters_are_one_line_errors(name, params):
    with pytest.raises(ValueError) as err:
        groupings.make(name, 4, **params)
    assert "\n" not in str(err.value) and next(iter(params)) in str(err.value)


ROUTE = hs.tuples(hs.just("route"), hs.integers(0, 250), hs.one_of(hs.none(), hs.floats(0, 0.03)))
ACKED = hs.lists(hs.tuples(hs.integers(0, 99), hs.integers(0, 60)), max_size=8)  # (worker mod n, tuples acked)
ACK = hs.tuples(hs.just("ack"), ACKED, hs.floats(0, 0.03))
RESIZE = hs.tuples(hs.just("resize"), hs.integers(1, 9))
PARAMS = {
    "flink_adaptive": hs.fixed_dictionaries({"max_traverse": hs.integers(2, 10)}),
    "kafka_adaptive": hs.fixed_dictionaries(
        {
            "batch": hs.integers(1, 40),
            "adaptive": hs.booleans(),
            "availability_timeout_ms": hs.sampled_from([0.0, 2.0, 10.0]),
        }
    ),
}


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hs.data())
def test_equals_the_plain_version_tuple_for_tuple_with_feedback_interleaved(name, data):
    workers = data.draw(hs.integers(1, 9), label="workers")
    params = data.draw(PARAMS[name], label="params")
    seed = data.draw(hs.integers(0, 2**40), label="seed")
    fast, plain = groupings.make(name, workers, seed=seed, **params), py_grouping(name, workers, seed=seed, **params)
    clock, n = 0.0, workers
    for op in data.draw(hs.lists(hs.one_of(ROUTE, ACK, RESIZE), max_size=25), label="ops"):
        if op[0] == "route":
            keys = np.arange(op[1], dtype=np.uint64)
            now = None
            if op[2] is not None:
                clock += op[2]
                now = clock
            assert np.array_equal(fast.route(keys, now), plain.route(keys, now))
        elif op[0] == "ack":
            clock += op[2]
            report = AckReport.of([w % n for w, _ in op[1]], acked=[a for _, a in op[1]], now=clock)
            fast.feedback(report)
            plain.feedback(report)
        else:
            n = op[1]
            fast.resize(n)
            plain.resize(n)
    assert fast.backlog().tolist() == plain.backlog


@pytest.mark.parametrize("name", NAMES)
def test_any_split_into_pieces_routes_like_the_whole(name):
    keys = np.arange(5000, dtype=np.uint64)
    params = {"batch": 7} if name == "kafka_adaptive" else {}
    want = groupings.make(name, 5, seed=3, **params).route(keys, 0.0)
    g = groupings.make(name, 5, seed=3, **params)
    got = np.concatenate([g.route(keys[a:b], 0.0) for a, b in ((0, 1), (1, 999), (999, 1000), (1000, 5000))])
    assert np.array_equal(want, got)


# --- flink_adaptive: round robin that walks past backlogged channels ----------------------------------------------


def ack_all_but(g, out: np.ndarray, stalled: int, now: float = 0.0) -> None:
    """Every worker but `stalled` acks what `out` sent it."""
    sent = np.bincount(out, minlength=g.workers)
    sent[stalled] = 0
    acking = np.flatnonzero(sent)
    g.feedback(AckReport.of(acking, acked=sent[acking], now=now))


def test_flink_with_nothing_acked_is_plain_round_robin():
    g = groupings.make("flink_adaptive", 7)
    assert np.array_equal(g.route(np.arange(10_000, dtype=np.uint64)), np.arange(10_000) % 7)
    assert g.stats()["detours"] == 0


def test_flink_sends_nothing_to_a_backlogged_channel_while_one_within_reach_is_empty():
    g = groupings.make("flink_adaptive", 8)
    first = g.route(np.arange(800, dtype=np.uint64))  # 100 each
    ack_all_but(g, first, stalled=3)
    out = []
    for _ in range(500):
        out.append(g.route(np.arange(8, dtype=np.uint64)))
        ack_all_but(g, out[-1], stalled=3)
    counts = np.bincount(np.concatenate(out), minlength=8)
    assert counts[3] == 0 and counts.sum() == 4000
    assert counts.max() - counts[counts > 0].min() <= 8  # the others share evenly
    assert g.backlog()[3] == 100 and g.stats()["detours"] > 0


def test_flink_looks_no_further_than_max_traverse_and_prefers_the_first_on_equal_backlogs():
    g = groupings.make("flink_adaptive", 8, max_traverse=2)
    g.route(np.arange(800, dtype=np.uint64))  # 100 each, cursor on channel 7
    g.feedback(AckReport.of([0, 1, 2, 5], acked=[40, 70, 100, 100]))  # backlogs 60 30 0 100 100 0 100 100
    # from 7: {0: 60, 1: 30} -> 1; then {2: 0} at once -> 2; then {3: 100, 4: 100} -> 3 (first); {4, 5: 0} -> 5
    assert g.route(np.arange(4, dtype=np.uint64)).tolist() == [1, 2, 3, 5]
    wide = groupings.make("flink_adaptive", 8, max_traverse=8)
    wide.route(np.arange(800, dtype=np.uint64))
    wide.feedback(AckReport.of([5], acked=[100]))
    assert wide.route(np.arange(1, dtype=np.uint64)).tolist() == [5]  # 0..4 all backlogged: the walk reaches 5


# --- kafka_adaptive: sticky batches drawn against the queues ------------------------------------------------------


def test_kafka_sticks_to_a_channel_for_exactly_a_batch():
    g = groupings.make("kafka_adaptive", 6, seed=2, batch=25)
    out = np.concatenate([g.route(np.arange(k, dtype=np.uint64), 0.0) for k in (3, 400, 97, 500)])
    runs = out.reshape(-1, 25)
    assert (runs == runs[:, :1]).all()
    assert g.stats()["switches"] == 40
    assert len(set(runs[:, 0].tolist())) == 6


def test_kafka_draws_channels_in_proportion_to_max_queue_plus_one_minus_queue():
    backlog = np.array([0, 10, 30, 20, 25], dtype=np.int64)  # batches queued: 0 1 3 2 3 -> weights 4 3 1 2 1
    since = np.zeros(5)
    rng, counts = np.array([12345], dtype=np.uint64), np.zeros(2, dtype=np.int64)
    draws = [next_channel(backlog, since, 0.0, 10, True, 0.0, rng, counts) for _ in range(44_000)]
    shares = np.bincount(draws, minlength=5) / len(draws)
    assert shares == pytest.approx(np.array([4, 3, 1, 2, 1]) / 11, abs=0.01)
    uniform = [next_channel(backlog, since, 0.0, 10, False, 0.0, rng, counts) for _ in range(20_000)]
    assert np.bincount(uniform, minlength=5) / 20_000 == pytest.approx(np.full(5, 0.2), abs=0.015)


def test_kafka_skips_a_channel_that_has_not_acked_within_the_timeout():
    backlog = np.array([5, 5, 5], dtype=np.int64)
    since = np.array([0.0, 0.095, 0.0])  # channels 0 and 2 last heard from at 0, channel 1 at 95 ms
    rng, counts = np.array([7], dtype=np.uint64), np.zeros(2, dtype=np.int64)
    draws = {next_channel(backlog, since, 0.1, 10, True, 0.05, rng, counts) for _ in range(200)}
    assert draws == {1} and counts[1] == 400
    backlog[1] = 0
    since[1] = 0.0  # an idle channel is never unavailable, however long ago it was heard from
    assert {next_channel(backlog, since, 0.1, 10, True, 0.05, rng, counts) for _ in range(200)} == {1}
    backlog[1] = 5  # every channel stalled: uniform over all of them
    assert {next_channel(backlog, since, 0.1, 10, True, 0.05, rng, counts) for _ in range(200)} == {0, 1, 2}


def test_kafka_availability_timeout_starves_a_stalled_worker_until_it_acks():
    def run(timeout_ms: float) -> tuple[np.ndarray, np.ndarray]:
        g = groupings.make("kafka_adaptive", 4, seed=5, batch=10, availability_timeout_ms=timeout_ms)
        first = g.route(np.arange(400, dtype=np.uint64), 0.0)
        ack_all_but(g, first, stalled=2, now=0.01)
        later = []
        for step in range(1, 40):  # every other worker acks all it gets, 10 ms at a time; worker 2 never does
            later.append(g.route(np.arange(40, dtype=np.uint64), 0.01 * step))
            ack_all_but(g, later[-1], stalled=2, now=0.01 * step + 0.005)
        return first, np.concatenate(later[3:])  # choices made from 30 ms on: worker 2's backlog is 30 ms old

    first, later = run(20.0)
    assert (first == 2).any() and not (later == 2).any()
    _, without = run(0.0)
    assert (without == 2).any()  # its queue lowers its odds, but without the timeout it keeps some


# --- on the engine: exact, and the slow workers get less than a round robin gives them -----------------------------


@pytest.mark.parametrize("name", NAMES)
def test_in_the_simulator_slow_workers_get_less_and_the_run_stays_exact(name):
    spec = TopologySpec(
        grouping=name,
        workers=4,
        capacities=(1.0, 1.0, 0.3, 0.3),
        cost_ms=1.0,
        rate=2080.0,
        stream="zipf:z=1.1,keys=5000,messages=16000,seed=7",
        batch_size=100,
        linger_ms=5.0,
        params={"batch": 100} if name == "kafka_adaptive" else {},
    )
    s = simulate(spec, load_stream(spec.stream)).summary
    assert s["exact"] is True and s["tuples_processed"] == 16_000
    share = np.array([w["tuples"] for w in s["per_worker"]]) / 16_000
    assert share[2:].max() < 0.2 < share[:2].min()  # a round robin gives each 0.25


def test_production_names_are_accepted_as_the_systems_spell_them():
    from groupings import registry

    assert registry.lookup("flink-adaptive").name == "flink_adaptive"
    assert registry.lookup(" Kafka-Adaptive ").name == "kafka_adaptive"
    assert groupings.make("flink-adaptive", workers=3, seed=1).name == "flink_adaptive"
