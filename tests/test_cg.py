"""Consistent Grouping: PoRC over virtual workers, pairing of idle/busy signals, worker delegation."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupings
from groupings.delegation import WorkerDelegation
from groupings.feedback import DECREASE, INCREASE, AckReport

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def cg(n: int, seed: int = 0, **params):
    """A CG source instance through the public factory."""
    return groupings.make("cg", workers=n, seed=seed, **params)


def zipf_keys(count: int, seed: int = 0, z: float = 1.2, keys: int = 5000) -> np.ndarray:
    """Skewed 64-bit key hashes."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, keys + 1, dtype=np.float64) ** -z
    return (rng.choice(keys, count, p=p / p.sum()).astype(np.uint64) + np.uint64(1)) * GOLDEN


def signal(g, worker: int, sig: int, now: float = 0.0) -> None:
    """Deliver one piggybacked signal from `worker` to grouping `g`."""
    g.feedback(AckReport.of([worker], signals=[sig], now=now))


def check_layout(g, total: int, min_vw: int = 1) -> None:
    """The map, the per-worker lists and the counts agree; every worker keeps min_vw; the total is `total`."""
    owners = g.owners()
    counts = g.virtual_workers()
    assert owners.size == total == counts.sum() == g.total_virtual_workers
    assert counts.size == g.workers and counts.min() >= min_vw
    for w in range(g.workers):
        assert all(owners[v] == w for v in g.held(w))
    assert sorted(v for w in range(g.workers) for v in g.held(w)) == list(range(total))


# --- registration -----------------------------------------------------------------------------------------


def test_cg_is_registered_with_its_delegation():
    assert "cg" in groupings.names()
    g = cg(4, seed=1, vw=5, t0=0.5, idle=0.6, busy=0.9)
    assert (g.name, g.workers, g.seed) == ("cg", 4, 1)
    assert g.params["vw"] == 5 and g.total_virtual_workers == 20
    d = groupings.make_delegation("cg", workers=4, t0=0.5, idle=0.6, busy=0.9)
    assert isinstance(d, WorkerDelegation)
    assert (d.window_s, d.t0, d.idle, d.busy) == (0.5, 0.5, 0.6, 0.9)


@pytest.mark.parametrize(
    "params",
    [{"vw": 0}, {"min_vw": 11}, {"busy": 0.7}, {"busy": 1.0}, {"t0": 0}, {"probe": 2}, {"probe": "maybe"}],
)
def test_bad_parameters_are_refused(params):
    with pytest.raises(ValueError):
        cg(4, **params)


def test_probe_takes_booleans_and_words():
    assert cg(3, probe=True).params["probe"] is True
    assert cg(3, probe="false").params["probe"] is False
    assert cg(3, probe="1").params["probe"] is True


# --- routing ----------------------------------------------------------------------------------------------


def test_initial_map_is_striped():
    g = cg(4, vw=3)
    assert g.owners().tolist() == [0, 1, 2, 3] * 3
    assert g.held(1) == [1, 5, 9]


def test_porc_bound_holds_per_virtual_worker():
    n, vw, eps = 6, 10, 0.01
    g = cg(n, vw=vw, eps=eps)
    keys = zipf_keys(6000, seed=3)
    for a, b in pairwise(range(0, keys.size + 1, 500)):
        g.route(keys[a:b])
        signal(g, a // 500 % n, INCREASE)  # map changes do not touch the virtual layer's bound
        signal(g, (a // 500 + 1) % n, DECREASE)
        assert g.virtual_loads().max() <= math.ceil((1 + eps) * b / (vw * n))
    assert g.virtual_loads().sum() == keys.size


key_arrays = st.lists(st.integers(0, 40), min_size=0, max_size=300).map(lambda xs: np.array(xs, np.uint64) * GOLDEN)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 12),
    seed=st.integers(0, 2**31),
    keys=key_arrays,
    cuts=st.lists(st.integers(0, 300), max_size=5),
    signals=st.lists(st.tuples(st.integers(0, 11), st.sampled_from([-1, 1])), max_size=20),
)
def test_batch_equals_one_at_a_time_and_is_deterministic(n, seed, keys, cuts, signals):
    def play(pieces):
        g = cg(n, seed=seed, vw=4)
        for w, s in signals:
            signal(g, w % n, s)
        return g, np.concatenate([g.route(p) for p in pieces]) if pieces else np.zeros(0, np.int32)

    bounds = [0, *sorted(c for c in cuts if c <= keys.size), keys.size]
    whole_g, whole = play([keys])
    cut_g, cut = play([keys[a:b] for a, b in pairwise(bounds)])
    single_g, single = play([keys[i : i + 1] for i in range(keys.size)])
    assert whole.dtype == np.int32 and np.array_equal(whole, cut) and np.array_equal(whole, single)
    for other in (cut_g, single_g):
        assert np.array_equal(whole_g.owners(), other.owners())
        assert np.array_equal(whole_g.virtual_loads(), other.virtual_loads())
        assert whole_g.stats() == other.stats()


ops = st.lists(
    st.one_of(
        st.tuples(st.just("signal"), st.integers(0, 30), st.sampled_from([-1, 1])),
        st.tuples(st.just("resize"), st.integers(1, 30), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 10), vw=st.integers(3, 6), min_vw=st.integers(1, 3), probe=st.booleans(), ops=ops)
def test_virtual_workers_are_conserved_through_signals_and_resizes(n, vw, min_vw, probe, ops):
    g = cg(n, vw=vw, min_vw=min_vw, probe=probe)
    total = vw * n
    keys = np.arange(50, dtype=np.uint64) * GOLDEN
    for op, a, b in ops:
        if op == "signal":
            signal(g, a % g.workers, b)
        elif a * min_vw <= total:  # resizes the layer can serve keep the total
            g.resize(a)
        check_layout(g, total, min_vw)
        out = g.route(keys)
        assert out.min() >= 0 and out.max() < g.workers
        stats = g.stats()
        assert stats["idle_queue"] + stats["busy_queue"] <= g.workers


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 10), signals=st.lists(st.tuples(st.integers(0, 9), st.sampled_from([-1, 1])), max_size=60))
def test_without_probing_a_busy_worker_gives_only_to_an_idle_one(n, signals):
    g = cg(n, vw=3)
    last = {}  # each worker's latest signal
    for w, s in signals:
        w %= n
        last[w] = s
        before = g.owners()
        signal(g, w, s)
        after = g.owners()
        for v in np.flatnonzero(before != after):
            assert last[int(before[v])] == DECREASE and last[int(after[v])] == INCREASE


# --- pairing ----------------------------------------------------------------------------------------------


def test_pairing_is_first_come_first_served():
    g = cg(10, vw=3)
    for w in (7, 8, 9):
        signal(g, w, DECREASE)
    assert g.stats()["busy_queue"] == 3 and g.stats()["moves"] == 0  # no idle worker: nothing moves
    signal(g, 0, INCREASE)
    signal(g, 1, INCREASE)
    # the oldest busy worker pairs with the oldest idle one, giving the virtual worker it has held longest
    assert g.held(0) == [0, 10, 20, 7] and g.held(1) == [1, 11, 21, 8]
    assert g.held(7) == [17, 27] and g.held(8) == [18, 28]
    signal(g, 2, INCREASE)
    assert g.held(2)[-1] == 9 and g.stats()["moves"] == 3
    assert g.stats()["busy_queue"] == g.stats()["idle_queue"] == 0


def test_latest_signal_wins_and_a_worker_queues_once():
    g = cg(4, vw=3)
    signal(g, 1, DECREASE)
    signal(g, 1, DECREASE)
    signal(g, 1, INCREASE)  # changed its mind: now idle, no longer busy
    assert (g.stats()["busy_queue"], g.stats()["idle_queue"]) == (0, 1)
    signal(g, 2, DECREASE)
    assert g.virtual_workers().tolist() == [3, 4, 2, 3]


def test_a_worker_keeps_min_vw():
    g = cg(2, vw=2, min_vw=2)
    signal(g, 0, DECREASE)
    signal(g, 1, INCREASE)
    assert g.virtual_workers().tolist() == [2, 2] and g.stats()["refused"] == 1
    assert g.stats()["busy_queue"] == 0 and g.stats()["idle_queue"] == 1


def test_signals_change_only_the_source_that_received_them():
    a, b = cg(5, seed=0), cg(5, seed=1)
    before = b.owners()
    a.feedback(AckReport.of([3, 0, 4], signals=[-1, 1, 0]))
    assert a.virtual_workers().tolist() == [11, 10, 10, 9, 10]
    assert np.array_equal(b.owners(), before)


def test_probing_gives_to_the_least_recently_busy_worker():
    g = cg(4, vw=3, probe=True)
    signal(g, 2, DECREASE)  # no idle worker: 0, 1, 3 never reported busy; fewest vws, then lowest id
    assert g.virtual_workers().tolist() == [4, 3, 2, 3]
    signal(g, 0, DECREASE)  # 1 and 3 never busy, equal holdings: lowest id
    assert g.virtual_workers().tolist() == [3, 4, 2, 3]
    signal(g, 1, DECREASE)  # 3 is the last never busy
    assert g.virtual_workers().tolist() == [3, 3, 2, 4]
    signal(g, 3, DECREASE)  # everyone has been busy now: 2 was busy least recently
    assert g.virtual_workers().tolist() == [3, 3, 3, 3]
    assert g.stats()["probe_moves"] == 4 and g.stats()["busy_queue"] == 0


def test_probing_still_prefers_an_idle_worker():
    g = cg(4, vw=3, probe=True)
    signal(g, 3, INCREASE)
    signal(g, 1, DECREASE)
    assert g.virtual_workers().tolist() == [3, 2, 3, 4] and g.stats()["probe_moves"] == 0


def test_idle_workers_gain_virtual_workers_and_share():
    n = 10
    g = cg(n, seed=5)
    start = g.owners()
    d = WorkerDelegation(n, t0=0.1)
    utilization = np.array([0.3] * 3 + [1.0] * 7)  # workers 0-2 idle, the rest busy
    for slot in range(5):
        now = 0.1 * slot
        g.route(zipf_keys(2000, seed=slot))
        sig = [d.signal(w, 0, now, utilization[w]) for w in range(n)]
        g.feedback(AckReport.of(range(n), utilization=utilization, signals=sig, now=now))
    counts = g.virtual_workers()
    assert counts[:3].tolist() == [15] * 3 and counts.sum() == 100  # one pairing per idle worker per slot
    # the same keys through the same virtual workers (a fresh source's PoRC), under the old and the new map
    virtual = groupings.make("porc", workers=10 * n, seed=5, eps=0.01).route(zipf_keys(20000, seed=9))
    before = np.bincount(start[virtual], minlength=n)
    after = np.bincount(g.owners()[virtual], minlength=n)
    assert after[:3].sum() > 1.3 * before[:3].sum() and after[3:].sum() < before[3:].sum()


# --- resize -----------------------------------------------------------------------------------------------


def test_a_joining_worker_takes_from_the_largest_holders():
    g = cg(3, vw=4)
    signal(g, 1, DECREASE)
    signal(g, 0, INCREASE)
    signal(g, 2, DECREASE)
    signal(g, 0, INCREASE)  # 0 holds 6, 1 and 2 hold 3
    g.resize(4)
    assert g.virtual_workers().tolist() == [3, 3, 3, 3]
    assert g.held(3) == [0, 3, 6]  # the three 0 has held longest


def test_a_leaving_worker_gives_to_the_smallest_holders():
    g = cg(4, vw=2)
    signal(g, 1, DECREASE)
    signal(g, 0, INCREASE)  # [3, 1, 2, 2]
    g.resize(3)
    assert g.virtual_workers().tolist() == [3, 3, 2] and g.held(1) == [5, 3, 7]
    assert g.route(np.arange(100, dtype=np.uint64) * GOLDEN).max() < 3


def test_leaving_workers_leave_the_queues():
    g = cg(4, vw=2)
    signal(g, 3, DECREASE)
    g.resize(3)
    assert g.stats()["busy_queue"] == 0
    with pytest.raises(ValueError):
        signal(g, 3, INCREASE)  # engines hand a source only acks of its active workers


def test_growing_past_the_layer_rebuilds_it_in_proportion():
    g = cg(2, vw=2)
    signal(g, 1, DECREASE)
    signal(g, 0, INCREASE)  # [3, 1]
    g.resize(6)
    check_layout(g, 12)
    assert g.stats()["rebuilds"] == 1 and g.virtual_workers().tolist()[:2] == [3, 1]
    assert g.route(np.arange(300, dtype=np.uint64) * GOLDEN).max() < 6


# --- worker delegation ------------------------------------------------------------------------------------


def test_thresholds_are_respected():
    d = WorkerDelegation(5, t0=1.0, idle=0.75, busy=0.85)
    got = [d.signal(w, 0, 0.0, u) for w, u in enumerate([0.2, 0.75, 0.8, 0.85, 0.99])]
    assert got == [1, 0, 0, 0, -1]


def test_a_decision_reaches_each_source_once():
    d = WorkerDelegation(1, t0=1.0)
    assert [d.signal(0, s, 0.0, 1.0) for s in (0, 1, 0, 2, 1)] == [-1, -1, 0, -1, 0]
    assert d.deliveries == 3


@settings(max_examples=60, deadline=None)
@given(
    acks=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.floats(0, 0.05), st.floats(0, 1)), min_size=1, max_size=200
    ),
    t0=st.floats(0.01, 0.2),
)
def test_at_most_one_decision_per_time_slot_delivered_once_per_source(acks, t0):
    d = WorkerDelegation(4, t0=t0)
    now = 0.0
    last_signal = {}  # worker -> time of its latest idle/busy decision
    heard = set()  # (worker, decision time, source)
    for w, s, dt, u in acks:
        now += dt
        before = d.stats()
        sig = d.signal(w, s, now, u)
        after = d.stats()
        decided = (after["idle_decisions"][w] + after["busy_decisions"][w]) - (
            before["idle_decisions"][w] + before["busy_decisions"][w]
        )
        if decided:
            assert w not in last_signal or now - last_signal[w] >= t0 * (1 - 1e-6)
            last_signal[w] = now
        if sig:
            assert (sig < 0) == (after["pending"][w] < 0) and after["pending"][w] == sig
            assert (w, last_signal[w], s) not in heard
            heard.add((w, last_signal[w], s))


def test_a_new_decision_replaces_an_undelivered_one():
    d = WorkerDelegation(1, t0=1.0)
    assert d.signal(0, 0, 0.0, 0.95) == -1  # busy, source 1 has not heard yet
    assert d.signal(0, 0, 0.5, 0.10) == 0  # too early to decide again
    assert d.signal(0, 0, 1.0, 0.10) == 1  # a new slot: idle now
    assert d.signal(0, 1, 1.1, 0.50) == 1  # source 1 hears the latest decision only
    assert d.signal(0, 1, 2.5, 0.80) == 0  # content withdraws what is left
    assert d.stats()["pending"] == [0]


def test_a_content_worker_keeps_watching():
    d = WorkerDelegation(1, t0=1.0)
    assert d.signal(0, 0, 0.0, 0.8) == 0
    assert d.signal(0, 0, 0.01, 0.9) == -1  # content decisions do not start a time slot


def test_delegation_resize():
    d = WorkerDelegation(2, t0=1.0)
    d.signal(1, 0, 0.0, 1.0)
    d.resize(4)
    assert d.signal(3, 0, 0.0, 0.1) == 1 and d.stats()["pending"] == [0, -1, 0, 1]
    d.resize(1)
    assert d.workers == 1 and len(d.stats()["busy_decisions"]) == 1
    assert d.signal(1, 0, 5.0, 0.1) == 0  # a removed worker draining its queue says nothing
    with pytest.raises(ValueError):
        d.signal(-1, 0, 0.0, 0.5)


# --- closed loop ------------------------------------------------------------------------------------------


def test_closed_loop_balances_heterogeneous_workers():
    caps = np.array([5, 5, 5, 1, 1, 1, 1, 1, 1, 1], dtype=np.float64)
    n, per_round = caps.size, 2000
    g = cg(n, seed=2)
    d = groupings.make_delegation("cg", workers=n)
    slot_capacity = caps * per_round / (0.8 * caps.sum())  # input at 80% of the total capacity
    spread = []
    for r in range(30):
        load = np.bincount(g.route(zipf_keys(per_round, seed=r, keys=20000)), minlength=n)
        util = np.minimum(1.0, load / slot_capacity)
        spread.append((load / caps).max() / (load / caps).mean() - 1)
        now = (r + 1) * d.t0
        sig = [d.signal(w, 0, now, util[w]) for w in range(n)]
        g.feedback(AckReport.of(range(n), utilization=util, signals=sig, now=now))
    assert spread[0] > 0.3 and max(spread[-5:]) < 0.2
