"""The service emulator against its contract: a capacity-c worker serves a tuple in cost_ms / c of wall time."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from topo.ray_engine import work_cgroup
from topo.ray_engine.work import (
    CATCHUP_S,
    SLACK_S,
    ServiceEmulator,
    apply_cgroup_quota,
    cgroup_quota_possible,
    ideal_finish,
    release_cgroup_quota,
)

pytestmark = pytest.mark.timing  # every test here measures CPU or wall time

MS = 1e-3
# a worker that gets less than this share of a core while burning did not get its CPU: the machine is too busy
AVAILABLE = 0.85
# nor did one that lost more than this share of its busy time to late wake-ups
LOST = 0.03


def serve_in_batches(emulator: ServiceEmulator, n: int, sizes: tuple[int, ...]) -> tuple[np.ndarray, float]:
    """Serve `n` tuples in calls of the given sizes (cycling) and return all finish times and the wall seconds."""
    parts, done, k = [], 0, 0
    began = time.perf_counter()
    while done < n:
        size = min(sizes[k % len(sizes)], n - done)
        parts.append(emulator.serve(size))
        done, k = done + size, k + 1
    return np.concatenate(parts), time.perf_counter() - began


def skip_if_starved(emulator: ServiceEmulator) -> None:
    """Skip (not fail) when this process did not get the CPU it was due: the machine is oversubscribed."""
    stats = emulator.stats()
    if stats["cpu_availability"] < AVAILABLE:
        pytest.skip(f"machine oversubscribed: the worker got {stats['cpu_availability']:.0%} of a core while burning")
    if stats["lost_s"] > LOST * stats["busy_s"]:
        pytest.skip(f"machine oversubscribed: the worker lost {stats['lost_s'] / stats['busy_s']:.0%} "
                    "of its time to late wake-ups")


# --- sleep mode


@pytest.mark.parametrize("capacity", [1.0, 0.5, 2.0])
def test_sleep_mode_serves_at_capacity(capacity: float) -> None:
    em = ServiceEmulator("sleep", 2.0, capacity)
    n = 150
    finish, wall = serve_in_batches(em, n, (1, 3, 6))
    skip_if_starved(em)
    assert em.measured_capacity() == pytest.approx(capacity, rel=0.10)
    # never faster than the capacity allows, and not much slower from outside either
    assert wall >= n * em.service_s * (1 - 1e-9)
    assert 2.0 * n / (wall / MS) == pytest.approx(capacity, rel=0.15)
    assert np.all(np.diff(finish) > 0)
    assert np.median(np.diff(finish)) == pytest.approx(2 * MS / capacity, rel=0.10)


def test_sleep_finish_times_are_deadlines_spaced_by_the_service_time() -> None:
    em = ServiceEmulator("sleep", 2.0, 1.0)
    before = time.time()
    finish = em.serve(40)
    after = time.time()
    np.testing.assert_allclose(np.diff(finish), 2 * MS, atol=1e-6)
    # finish times are reached before serve returns and never precede the call
    assert before <= finish[0] and finish[-1] <= after
    assert finish[0] - before == pytest.approx(2 * MS, abs=1 * MS)


def test_back_to_back_batches_continue_the_running_deadline() -> None:
    em = ServiceEmulator("sleep", 2.0, 1.0)
    first = em.serve(5)
    second = em.serve(5)
    # the next batch starts where the last deadline was, not after the previous sleep's overshoot,
    # unless the overshoot was beyond the slack: then the excess is lost, and reported as such
    gap = second[0] - first[-1] - em.stats()["lost_s"]
    assert 2 * MS - 1e-5 <= gap <= 2 * MS + SLACK_S


def test_idle_time_between_batches_is_not_credited() -> None:
    em = ServiceEmulator("sleep", 2.0, 1.0)
    em.serve(3)
    time.sleep(0.02)
    called = time.time()
    finish = em.serve(1)
    assert finish[0] - called >= 2 * MS - SLACK_S
    # busy time is the four services (plus any lateness a busy machine adds), not the 20 ms of idling
    assert 4 * 2 * MS - 1e-9 <= em.busy_seconds() < 4 * 2 * MS + 0.01  # sums of float seconds round


@pytest.mark.parametrize("mode", ["sleep", "cpu"])
def test_bookkeeping_between_queued_batches_is_caught_up(mode: str) -> None:
    def run(with_ready: bool) -> tuple[float, float]:
        em = ServiceEmulator(mode, 1.0, 1.0)
        queued = time.time()  # every batch waits in the queue from the start: the worker is saturated
        began = time.perf_counter()
        for _ in range(20):
            em.serve(10, ready=queued if with_ready else None)
            time.sleep(0.005)  # logging, state update and ack between batches
        wall = time.perf_counter() - began
        return wall, em.busy_seconds() / wall

    wall_plain, busy_plain = run(False)
    wall_ready, busy_ready = run(True)
    # 200 tuples of 1 ms: without a ready time the 5 ms gaps are idle time, with one they are the worker's own,
    # so the saturated worker keeps its rate and is busy all the time
    assert wall_plain > 0.28 and busy_plain < 0.8
    assert wall_ready < 0.25 and busy_ready > 0.9


def test_a_batch_ready_long_ago_does_not_make_a_burst() -> None:
    em = ServiceEmulator("sleep", 2.0, 1.0)
    em.serve(1)
    time.sleep(0.05)
    called = time.time()
    finish = em.serve(10, ready=called - 0.05)  # waited 50 ms for a server that was itself idle for most of it
    # at most CATCHUP_S is credited, the rest is lost: 10 tuples of 2 ms still take about 20 ms less the credit
    assert finish[-1] - called >= 20 * MS - CATCHUP_S - 1e-4
    assert em.stats()["lost_s"] >= 0.05 - CATCHUP_S - 2 * MS - 0.005


def test_the_ideal_server_serves_a_batch_from_when_it_was_ready() -> None:
    em = ServiceEmulator("sleep", 2.0, 1.0)
    first, service, due = em.begin_ideal(1, time.time())
    assert service == pytest.approx(2 * MS)
    em.end()
    time.sleep(0.05)
    ready = time.time() - 0.04  # there 40 ms ago, while the server was idle; the emulator got to it only now
    start, _, due = em.begin_ideal(10, ready)
    assert start == pytest.approx(ready, abs=1e-6) and due < time.perf_counter()  # done, in the model, already
    em.end()
    finish = ideal_finish(np.array([first, start]), np.array([service, service]), np.array([1, 10]))
    assert finish[0] == pytest.approx(first + 2 * MS) and finish[1] == pytest.approx(ready + 2 * MS, abs=1e-6)
    assert np.allclose(np.diff(finish[1:]), 2 * MS, rtol=0, atol=1e-6)
    stats = em.stats()
    # the emulator's own lateness is reported apart (the ack left late), never taken from the worker's capacity
    assert stats["lost_s"] == 0.0 and stats["measured_capacity"] == pytest.approx(1.0)
    assert stats["late_ms"]["count"] == 2 and stats["late_ms"]["max"] >= 15.0
    # a batch behind another starts when that one is done, however early it was there
    start2, _, _ = em.begin_ideal(1, ready)
    assert start2 == pytest.approx(start + 20 * MS, abs=1e-6)
    with pytest.raises(ValueError, match="sleep mode"):
        ServiceEmulator("cpu", 1.0, 1.0).begin_ideal(1, time.time())


def test_dozens_of_sleeping_workers_share_two_cores() -> None:
    workers = [ServiceEmulator("sleep", 2.0, 1.0 if w % 2 else 0.5) for w in range(24)]

    def run(em: ServiceEmulator) -> None:
        serve_in_batches(em, 40, (4, 8))

    threads = [threading.Thread(target=run, args=(em,)) for em in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for em in workers:
        skip_if_starved(em)
        assert em.measured_capacity() == pytest.approx(em.capacity, rel=0.15)
        # waiting is not burning
        assert em.stats()["cpu_s"] < 0.5 * em.busy_seconds()


# --- cpu mode


@pytest.mark.parametrize("capacity", [1.0, 0.3])
def test_cpu_mode_burns_the_share_and_serves_at_capacity(capacity: float) -> None:
    em = ServiceEmulator("cpu", 1.0, capacity, core_share=0.4)
    n = 300 if capacity >= 1 else 120
    process_before = time.process_time()
    _, wall = serve_in_batches(em, n, (1, 4))
    process_cpu = time.process_time() - process_before
    skip_if_starved(em)
    stats = em.stats()
    assert stats["cpu_per_tuple_ms"] == pytest.approx(1.0 * 0.4, rel=0.20)
    # the OS accounts the burn to the process: it is computation, not sleep
    assert process_cpu >= 0.8 * n * 0.4 * MS
    assert wall / n == pytest.approx(1.0 * MS / capacity, rel=0.15)
    assert em.measured_capacity() == pytest.approx(capacity, rel=0.15)
    # CPU used per wall second stays at the cap: capacity x core_share of one core
    assert stats["cpu_s"] / wall <= capacity * 0.4 * 1.15


def test_cpu_mode_finish_times_follow_the_deadlines() -> None:
    em = ServiceEmulator("cpu", 1.0, 0.5, core_share=0.4)
    finish = em.serve(30)
    skip_if_starved(em)
    gaps = np.diff(finish)
    assert np.all(gaps > 0)
    assert np.median(gaps) == pytest.approx(2 * MS, rel=0.10)


def test_oversubscribed_cpu_workers_get_less_and_report_it() -> None:
    cores = os.cpu_count() or 1
    if cores > 8:
        pytest.skip(f"{cores} cores: oversubscribing them would make this test slow")
    # one more full-core worker than there are cores: someone must get less than its share
    workers = [ServiceEmulator("cpu", 1.0, 2.5, core_share=0.4) for _ in range(cores + 1)]

    def run(em: ServiceEmulator) -> None:
        serve_in_batches(em, 250, (1, 5))

    threads = [threading.Thread(target=run, args=(em,)) for em in workers]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    # the burn is real CPU: all the tuples' budgets together cannot have taken fewer cores than the machine has
    # (per-worker rates may add up to more: a worker that finishes first leaves the others a whole core)
    assert sum(em.stats()["tuples"] * em.cost_ms * 1e-3 * em.core_share for em in workers) <= cores * wall * 1.1
    starved = min(workers, key=lambda em: em.measured_capacity())
    assert starved.measured_capacity() < 0.9 * 2.5
    assert starved.stats()["cpu_availability"] < 0.9


def test_cpu_mode_small_costs_keep_their_rate() -> None:
    em = ServiceEmulator("cpu", 0.1, 1.0, core_share=0.4)
    serve_in_batches(em, 600, (1, 10))
    skip_if_starved(em)
    assert em.measured_capacity() == pytest.approx(1.0, rel=0.15)


# --- both modes


@pytest.mark.parametrize("mode", ["sleep", "cpu"])
def test_set_capacity_changes_later_tuples(mode: str) -> None:
    em = ServiceEmulator(mode, 2.0, 1.0, core_share=0.4)
    fast = em.serve(15)
    em.set_capacity(0.5)
    slow = em.serve(15)
    skip_if_starved(em)
    assert np.median(np.diff(fast)) == pytest.approx(2 * MS, rel=0.10)
    assert np.median(np.diff(slow)) == pytest.approx(4 * MS, rel=0.10)
    assert em.capacity == 0.5 and em.service_s == pytest.approx(4 * MS)


@pytest.mark.parametrize("mode", ["sleep", "cpu"])
def test_zero_cost_is_instant(mode: str) -> None:
    em = ServiceEmulator(mode, 0.0, 0.3)
    before = time.time()
    finish = em.serve(1_000_000)
    after = time.time()
    # one timestamp for the whole batch: no tuple was served one by one
    assert finish.shape == (1_000_000,) and np.all(finish == finish[0])
    assert before <= finish[0] <= after
    assert em.busy_seconds() == 0.0
    assert em.stats()["tuples"] == 1_000_000
    assert em.measured_capacity() == 0.3


def test_serving_nothing_changes_nothing() -> None:
    em = ServiceEmulator("sleep", 2.0, 1.0)
    assert em.serve(0).shape == (0,)
    assert em.busy_seconds() == 0.0 and em.measured_capacity() == 1.0


def test_stats_report_the_worker() -> None:
    em = ServiceEmulator("cpu", 1.0, 0.5, core_share=0.4)
    em.serve(5)
    stats = em.stats()
    for key in ("tuples", "busy_s", "cpu_s", "measured_capacity", "mode", "share", "cpu_availability"):
        assert key in stats
    assert stats["mode"] == "cpu" and stats["tuples"] == 5
    assert stats["share"] == pytest.approx(0.2)
    assert stats["busy_s"] == em.busy_seconds() > 0
    assert ServiceEmulator("sleep", 1.0, 0.5).stats()["share"] == 0.0


@pytest.mark.parametrize(
    "args",
    [
        ("spin", 1.0, 1.0),
        ("sleep", -1.0, 1.0),
        ("sleep", float("nan"), 1.0),
        ("sleep", "fast", 1.0),
        ("sleep", 1.0, 0.0),
        ("sleep", 1.0, -2.0),
        ("sleep", 1.0, float("inf")),
        ("sleep", 1.0, 1.0, 0.0),
        ("sleep", 1.0, 1.0, 1.5),
        ("cpu", 1.0, 3.0, 0.4),
    ],
)
def test_bad_construction_raises_one_line(args: tuple) -> None:
    with pytest.raises(ValueError) as err:
        ServiceEmulator(*args)
    assert "\n" not in str(err.value) and str(err.value)


@pytest.mark.parametrize("n", [-1, 1.5, "3", None])
def test_bad_tuple_counts_raise(n: object) -> None:
    with pytest.raises(ValueError, match="^n must be"):
        ServiceEmulator("sleep", 1.0, 1.0).serve(n)  # type: ignore[arg-type]


@pytest.mark.parametrize("capacity", [0.0, -1.0, float("nan"), 3.0])
def test_bad_capacity_change_raises_and_keeps_the_old_one(capacity: float) -> None:
    em = ServiceEmulator("cpu", 1.0, 1.0, core_share=0.4)
    with pytest.raises(ValueError):
        em.set_capacity(capacity)
    assert em.capacity == 1.0 and em.service_s == pytest.approx(1 * MS)


# --- the kernel's own CPU quota


def test_cgroup_quota_refuses_where_impossible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(work_cgroup, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(work_cgroup, "_v1_cpu_root", lambda: None)
    assert apply_cgroup_quota(os.getpid(), 0.3) is False
    assert list(tmp_path.iterdir()) == []
    assert apply_cgroup_quota(2**22 + 12345, 0.3) is False
    assert release_cgroup_quota(os.getpid()) is False
    with pytest.raises(ValueError):
        apply_cgroup_quota(os.getpid(), 0.0)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from the kernel's accounting."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not cgroup_quota_possible(), reason="needs root on Linux with a writable cgroup cpu controller")
def test_cgroup_quota_caps_a_spinning_process() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert apply_cgroup_quota(spinner.pid, 0.2)
        group = work_cgroup._moved[spinner.pid][0]
        assert group.is_dir()
        time.sleep(0.1)
        used, began = _cpu_seconds(spinner.pid), time.perf_counter()
        time.sleep(0.6)
        share = (_cpu_seconds(spinner.pid) - used) / (time.perf_counter() - began)
        # capped at a fifth of a core (the clock-tick accounting adds a little noise); uncapped it would take ~1
        assert share < 0.35
        assert release_cgroup_quota(spinner.pid)
        assert not group.exists()
    finally:
        spinner.kill()
        spinner.wait()
        release_cgroup_quota(spinner.pid)
