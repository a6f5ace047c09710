"""Today's production partitioners: Flink 2.x's adaptive partitioner and the Kafka producer's built-in one.

Both read the backlog a source sees on each channel (tuples sent there minus tuples acked), so the acks must
say how many tuples they acknowledge: the first tests check that they do.
"""

from __future__ import annotations

import numpy as np

from groupings.feedback import AckReport
from topo.sim import simulate
from topo.spec import TopologySpec
from topo.streams import StreamArrays


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
