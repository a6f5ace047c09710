"""The per-tuple log read while the event loop writes it (`topo.sim.feed`): readers on other threads get every
row once, in order, and stop when the writer stops, also when it fails."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from topo.data.streams import StreamArrays, stream_from_spec
from topo.sim import feed
from topo.sim.feed import LogFeed
from topo.sim.simulator import simulate
from topo.spec import TopologySpec


def _read(log: LogFeed, out: list, rows: int) -> None:
    out.extend(a for a, _ in log.chunks("x", rows=rows))


def test_a_reader_gets_each_row_once_in_order_as_it_is_written():
    column = np.zeros(10_000, np.int64)
    log = LogFeed({"x": column})
    seen: list[np.ndarray] = []
    reader = threading.Thread(target=lambda: seen.extend(c[0].copy() for _, c in log.chunks("x", rows=64)))
    reader.start()
    for upto in range(0, 10_001, 37):  # the writer publishes in steps that do not divide the reader's chunks
        column[upto : upto + 37] = np.arange(upto, min(upto + 37, 10_000))
        log.publish(min(upto + 37, 9_000))
    log.close(9_000)  # the writer stops before the column's end
    reader.join(timeout=10)
    assert not reader.is_alive()
    rows = np.concatenate(seen)
    assert np.array_equal(rows, np.arange(9_000)) and max(len(c) for c in seen) == 64


def test_a_closed_log_ends_its_readers_also_when_empty_or_read_again():
    log = LogFeed({"x": np.arange(10)})
    log.close(0)
    assert list(log.chunks("x")) == []
    log = LogFeed({"x": np.arange(10)})
    log.close(10)
    first, again = [], []
    _read(log, first, 4), _read(log, again, 4)
    assert first == again == [0, 4, 8] and len(log) == 10


class Outside:
    """Routes to a worker that does not exist once 3,000 tuples have gone out."""

    name, seed, params, takes_feedback = "outside", 0, {}, False

    def __init__(self, workers: int) -> None:
        self.workers, self.sent = workers, 0

    def route(self, keys: np.ndarray, now: float | None = None) -> np.ndarray:
        self.sent += len(keys)
        return np.full(len(keys), 0 if self.sent < 3000 else self.workers + 3, np.int32)

    def feedback(self, report) -> None: ...

    def resize(self, workers: int) -> None: ...

    def stats(self) -> dict:
        return {}


def test_a_loop_that_fails_ends_the_readers_and_raises():
    spec = TopologySpec(grouping="rr", workers=4, sources=1, cost_ms=0.01)
    with pytest.raises(ValueError, match="outside"):
        simulate(spec, StreamArrays(np.arange(20_000, dtype=np.uint64)), make_grouping=lambda s: Outside(4))


def test_the_outcome_read_during_the_run_is_the_outcome_of_the_whole_log(monkeypatch):
    stream = "zipf:z=1.2,keys=3000,messages=40000,seed=3"
    summaries = []
    for rows in (997, 1 << 19):  # chunks the readers take while the loop runs, and one chunk after it
        monkeypatch.setattr(feed, "FEED_CHUNK", rows)
        spec = TopologySpec(grouping="cg", stream=stream, workers=9, sources=2, cost_ms=0.2, engine="sim")
        summary = simulate(spec, stream_from_spec(stream)).summary
        summaries.append(json.dumps({k: v for k, v in summary.items() if k != "wall_clock_s"}, sort_keys=True))
    assert summaries[0] == summaries[1]
    assert json.loads(summaries[0])["exact"] is True
