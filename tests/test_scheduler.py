"""The process scheduler's driving of sources (Storm's executors sharing a worker's thread), on its own: a source
steps on its deadlines and when poked, gives its loop back when it asks to, and what it raises reaches its own
thread instead of stopping the scheduler."""

from __future__ import annotations

import threading
import time

import pytest

from topo.ray_engine.scheduler import HAND_BACK, Scheduler


class Stepper:
    """A source that steps `steps` times, every `every_s`, then hands its loop back (or raises on the last)."""

    def __init__(self, index: int, steps: int, every_s: float, fail: bool = False) -> None:
        self.index, self.left, self.every_s, self.fail = index, steps, every_s, fail
        self.handed_back = threading.Event()
        self.failure = None
        self.ticks: list[float] = []
        self.threads: set[int] = set()
        self.attached_to = None

    def attached(self, driver) -> None:
        self.attached_to = driver

    def detached(self) -> None:
        self.attached_to = None

    def tick(self) -> float:
        self.ticks.append(time.perf_counter())
        self.threads.add(threading.get_ident())
        self.left -= 1
        if self.left == 0:
            if self.fail:
                raise ValueError("source 1 broke")
            return HAND_BACK
        return time.perf_counter() + self.every_s


@pytest.fixture
def scheduler():
    scheduler = Scheduler()
    scheduler.start({})
    return scheduler


def test_sources_step_on_their_deadlines_on_one_thread_and_come_back(scheduler):
    sources = [Stepper(0, 5, 0.01), Stepper(1, 3, 0.02)]
    threads = [threading.Thread(target=scheduler.drive, args=(s,)) for s in sources]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert [len(s.ticks) for s in sources] == [5, 3]
    # every step ran on the scheduler's one thread, none before its deadline
    assert len(sources[0].threads | sources[1].threads) == 1
    for source in sources:
        gaps = [b - a for a, b in zip(source.ticks, source.ticks[1:], strict=False)]
        assert min(gaps) >= source.every_s * 0.99
        assert source.attached_to is None  # handed back
    assert scheduler.driven == {}


def test_a_poke_steps_a_source_that_waits_for_acks(scheduler):
    source = Stepper(2, 2, 3600.0)  # its next deadline is an hour away: only a poke steps it again
    thread = threading.Thread(target=scheduler.drive, args=(source,))
    thread.start()
    while len(source.ticks) < 1:
        time.sleep(0.001)
    scheduler.poke(2)
    thread.join(timeout=10)
    assert not thread.is_alive() and len(source.ticks) == 2


def test_what_a_driven_source_raises_reaches_its_own_thread_and_the_scheduler_goes_on(scheduler):
    raised: list[BaseException] = []

    def run(source: Stepper) -> None:
        try:
            scheduler.drive(source)
        except ValueError as error:
            raised.append(error)

    broken, after = Stepper(1, 2, 0.001, fail=True), Stepper(3, 2, 0.001)
    for source in (broken, after):  # the scheduler still drives others after one broke
        thread = threading.Thread(target=run, args=(source,))
        thread.start()
        thread.join(timeout=10)
        assert not thread.is_alive()
    assert [str(e) for e in raised] == ["source 1 broke"]
    assert len(after.ticks) == 2


class _Host:
    """The in-process side of a source's process, as `Links.attached` uses it."""

    def __init__(self) -> None:
        from topo.ray_engine.outbox import Outboxes

        self.outboxes = Outboxes(poke=lambda source: None)


class _Driver:
    def __init__(self) -> None:
        self.poked: list[int] = []

    def poke(self, source: int) -> None:
        self.poked.append(source)


def test_a_poll_made_before_the_hand_over_pokes_the_driver_when_it_answers():
    """A source that re-sent buffers to another process on its own thread (recovering) holds a poll there with no
    one to tell its driver; once driven and waiting only for those acks, it must still be stepped when they land."""
    import concurrent.futures

    from topo.ray_engine.links import Links

    source = Links()
    waiting, answered = concurrent.futures.Future(), concurrent.futures.Future()
    answered.set_result([])
    source.index, source.local, source.driver = 3, (_Host(), 0), None
    source.take_local = source.local[0].outboxes.take
    source._polls, source._pending = {1: waiting, 2: answered}, {}
    driver = _Driver()
    source.attached(driver)
    assert driver.poked == [3]  # the poll answered before the hand-over, at once
    waiting.set_result([])
    assert driver.poked == [3, 3]  # the other one, when its answer lands


def test_every_poll_is_answered_even_when_another_takes_its_place():
    from topo.ray_engine.outbox import Outboxes

    boxes = Outboxes(poke=lambda source: None)
    first = boxes.poll(2, epoch=1)
    second = boxes.poll(2, epoch=1)  # the same incarnation asks again: the first must not be left waiting forever
    assert first.done() and first.result() == [] and not second.done()
    boxes.post([(2, "ack")])
    assert second.result(timeout=1) == ["ack"]
    # a dead incarnation's poll is let go once a newer one asks, and one that asks late gets nothing
    dead = boxes.poll(2, epoch=1)
    newer = boxes.poll(2, epoch=2)
    assert dead.result(timeout=1) == [] and boxes.poll(2, epoch=1).result(timeout=1) == [] and not newer.done()
    boxes.post([(2, "next")])
    assert newer.result(timeout=1) == ["next"]


def test_a_restarted_sources_first_acks_wait_for_its_own_poll_not_its_predecessors():
    """A restarted source's first frame may be served before its first poll arrives (the frame over the wire, the
    poll through Ray): the poll still waiting then is the dead incarnation's, and the acks it took went to a caller
    that is gone (the run stalled, a source waiting for good on one buffer's ack)."""
    import numpy as np

    from topo.ray_engine.outbox import Outboxes
    from topo.ray_engine.protocol import Handover, pack_frame, tag

    boxes = Outboxes(poke=lambda source: None)
    dead = boxes.poll(1, epoch=0)  # the incarnation that died had asked for its acks
    entry = type("Entry", (), {"worker": 0, "batch_id": tag(1, 7), "tuples": np.zeros(0), "values": None})
    for frame in (Handover(1, [entry]), pack_frame(1, [entry])):
        assert frame.epoch == 1
    boxes.newer(1, Handover(1, [entry]).epoch)  # its successor's first frame comes in
    assert dead.result(timeout=1) == []
    boxes.post([(1, "ack of batch 7")])  # served before the successor polls
    assert boxes.poll(1, epoch=1).result(timeout=1) == ["ack of batch 7"]
    boxes.newer(1, 0)  # a late frame of the dead incarnation changes nothing
    assert not boxes.poll(1, epoch=1).done()
