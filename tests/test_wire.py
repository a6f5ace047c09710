"""The wire between processes of one node (`topo.ray_engine.wire`): frames arrive whole and in order, a poll is
answered when its acks exist, a peer on another node is left to Ray, and a peer that dies fails its polls and is
found again at its new address. Real sockets, two wires in this process."""

from __future__ import annotations

import concurrent.futures
import threading

import numpy as np
import pytest

from topo.ray_engine.protocol import WIRE, pack_frame
from topo.ray_engine.wire import Wire, WireLost, available

pytestmark = pytest.mark.skipif(not available(), reason="the wire needs Linux's abstract Unix sockets")


class Peer:
    """A process's end: what arrives, and a poll future per source that the test completes."""

    def __init__(self, node: str = "node-a") -> None:
        self.frames: list = []
        self.arrived = threading.Condition()
        self.polls: dict[int, concurrent.futures.Future] = {}
        self.wire = Wire(node, self.on_frame, self.on_poll)

    def on_frame(self, frame, sent: float) -> None:
        with self.arrived:
            self.frames.append((frame, sent))
            self.arrived.notify_all()

    def on_poll(self, source: int, epoch: int) -> concurrent.futures.Future:
        future = self.polls[source] = concurrent.futures.Future()
        return future

    def wait_frames(self, count: int) -> list:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.frames) >= count, timeout=10.0)
            return list(self.frames)


class Entry:
    def __init__(self, worker: int, batch_id: int, seqs: range) -> None:
        self.worker, self.batch_id, self.values = worker, batch_id, None
        self.tuples = np.zeros(len(seqs), WIRE)
        self.tuples["seq"] = list(seqs)


@pytest.fixture
def pair():
    a, b = Peer(), Peer()
    yield a, b
    a.wire.close()
    b.wire.close()


def test_frames_arrive_whole_and_in_order(pair):
    a, b = pair
    assert a.wire.connect(1, b.wire.address)
    for i in range(200):  # many small messages and some large ones, read in pieces
        entries = [Entry(w, i * 10 + w, range(i * 100, i * 100 + (5000 if i % 50 == 0 else 3))) for w in range(2)]
        assert a.wire.send_frame(1, pack_frame(7, entries), float(i))
    got = b.wait_frames(200)
    assert [sent for _, sent in got] == [float(i) for i in range(200)]
    frame = got[50][0]
    buffers = [(w, batch, tuples["seq"].tolist()) for w, batch, tuples, _ in frame.buffers()]
    assert buffers == [(w, 500 + w, list(range(5000, 10000))) for w in range(2)]
    assert frame.source == 7


def test_a_poll_is_answered_once_its_acks_exist(pair):
    a, b = pair
    a.wire.connect(1, b.wire.address)
    poll = a.wire.poll(1, source=3, epoch=2)
    for _ in range(100):
        if 3 in b.polls:
            break
        threading.Event().wait(0.02)
    assert not poll.done()  # nothing served yet: the peer holds the poll
    b.polls[3].set_result(["ack-1", "ack-2"])
    assert poll.result(timeout=10.0) == ["ack-1", "ack-2"]


def test_a_peer_on_another_node_is_left_to_ray(pair):
    a, _ = pair
    other = Peer(node="node-b")
    try:
        assert not a.wire.connect(2, other.wire.address)
        asked = []
        assert a.wire.peer(2, lambda: asked.append(2)) is None and not asked  # never asked again
        assert not a.wire.send_frame(2, pack_frame(0, []), 0.0) and a.wire.poll(2, 0, 0) is None
    finally:
        other.wire.close()


def test_a_dead_peer_fails_its_polls_and_is_found_again(pair):
    a, b = pair
    a.wire.connect(1, b.wire.address)
    poll = a.wire.poll(1, source=0, epoch=0)
    b.wire.close()  # the peer process dies: its connections close
    with pytest.raises(WireLost):
        poll.result(timeout=10.0)
    reborn = Peer()
    try:
        address: concurrent.futures.Future = concurrent.futures.Future()
        # Ray carries messages until the new incarnation's address is known, then the wire does again
        assert a.wire.peer(1, lambda: address) is None
        assert not a.wire.send_frame(1, pack_frame(0, []), 1.0)
        address.set_result(reborn.wire.address)
        assert a.wire.send_frame(1, pack_frame(0, [Entry(0, 1, range(3))]), 2.0)
        assert reborn.wait_frames(1)[0][1] == 2.0
    finally:
        reborn.wire.close()
