"""A source step's compiled helpers (`topo.model.stepping`) against the numpy they replace, bit for bit, and an
ack meter that nothing reads."""

from __future__ import annotations

import numpy as np

from topo.model import AckMeter
from topo.model.buffers import OutputBuffers
from topo.model.lateness import EDGES_MS, Lateness
from topo.model.stepping import Stepper
from topo.model.worker import UNREAD


def _ticks(t: np.ndarray, linger: float, phase: float) -> np.ndarray:
    return np.maximum(1.0, np.ceil((t - phase) / linger - 1e-9)) * linger + phase


def test_a_routing_calls_lag_is_numpys_and_its_tuples_join_their_buffers():
    rng = np.random.default_rng(3)
    arrival = np.sort(rng.uniform(0.0, 2.0, 5000))
    buffers = OutputBuffers(16, len(arrival), arrival)
    stepper = Stepper(buffers, 300)
    begin = 0
    for take in (1, 7, 128, 129, 300, 3):
        chosen = rng.integers(0, 16, take).astype(np.int32)
        now = float(arrival[begin + take - 1]) + 0.01
        joined, low, high, most, total = stepper.route(chosen, begin, now, False, 16, 16)
        lag = now - arrival[begin : begin + take]
        assert (joined, low, high) == (0, chosen.min(), chosen.max())
        assert most == lag.max() and total == lag.sum()  # numpy's pairwise sum, to the last bit
        begin += take
    assert buffers.held.sum() == begin


def test_a_routing_outside_the_pool_or_the_active_workers_joins_nothing():
    arrival = np.linspace(0.0, 1.0, 10)
    buffers = OutputBuffers(4, 10, arrival)
    stepper = Stepper(buffers, 8)
    assert stepper.route(np.array([0, 4], np.int32), 0, 1.0, False, 4, 4)[:3] == (1, 0, 4)
    assert stepper.route(np.array([3, 1], np.int32), 0, 1.0, False, 4, 3)[:3] == (2, 1, 3)
    assert buffers.held.sum() == 0


def test_the_input_arrived_by_a_time_is_numpys_searchsorted():
    rng = np.random.default_rng(4)
    arrival = np.sort(np.round(rng.uniform(0.0, 1.0, 2000), 3))  # ties: "right" counts every equal arrival
    stepper = Stepper(OutputBuffers(4, len(arrival), arrival), 8)
    for upto in (-1.0, 0.0, *arrival[::97], 0.5, 2.0, np.float64(0.25)):
        assert stepper.arrived_by(upto) == arrival.searchsorted(upto, "right")


def test_a_late_steps_count_is_what_lateness_counted_with_numpy():
    rng = np.random.default_rng(8)
    arrival = np.sort(rng.uniform(0.0, 1.0, 2000))
    linger, phase, now, due = 0.005, 0.002, 1.3, 0.9
    expected = Lateness()
    expected.add((now - np.maximum(_ticks(arrival[100:1900], linger, phase), due)) * 1e3)
    stepper = Stepper(OutputBuffers(2, len(arrival), arrival), 8)
    counts = np.zeros(len(EDGES_MS), np.int64)
    latest = stepper.count_late(100, 1900, now, due, linger, phase, counts)
    assert np.array_equal(counts, expected.counts) and latest == expected.max_ms


def test_an_ack_meter_nothing_reads_counts_and_measures_nothing():
    read, unread = AckMeter(0, 0.001, 100), AckMeter(0, 0.001, 100, read=False)
    for meter in (read, unread):
        meter.arrive(0.1, 5)
        meter.serve(0.2, 3, 0.003)
    assert (unread.accepted, unread.served, unread.busy_s, unread.queue_len) == (5, 3, 0.003, 2)
    assert unread.ack(0.2, 0, 1) == UNREAD and read.ack(0.2, 0, 1) != UNREAD
