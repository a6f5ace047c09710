"""Load-aware shuffle grouping (Storm 2.x): weights from reported queue load, a shuffled array walked in turn."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import groupings
from groupings.adaptive.lasg import MAX_WEIGHT
from groupings.feedback import AckReport

KEYS = np.arange(100_000, dtype=np.uint64)


def shares(out: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(out, minlength=n) / out.size


def report(workers, loads, now: float) -> AckReport:
    return AckReport.of(workers, load=loads, now=now)


def test_registered_with_its_parameters():
    info = groupings.describe("lasg")
    assert [p["name"] for p in info["params"]] == ["refresh", "slots", "weights"]
    assert {p["name"]: p["default"] for p in info["params"]} == {"refresh": 1.0, "slots": 1000, "weights": "step"}
    assert info["params"][2]["choices"] == ["step", "linear"]
    assert not info["controller"] and not info["delegation"]
    assert groupings.make("lasg", 4, weights="LINEAR", refresh="0.5").params == {
        "refresh": 0.5,
        "slots": 1000,
        "weights": "linear",
    }


@pytest.mark.parametrize("params", [{"weights": "fair"}, {"refresh": 0}, {"slots": 0}, {"refresh": "soon"}])
def test_bad_parameters_are_one_line_errors(params):
    with pytest.raises(ValueError) as err:
        groupings.make("lasg", 4, **params)
    assert "\n" not in str(err.value) and next(iter(params)) in str(err.value)


# 1000 entries = 15 x 64 + 40: with 64 workers, 40 entries go to random workers at each refresh
@pytest.mark.parametrize(
    "n, slots, bound", [(1, 1000, 0), (3, 1000, 0.01), (7, 1000, 0.01), (10, 1000, 0), (64, 6400, 0)]
)
def test_with_equal_loads_it_balances_like_shuffle(n, slots, bound):
    g = groupings.make("lasg", n, seed=1, slots=slots)
    out = [g.route(KEYS[: 3 * slots], now=0.0)]  # whole passes over the array
    for t in range(1, 6):
        g.feedback(report(np.arange(n), np.full(n, 0.3), now=t - 0.5))
        out.append(g.route(KEYS[: 3 * slots], now=float(t)))
    loads = np.bincount(np.concatenate(out), minlength=n)
    assert loads.max() / loads.mean() - 1 <= bound
    assert g.stats()["min_weight"] == MAX_WEIGHT


def test_each_pass_over_the_array_gives_every_worker_its_entries():
    g = groupings.make("lasg", 7, seed=4)
    cycle = g.route(KEYS[:1000], now=0.0)
    assert np.bincount(cycle, minlength=7).min() >= 1000 // 7
    assert np.array_equal(g.route(KEYS[:1000], now=0.5), cycle)  # no refresh yet: the same array again


def test_a_loaded_worker_loses_ten_weight_per_refresh_until_it_gets_nothing():
    n = 5
    g = groupings.make("lasg", n, seed=2)
    g.route(KEYS[:100], now=0.0)
    g.feedback(report([3], [1.0], now=0.2))
    for t in range(1, 11):
        out = g.route(KEYS[:5000], now=float(t))
        weight = MAX_WEIGHT - 10 * t
        assert g.weights()[3] == weight
        assert shares(out, n)[3] == pytest.approx(weight / (weight + 4 * MAX_WEIGHT), abs=0.01)
    assert not np.any(g.route(KEYS, now=10.5) == 3)
    assert g.stats()["starved"] == 1


def test_linear_weights_cut_a_full_worker_off_at_the_next_refresh():
    n = 5
    g = groupings.make("lasg", n, seed=2, weights="linear")
    g.feedback(report([3, 1], [1.0, 0.5], now=0.2))
    assert shares(g.route(KEYS[:5000], now=0.9), n)[3] == pytest.approx(0.2, abs=0.01)  # before the refresh
    out = g.route(KEYS, now=1.0)
    assert g.weights().tolist() == [101, 51, 101, 1, 101]
    assert shares(out, n)[3] < 0.005
    assert shares(out, n)[1] == pytest.approx(51 / 355, abs=0.01)


def test_a_worker_within_five_percent_of_the_least_loaded_one_is_not_penalized():
    g = groupings.make("lasg", 4, seed=0)
    g.feedback(report([0, 1, 2, 3], [0.20, 0.24, 0.26, 0.9], now=0.1))
    g.route(KEYS[:10], now=3.0)
    assert g.weights().tolist() == [100, 100, 70, 70]


def test_a_recovered_worker_regains_weight_slowly():
    g = groupings.make("lasg", 3, seed=0)
    g.feedback(report([1], [0.8], now=0.1))
    g.route(KEYS[:10], now=5.0)
    assert g.weights()[1] == 50
    g.feedback(report([1], [0.0], now=5.1))
    g.route(KEYS[:10], now=8.0)
    assert g.weights()[1] == 53


def test_refreshes_happen_at_most_every_refresh_seconds():
    g = groupings.make("lasg", 4, seed=0, refresh=0.25)
    g.feedback(report([2], [1.0], now=0.01))
    for now in (0.0, 0.1, 0.2, 0.24):
        g.route(KEYS[:10], now=now)
    assert g.stats()["refreshes"] == 0 and g.weights()[2] == MAX_WEIGHT
    for now in (0.25, 0.3, 0.49):
        g.route(KEYS[:10], now=now)
    assert g.stats()["refreshes"] == 1 and g.weights()[2] == 90
    g.route(KEYS[:10], now=1.0)  # instants 0.5 and 0.75 passed unseen: their steps are applied too
    assert g.stats()["refreshes"] == 2 and g.weights()[2] == 60


def test_without_now_the_clock_is_the_latest_ack_report():
    g = groupings.make("lasg", 4, seed=0)
    g.route(KEYS[:10])
    g.feedback(report([2], [1.0], now=2.0))
    g.route(KEYS[:10])
    assert g.weights()[2] == 80
    g.route(KEYS[:10], now=1.0)  # the clock never runs backwards
    assert g.stats()["refreshes"] == 1


def test_the_newest_report_of_a_worker_wins_and_loads_are_clipped():
    g = groupings.make("lasg", 3, seed=0, weights="linear")
    g.feedback(AckReport.of([0, 1, 0, 2], load=[0.9, 3.0, 0.0, -1.0], now=0.5))
    g.route(KEYS[:10], now=1.0)
    assert g.weights().tolist() == [101, 1, 101]
    assert g.stats()["heard"] == 3


def test_same_seed_same_routing_other_seed_other_shuffle():
    def run(seed):
        g = groupings.make("lasg", 6, seed=seed)
        out = []
        for t in range(4):
            g.feedback(report([t % 6, 5], [0.9, 0.4], now=t + 0.5))
            out.append(g.route(KEYS[:3000], now=float(t)))
        return np.concatenate(out)

    assert np.array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


def test_batches_equal_one_at_a_time_for_the_same_now():
    keys = KEYS[:1500]
    whole, single = groupings.make("lasg", 5, seed=9), groupings.make("lasg", 5, seed=9)
    for t in range(3):
        for g in (whole, single):
            g.feedback(report([t, 4], [0.7, 0.1], now=t + 0.3))
        expected = whole.route(keys, now=t + 0.6)
        one_by_one = np.concatenate([single.route(keys[i : i + 1], now=t + 0.6) for i in range(keys.size)])
        assert np.array_equal(one_by_one, expected)
    assert whole.stats() == single.stats()
    assert np.array_equal(whole.local_loads(), single.local_loads())


def test_resize_gives_a_newcomer_full_weight_and_forgets_leavers():
    g = groupings.make("lasg", 4, seed=1)
    g.feedback(report([0, 1, 2, 3], [0.0, 0.0, 0.0, 1.0], now=0.5))
    g.route(KEYS[:100], now=3.0)
    assert g.weights().tolist() == [100, 100, 100, 70]
    g.resize(6)
    out = g.route(KEYS[:10_000], now=3.1)
    assert g.weights().tolist() == [100, 100, 100, 70, 100, 100]
    assert shares(out, 6)[5] == pytest.approx(100 / 570, abs=0.01)
    g.resize(3)
    out = g.route(KEYS[:10_000], now=3.2)
    assert out.max() == 2 and g.weights().tolist() == [100, 100, 100]
    assert g.stats()["messages"] == 20_100


def test_more_workers_than_slots_still_reach_everyone():
    g = groupings.make("lasg", 1500, seed=0)
    assert np.unique(g.route(KEYS[:1500], now=0.0)).size == 1500


def test_stats_pickle_and_repr():
    g = groupings.make("lasg", 4, seed=5)
    g.route(KEYS[:777], now=0.0)
    stats = json.loads(json.dumps(g.stats()))
    assert stats["messages"] == 777 and stats["refreshes"] == 0
    copy = pickle.loads(pickle.dumps(g))
    assert np.array_equal(copy.route(KEYS[:500], now=2.0), g.route(KEYS[:500], now=2.0))
    assert "lasg" in repr(g).lower() or "LoadAware" in repr(g)
