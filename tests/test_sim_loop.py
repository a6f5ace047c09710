"""The simulator's compiled event loop runs the same events as its Python loop: same logs, batches and summaries."""

from __future__ import annotations

import json

import numpy as np
import pytest

import groupings
from groupings.lossy import SlidingLossyCounter, entries
from topo.data.streams import stream_from_spec
from topo.model.pairwise import pairwise_sum
from topo.sim import compiled
from topo.sim.simulator import Simulation
from topo.spec import TopologySpec

STREAM = "zipf:z=1.2,keys=3000,messages=20000,seed=3"

CASES = [
    ("kg", dict(workers=12, sources=3, cost_ms=0.2)),  # saturating input, several sources
    ("sg", dict(workers=30, sources=1, cost_ms=0.05, batch_size=20, max_pending=4)),
    ("pkg", dict(workers=8, sources=2, cost_ms=1.0, rate=7000, max_spout_pending=300)),  # a closed loop
    ("dc", dict(workers=12, sources=2, cost_ms=0.5, rate=15000, net_delay_ms=1.0,
                capacities=(1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 2, 2, 2, 2))),  # delays on both trips, uneven workers
    ("wc", dict(workers=10, sources=4, cost_ms=0.3, rate=20000, duration=0.6, linger_ms=0)),  # an end, no linger
    ("chbl", dict(workers=10, sources=1, cost_ms=0.3, duration=0.5, net_delay_ms=0.5)),
    ("potc", dict(workers=6, sources=2, cost_ms=0.4, rate=12000)),
    # each source flushing on its own phase (Flink's flusher per task), with buffers that fill between ticks
    ("pkg", dict(workers=6, sources=3, cost_ms=0.4, rate=12000, flush_phase="spread", linger_ms=7, batch_size=64)),
    # CG: the workers' meters and delegation in the loop, its pairing in Python on each step that has signals
    ("cg", dict(workers=12, sources=3, cost_ms=0.2)),
    ("cg", dict(workers=12, sources=2, cost_ms=0.5, rate=15000, net_delay_ms=1.0,
                capacities=(1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 2, 2, 2, 2))),  # acks on the wire carry their fields
    ("cg", dict(workers=10, sources=2, cost_ms=0.3, rate=25000, params={"measure": "queue", "probe": True})),
    ("cg", dict(workers=8, sources=2, cost_ms=1.0, rate=7000, max_spout_pending=300, params={"measure": "busy"})),
    # a slot of half a second: each meter keeps hundreds of marks, more than the loop first makes room for
    ("cg", dict(workers=6, sources=2, cost_ms=0.5, rate=9000, net_delay_ms=0.3, params={"t0": 0.5})),
    # FISH: its own routing state, and each worker's time per tuple from the acks' meters
    ("fish", dict(workers=12, sources=3, cost_ms=0.2)),
    ("fish", dict(workers=8, sources=2, cost_ms=0.5, rate=12000, flush_phase="spread", linger_ms=13)),
    ("fish", dict(workers=12, sources=2, cost_ms=0.5, rate=15000, net_delay_ms=1.0,
                  capacities=(1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 2, 2, 2, 2), params={"interval": 0.01})),
    ("fish", dict(workers=10, sources=2, cost_ms=0.3, rate=25000, params={"chk": False, "hwa": False, "epoch": 50})),
    ("fish", dict(workers=16, sources=3, cost_ms=0.2, params={"ch": False, "epochs": False, "d_hot": 3, "chk": False})),
    # Gedik: its counters and LOOKUP in the loop, its controller's periods in Python
    ("gedik", dict(workers=6, sources=2, cost_ms=0.2, params={"period": 0.01})),
    ("gedik", dict(workers=12, sources=3, cost_ms=0.5, rate=15000, net_delay_ms=1.0,
                   capacities=(1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 2, 2, 2, 2),
                   params={"period": 0.02, "window": 2000, "build": "readj"})),
    ("gedik", dict(workers=8, sources=2, cost_ms=0.3, rate=20000, duration=0.6,
                   params={"period": 0.05, "build": "scan", "alpha": 3.0, "eps_share": 1.0, "window": 500})),
    ("gedik", dict(workers=8, sources=3, cost_ms=1.0, rate=7000, max_spout_pending=300,
                   params={"period": 0.03, "alpha": 2.0, "eps_share": 1.0})),
]


def _timeless(value):
    """`value` without the wall-clock times in it (how long each of Gedik's builds took)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in ("wall_clock_s", "build_s")}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _outcome(result) -> tuple[str, bytes]:
    summary = _timeless(result.summary)
    log = result.log
    columns = (log.seq, log.source, log.worker, log.arrival_s, log.enqueue_s, log.start_s, log.finish_s)
    return json.dumps(summary, sort_keys=True, default=str), b"".join(np.ascontiguousarray(c).tobytes()
                                                                      for c in columns)


@pytest.fixture(scope="module")
def stream():
    return stream_from_spec(STREAM)


@pytest.mark.parametrize(("grouping", "options"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_compiled_loop_gives_the_python_loops_run(stream, grouping, options):
    spec = TopologySpec(engine="sim", grouping=grouping, **options)
    fast = Simulation(spec, stream)
    assert compiled.kernel_of(fast) is not None  # this case runs compiled
    by_python = Simulation(spec, stream).run(compiled=False)
    by_loop = fast.run()
    assert _outcome(by_loop) == _outcome(by_python)
    assert by_loop.summary["sim"] == by_python.summary["sim"]  # the same events, and the same buffers
    assert by_loop.extras["batches"].equals(by_python.extras["batches"])


@pytest.mark.parametrize("grouping", ["albic", "lasg"])
def test_runs_that_need_python_between_events_keep_the_python_loop(stream, grouping):
    spec = TopologySpec(engine="sim", grouping=grouping, workers=6, sources=2, cost_ms=0.2)
    assert compiled.kernel_of(Simulation(spec, stream)) is None


def test_a_scheduled_change_keeps_the_python_loop(stream):
    spec = TopologySpec(engine="sim", grouping="kg", workers=6, sources=2, cost_ms=0.2)
    assert compiled.kernel_of(Simulation(spec, stream, capacity_schedule=[(0.01, [1, 1, 1, 1, 1, 0.5])])) is None


def test_the_compiled_loop_reports_progress(stream):
    seen: list[int] = []
    spec = TopologySpec(engine="sim", grouping="kg", workers=6, sources=2, cost_ms=0.2)
    Simulation(spec, stream, progress=seen.append).run()
    assert seen == sorted(seen) and seen[-1] == 20000 and len(seen) >= 3


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 127, 128, 129, 255, 1000, 4097, 100_003])
def test_pairwise_sum_is_numpys_sum_bit_for_bit(n):
    a = np.random.default_rng(n).random(n) * 1e3 - 0.3
    assert pairwise_sum(a) == float(a.sum())


@pytest.mark.parametrize("options", [dict(params={"probe": True, "vw": 3, "t0": 0.005}),
                                     dict(rate=45000, net_delay_ms=0.2, params={"measure": "busy"})])
def test_the_compiled_loop_leaves_cg_its_meters_and_delegation_as_the_python_loop_does(stream, options):
    spec = TopologySpec(engine="sim", grouping="cg", workers=12, sources=3, cost_ms=0.2, **options)
    by_python, by_loop = Simulation(spec, stream), Simulation(spec, stream)
    by_python.run(compiled=False)
    by_loop.run()
    for a, b in zip(by_python.sources, by_loop.sources, strict=True):
        x, y = a.node.grouping, b.node.grouping
        assert x.stats() == y.stats() and x._sent.tolist() == y._sent.tolist()
        assert x.owners().tolist() == y.owners().tolist() and x._map.kept() == y._map.kept()
        assert np.array_equal(x._map.previous, y._map.previous) or x._map.previous is y._map.previous is None
        assert [x.held(w) for w in range(12)] == [y.held(w) for w in range(12)]
        assert (list(x._idle), list(x._busy), x._last_busy) == (list(y._idle), list(y._busy), y._last_busy)
    assert any(source.node.grouping.stats()["moves"] for source in by_loop.sources)  # the pairing moved some
    assert by_python.delegation.stats() == by_loop.delegation.stats()
    assert [sorted(h) for h in by_python.delegation._heard] == [sorted(h) for h in by_loop.delegation._heard]
    for m, n in zip(by_python.meters, by_loop.meters, strict=True):
        assert (m.accepted, m.served, m.busy_s, m.signals) == (n.accepted, n.served, n.busy_s, n.signals)
        assert list(m.meter._marks) == list(n.meter._marks)


def test_the_compiled_loop_leaves_fish_as_the_python_loop_does(stream):
    spec = TopologySpec(engine="sim", grouping="fish", workers=12, sources=3, cost_ms=0.2, rate=40000,
                        params={"interval": 0.01})
    by_python, by_loop = Simulation(spec, stream), Simulation(spec, stream)
    by_python.run(compiled=False)
    by_loop.run()
    for a, b in zip(by_python.sources, by_loop.sources, strict=True):
        x, y = a.node.grouping, b.node.grouping
        assert x._heard.all() and x._heard.tolist() == y._heard.tolist()  # every worker's time per tuple was told
        assert x._measured.tolist() == y._measured.tolist() and x.stats() == y.stats()
        for p, q in zip((*x._state[1:], *x._state.counters), (*y._state[1:], *y._state.counters), strict=True):
            assert np.array_equal(p, q)


def _gedik_run(stream, capacity: int | None, compiled_loop: bool) -> Simulation:
    """A Gedik run whose counters start with `capacity` entries (default: the grouping's own)."""
    spec = TopologySpec(engine="sim", grouping="gedik", workers=6, sources=2, cost_ms=0.2, params={"period": 0.01})
    controller = groupings.make_controller("gedik", 6, seed=spec.seed, period=0.01)

    def make(source: int):
        grouping = groupings.make("gedik", workers=6, seed=source, controller=controller, period=0.01)
        if capacity is not None:
            old = grouping.counter
            grouping.counter = SlidingLossyCounter(old.window, controller.eps(), 3, capacity=capacity)
        return grouping

    sim = Simulation(spec, stream, make_grouping=make, controller=controller)
    sim.result = sim.run(compiled=compiled_loop)
    return sim


def test_the_compiled_loop_leaves_gedik_as_the_python_loop_does(stream):
    # counters of 8 entries: Python routing grows them when one is full, the loop between events beforehand
    by_python, by_loop = _gedik_run(stream, 8, False), _gedik_run(stream, 8, True)
    assert _outcome(by_loop.result) == _outcome(by_python.result)
    for a, b in zip(by_python.sources, by_loop.sources, strict=True):
        x, y = a.node.grouping, b.node.grouping
        assert x.stats() == y.stats() and x.messages == a.node.routed > 0
        assert x.counter.lossy.keys.shape[1] > 8  # they grew
        for r in range(3):
            assert [e.tolist() if hasattr(e, "tolist") else e for e in entries(x.counter.lossy, r)] == [
                e.tolist() if hasattr(e, "tolist") else e for e in entries(y.counter.lossy, r)]
    p, q = by_python.controller, by_loop.controller
    assert p.version == q.version >= 1 and _timeless(p.events) == _timeless(q.events)
    assert p.function().explicit() == q.function().explicit()
    assert by_python.control.migrations == by_loop.control.migrations and by_loop.control.migrations.migrated_keys
    # the same run with the grouping's own room
    assert _outcome(_gedik_run(stream, None, True).result) == _outcome(by_loop.result)
