"""A simulation asks for small memory pages while it runs (`topo.sim.pages`) and gives numpy its choice back."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from topo.data.streams import StreamArrays
from topo.sim.pages import hugepage_switch, small_pages
from topo.sim.simulator import simulate
from topo.spec import TopologySpec

switch = hugepage_switch()
pytestmark = pytest.mark.skipif(switch is None, reason="this numpy cannot switch its huge pages at run time")


def huge() -> bool:
    """numpy's choice now (read by setting it back at once)."""
    now = switch(True)
    switch(now)
    return now


@pytest.fixture(autouse=True)
def numpy_default(monkeypatch):
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    before = switch(True)
    yield
    switch(before)


def test_small_pages_inside_and_numpy_choice_after_even_when_nested_or_failing():
    with small_pages():
        assert not huge()
        with small_pages():
            assert not huge()
        assert not huge()  # the outer run still runs
    assert huge()
    with pytest.raises(RuntimeError), small_pages():
        raise RuntimeError("the run failed")
    assert huge()


def test_runs_on_two_threads_give_the_choice_back_when_the_last_ends():
    inside, leave = threading.Event(), threading.Event()

    def other():
        with small_pages():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    with small_pages():
        pass
    assert not huge()  # the other thread's run goes on
    leave.set()
    thread.join(10)
    assert huge()


def test_a_users_own_setting_is_left_alone(monkeypatch):
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    with small_pages():
        assert huge()


def test_simulate_gives_numpy_its_choice_back():
    spec = TopologySpec(grouping="kg", workers=4, sources=1, cost_ms=0.1)
    simulate(spec, StreamArrays(np.arange(5000, dtype=np.uint64)))
    assert huge()
