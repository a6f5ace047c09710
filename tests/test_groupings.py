"""Compiled groupings: the make/route/feedback/resize/stats contract and the invariants each strategy promises."""

from __future__ import annotations

import json
import math
import pickle
from itertools import pairwise

import numpy as np
import pytest

import groupings
import groupings.compiled.catalog  # noqa: F401 (the catalogue registers every compiled strategy as it loads)
from groupings.compiled.grouping import STRATEGIES
from groupings.feedback import AckReport
from groupings.hashing import seeded_hashes

ALL = list(STRATEGIES)  # every compiled strategy, as the catalogue declares them


def zipf_keys(z: float, n_keys: int, messages: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Key hashes of a bounded Zipf stream (inverse CDF over ranks) and the rank of each message."""
    pmf = np.arange(1, n_keys + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(pmf / pmf.sum())
    ranks = np.minimum(np.searchsorted(cdf, np.random.default_rng(seed).random(messages), side="right"), n_keys - 1)
    hashes = groupings.hash_keys([f"key{i}" for i in range(n_keys)])
    return hashes[ranks], ranks


@pytest.fixture(scope="module")
def stream() -> tuple[np.ndarray, np.ndarray]:
    return zipf_keys(1.1, 5_000, 20_000, seed=3)


def workers_per_key(ranks: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Number of distinct workers each key reached."""
    pairs = np.unique(np.stack([ranks, out]), axis=1)
    return np.bincount(pairs[0])[np.unique(ranks)]


def state_arrays(g: groupings.Grouping) -> list[np.ndarray]:
    st = g._state
    return [a for a in st if isinstance(a, np.ndarray)] + list(st.summary)


# --- make, names, parameters ------------------------------------------------------------------------------


def test_names_list_the_compiled_strategies_first():
    assert groupings.names()[: len(ALL)] == ALL
    assert "lasg" in groupings.names()


def test_hash_keys_is_reexported():
    assert groupings.hash_keys(["a", "b", "a"]).dtype == np.uint64


def test_unknown_name_is_one_line_listing_valid_names():
    with pytest.raises(ValueError) as err:
        groupings.make("nope", 4)
    message = str(err.value)
    assert "\n" not in message and "nope" in message
    assert all(name in message for name in ALL)


@pytest.mark.parametrize(
    "name, params",
    [
        ("porc", {"eps": 0}),
        ("porc", {"eps": -0.5}),
        ("chbl", {"eps": "abc"}),
        ("chbl", {"replicas": 0}),
        ("chbl", {"replicas": "6.5"}),
        ("dc", {"theta": 0}),
        ("dc", {"theta": 2}),
        ("dc", {"counters": 10}),  # fewer than 1/theta = 50 for 10 workers
        ("dc", {"refresh": 0}),
        ("wc", {"eps": 0.1}),  # W-Choices has no eps
        ("kg", {"eps": 0.1}),
        ("pkg", {"bogus": 1}),
        ("porc", {"eps": True}),
        ("porc", {"eps": float("nan")}),
        ("porc", {"eps": [0.1]}),
    ],
)
def test_bad_params_are_one_line_value_errors(name, params):
    with pytest.raises(ValueError) as err:
        groupings.make(name, 10, **params)
    assert "\n" not in str(err.value)
    assert next(iter(params)) in str(err.value)


@pytest.mark.parametrize("workers", [0, -1, 2.5, "4", True])
def test_bad_worker_counts(workers):
    with pytest.raises(ValueError):
        groupings.make("kg", workers)


def test_bad_seed():
    with pytest.raises(ValueError):
        groupings.make("sg", 4, seed="x")


def test_numeric_strings_are_coerced():
    g = groupings.make("chbl", 8, eps="0.3", replicas="16")
    assert g.params == {"eps": 0.3, "replicas": 16}
    assert groupings.make("dc", 10, counters="1e3").params["counters"] == 1000


def test_params_report_effective_defaults():
    assert groupings.make("porc", 10).params == {"eps": 0.01}
    assert groupings.make("chbl", 10).params == {"eps": 0.01, "replicas": 64}
    assert groupings.make("dc", 10).params == {"theta": 0.02, "counters": 200, "eps": 1e-4, "refresh": 10_000}
    assert groupings.make("wc", 100).params == {"theta": 0.002, "counters": 2000}
    # counters follow a given theta
    assert groupings.make("rr", 10, theta=0.1).params == {"theta": 0.1, "counters": 64}
    assert groupings.make("kg", 3).params == {}


def test_instance_attributes():
    g = groupings.make("potc", 7, seed=11)
    assert (g.name, g.workers, g.seed) == ("potc", 7, 11)


# --- route, feedback, stats -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_route_gives_int32_workers_in_range(name, stream):
    keys, _ = stream
    out = groupings.make(name, 7, seed=1).route(keys)
    assert out.dtype == np.int32 and out.shape == keys.shape
    assert out.min() >= 0 and out.max() < 7


@pytest.mark.parametrize("name", ALL)
def test_route_edge_inputs(name):
    g = groupings.make(name, 3)
    assert g.route(np.empty(0, dtype=np.uint64)).shape == (0,)
    assert g.route(np.array([5, -1], dtype=np.int64)).shape == (2,)
    with pytest.raises(ValueError):
        g.route(np.array([0.5]))
    with pytest.raises(ValueError):
        g.route(np.zeros((2, 2), dtype=np.uint64))


@pytest.mark.parametrize("name", ALL)
def test_single_worker_takes_everything(name, stream):
    assert not groupings.make(name, 1).route(stream[0][:2000]).any()


@pytest.mark.parametrize("name", ALL)
def test_feedback_is_accepted_and_checked(name, stream):
    g, h = groupings.make(name, 4), groupings.make(name, 4)
    keys = stream[0][:500]
    g.route(keys[:250])
    g.feedback(AckReport.of([0, 3], queue_len=[3, 0], load=[0.5, 0.0], signals=[1, -1], now=0.2))
    g.feedback(AckReport.empty(0.3))
    h.route(keys[:250])
    assert np.array_equal(g.route(keys[250:]), h.route(keys[250:]))  # a no-op for these strategies
    with pytest.raises(ValueError):
        g.feedback(AckReport.of([4]))
    with pytest.raises(ValueError):
        g.feedback(AckReport.of([-1]))
    with pytest.raises(TypeError):
        g.feedback(np.array([0]), np.array([1.0]), np.array([0]))  # the old three-array form is gone
    with pytest.raises(TypeError):
        g.feedback({"workers": [0]})


@pytest.mark.parametrize("name", ALL)
def test_now_is_accepted_and_ignored(name, stream):
    keys = stream[0][:3000]
    timed = groupings.make(name, 6, seed=2)
    out = np.concatenate([timed.route(chunk, now=0.01 * i) for i, chunk in enumerate(np.array_split(keys, 7))])
    assert np.array_equal(out, groupings.make(name, 6, seed=2).route(keys))
    with pytest.raises(ValueError):
        timed.route(keys[:3], now=float("nan"))


@pytest.mark.parametrize("name", ALL)
def test_stats_are_small_and_json_able(name, stream):
    g = groupings.make(name, 5)
    assert json.loads(json.dumps(g.stats()))["messages"] == 0
    g.route(stream[0])
    stats = json.loads(json.dumps(g.stats()))
    assert stats["messages"] == stream[0].size and len(stats) <= 8


def test_stats_content(stream):
    keys, _ = stream
    porc = groupings.make("porc", 10)
    porc.route(keys)
    assert {"probes", "probes_per_message", "fallbacks", "capacity"} <= set(porc.stats())
    dc = groupings.make("dc", 10)
    dc.route(keys)
    stats = dc.stats()
    assert stats["head_size"] >= 1 and 2 <= stats["d"] <= 10 and 0 < stats["head_fraction"] < 1


@pytest.mark.parametrize("name", ALL)
def test_pickled_instance_routes_on_where_it_left_off(name, stream):
    keys = stream[0][:3000]
    g = groupings.make(name, 5, seed=2)
    g.route(keys[:1000])
    copy = pickle.loads(pickle.dumps(g))
    assert repr(copy) == repr(g)
    assert np.array_equal(copy.route(keys[1000:]), g.route(keys[1000:]))


# --- determinism and batch equivalence --------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_routing(name, stream):
    keys, _ = stream
    assert np.array_equal(groupings.make(name, 6, seed=4).route(keys), groupings.make(name, 6, seed=4).route(keys))


@pytest.mark.parametrize("name", ["potc", "sg"])
def test_different_seeds_route_differently(name, stream):
    keys, _ = stream
    assert not np.array_equal(groupings.make(name, 6, seed=0).route(keys), groupings.make(name, 6, seed=1).route(keys))


@pytest.mark.parametrize("name", ["kg", "pkg", "porc", "chbl"])
def test_key_candidates_do_not_depend_on_the_seed(name, stream):
    keys, _ = stream
    assert np.array_equal(groupings.make(name, 6, seed=0).route(keys), groupings.make(name, 6, seed=9).route(keys))


@pytest.mark.parametrize("name", ALL)
def test_batches_equal_one_at_a_time(name, stream):
    keys = stream[0][:2500]
    whole = groupings.make(name, 5, seed=2)
    expected = whole.route(keys)
    single = groupings.make(name, 5, seed=2)
    one_by_one = np.concatenate([single.route(keys[i : i + 1]) for i in range(keys.size)])
    split = groupings.make(name, 5, seed=2)
    cuts = [0, 1, 2, 17, 999, 1000, 1001, 1733, keys.size]
    pieces = np.concatenate([split.route(keys[a:b]) for a, b in pairwise(cuts)])
    assert np.array_equal(one_by_one, expected) and np.array_equal(pieces, expected)
    for a, b, c in zip(state_arrays(whole), state_arrays(single), state_arrays(split), strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, c)
    assert whole.stats() == single.stats() == split.stats()


# --- what each strategy promises --------------------------------------------------------------------------


def test_kg_sends_each_key_to_its_first_hash(stream):
    keys, ranks = stream
    out = groupings.make("kg", 9).route(keys)
    assert np.array_equal(out, seeded_hashes(keys, 1, 9))
    assert workers_per_key(ranks, out).max() == 1


def test_pkg_uses_only_the_two_hashes(stream):
    keys, ranks = stream
    out = groupings.make("pkg", 9).route(keys)
    assert np.all((out == seeded_hashes(keys, 1, 9)) | (out == seeded_hashes(keys, 2, 9)))
    assert workers_per_key(ranks, out).max() <= 2


def test_pkg_picks_the_less_loaded_choice():
    keys = np.full(100, 12345, dtype=np.uint64)
    first, second = seeded_hashes(keys[:1], 1, 50)[0], seeded_hashes(keys[:1], 2, 50)[0]
    assert first != second
    out = groupings.make("pkg", 50).route(keys)
    assert np.array_equal(out[:4], [first, second, first, second])  # ties go to the principal choice


def test_sg_is_round_robin_from_a_seeded_offset():
    out = groupings.make("sg", 4, seed=6).route(np.zeros(9, dtype=np.uint64))
    assert out.tolist() == [2, 3, 0, 1, 2, 3, 0, 1, 2]


@pytest.mark.parametrize("name", ["sg", "potc"])
def test_sg_and_potc_balance_almost_perfectly(name, stream):
    keys, _ = stream
    keys = np.tile(keys, 10)
    loads = np.bincount(groupings.make(name, 10, seed=3).route(keys), minlength=10)
    assert loads.max() / loads.mean() - 1 < 0.01
    if name == "sg":
        assert loads.max() - loads.min() <= 1


def test_potc_chooses_per_message_not_per_key():
    out = groupings.make("potc", 10, seed=1).route(np.full(1000, 7, dtype=np.uint64))
    assert np.unique(out).size == 10


def _prefix_loads(out: np.ndarray, n: int) -> np.ndarray:
    return np.cumsum(np.eye(n, dtype=np.int64)[out], axis=0)


def _capacity_bounds(eps: float, messages: int, n: int) -> np.ndarray:
    # the guarantee: after m messages every load <= ceil((1 + eps) m / n), computed as the kernel does
    return np.array([math.ceil((1.0 + eps) * m / n) for m in range(1, messages + 1)])


@pytest.mark.parametrize("name", ["porc", "chbl"])
@pytest.mark.parametrize("n, eps", [(3, 0.01), (10, 0.01), (10, 0.3), (64, 0.05), (7, 1.0)])
def test_capacity_bound_holds_after_every_message(name, n, eps, stream):
    keys, ranks = stream
    out = groupings.make(name, n, eps=eps).route(keys)
    prefix = _prefix_loads(out, n)
    assert np.all(prefix.max(axis=1) <= _capacity_bounds(eps, keys.size, n))


@pytest.mark.parametrize("name", ["porc", "chbl"])
def test_capacity_bound_holds_routing_one_by_one(name, stream):
    keys = stream[0][:2000]
    g = groupings.make(name, 6, eps=0.01)
    loads = np.zeros(6, dtype=np.int64)
    for m in range(1, keys.size + 1):
        loads[g.route(keys[m - 1 : m])[0]] += 1
        assert loads.max() <= math.ceil(1.01 * m / 6)
    assert np.array_equal(loads, g.local_loads().astype(np.int64))


def test_porc_principal_choice_takes_keys_while_there_is_room(stream):
    keys, _ = stream
    out = groupings.make("porc", 10, eps=0.3).route(keys)
    assert np.mean(out == seeded_hashes(keys, 1, 10)) > 0.8


def test_chbl_walks_clockwise_from_the_key():
    # with huge slack nothing is ever full, so CH with bounded loads is plain consistent hashing
    keys, _ = zipf_keys(0.5, 1000, 5000, seed=1)
    a = groupings.make("chbl", 8, eps=100.0).route(keys)
    b = groupings.make("chbl", 8, eps=100.0).route(keys[::-1])[::-1]
    assert np.array_equal(a, b)


def test_dc_head_keys_stay_on_their_d_hashes_and_tail_on_two():
    keys, ranks = zipf_keys(1.4, 2000, 30_000, seed=5)
    g = groupings.make("dc", 50)
    out, ds = [], []
    for chunk in np.array_split(keys, 30):
        out.append(g.route(chunk))
        ds.append(g.stats()["d"])
    out = np.concatenate(out)
    d_max = max(ds)
    assert 2 < d_max < 50
    candidates = np.stack([seeded_hashes(keys, i, 50) for i in range(1, d_max + 1)])
    assert np.all((candidates == out).any(axis=0))
    assert workers_per_key(ranks, out).max() <= d_max
    rare = np.bincount(ranks, minlength=2000) < 5  # far below theta m: tail from their first message on
    late = np.zeros(2000, dtype=bool)
    late[ranks[5000:]] = True
    late[ranks[:5000]] = False
    tail = np.isin(ranks, np.flatnonzero(rare & late))
    assert tail.any() and np.all((candidates[:2, tail] == out[tail]).any(axis=0))


@pytest.mark.parametrize("name", ["wc", "rr"])
def test_wc_and_rr_spread_the_head_over_all_workers(name):
    keys, ranks = zipf_keys(1.4, 2000, 30_000, seed=5)
    out = groupings.make(name, 20).route(keys)
    assert np.unique(out[ranks == 0]).size == 20
    rare = np.bincount(ranks, minlength=2000) < 5
    late = np.zeros(2000, dtype=bool)
    late[ranks[5000:]] = True
    late[ranks[:5000]] = False
    tail = np.isin(ranks, np.flatnonzero(rare & late))
    first, second = seeded_hashes(keys, 1, 20), seeded_hashes(keys, 2, 20)
    assert tail.any() and np.all((out[tail] == first[tail]) | (out[tail] == second[tail]))


# --- the papers' picture on a skewed stream ---------------------------------------------------------------


@pytest.fixture(scope="module")
def zipf_103():
    return zipf_keys(1.03, 100_000, 1_000_000, seed=7)


def _imbalance(out: np.ndarray, n: int) -> float:
    loads = np.bincount(out, minlength=n)
    return loads.max() / loads.mean() - 1


def test_sanity_targets_on_zipf_103(zipf_103):
    keys, ranks = zipf_103
    n = 10
    p1 = np.mean(ranks == 0)
    results = {}
    for name in ALL:
        params = {"eps": 0.3} if name in ("porc", "chbl") else {}
        results[name] = groupings.make(name, n, seed=1, **params).route(keys)
    assert _imbalance(results["kg"], n) >= n * p1 - 1
    assert workers_per_key(ranks, results["pkg"]).mean() <= 2
    for name in ("porc", "chbl"):
        assert _imbalance(results[name], n) <= 0.3 + n / keys.size
    for name in ("sg", "potc"):
        assert _imbalance(results[name], n) < 0.01
    for name in ("wc", "dc"):
        assert _imbalance(results[name], n) < 0.05


# --- resize: workers join or leave at the top index ---------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_resize_routes_into_the_new_range(name, stream):
    keys = stream[0]
    g = groupings.make(name, 6, seed=1)
    g.route(keys[:4000])
    for n in (9, 3, 1, 4):
        g.resize(n)
        out = g.route(keys[4000:8000], now=1.0)
        assert g.workers == n and out.min() >= 0 and out.max() < n
        assert np.unique(out).size == n or name in ("kg", "pkg", "chbl", "porc", "dc", "wc", "rr")
    assert g.stats()["messages"] == 4000 * 5
    copy = pickle.loads(pickle.dumps(g))
    assert np.array_equal(copy.route(keys[:500]), g.route(keys[:500]))


@pytest.mark.parametrize("name", ALL)
def test_resize_to_the_same_count_changes_nothing(name, stream):
    keys = stream[0][:3000]
    g, h = groupings.make(name, 5, seed=3), groupings.make(name, 5, seed=3)
    g.route(keys[:1000])
    h.route(keys[:1000])
    g.resize(5)
    assert np.array_equal(g.route(keys[1000:]), h.route(keys[1000:]))


@pytest.mark.parametrize("workers", [0, -2, 2.5, "3", True, None])
def test_resize_checks_the_count(workers):
    g = groupings.make("pkg", 4)
    with pytest.raises(ValueError):
        g.resize(workers)
    assert g.workers == 4


def _distinct(keys: np.ndarray) -> np.ndarray:
    return np.unique(keys)


def test_kg_follows_the_new_worker_count(stream):
    keys = _distinct(stream[0])
    g = groupings.make("kg", 10)
    before = g.route(keys)
    g.resize(11)
    after = g.route(keys)
    assert np.array_equal(after, seeded_hashes(keys, 1, 11))  # candidates are bucket(hash, n')
    # hashing over n' moves much of the key space (multiply-shift bucketing: about half on n -> n + 1)
    assert np.mean(before != after) > 0.4


def test_chbl_moves_only_the_keys_next_to_the_new_workers_points(stream):
    keys = _distinct(stream[0])
    g = groupings.make("chbl", 10, eps=100.0)  # slack never binds: plain consistent hashing
    before = g.route(keys)
    g.resize(11)
    after = g.route(keys)
    moved = before != after
    assert np.all(after[moved] == 10)  # keys only move to the newcomer
    assert 0.3 / 11 < moved.mean() < 2.0 / 11
    g.resize(10)
    assert np.array_equal(g.route(keys), before)  # and leaving gives them back


def test_pkg_candidates_follow_the_new_worker_count(stream):
    keys, ranks = stream
    g = groupings.make("pkg", 9)
    g.route(keys[:5000])
    g.resize(13)
    out = g.route(keys)
    assert np.all((out == seeded_hashes(keys, 1, 13)) | (out == seeded_hashes(keys, 2, 13)))


@pytest.mark.parametrize("name", ["pkg", "potc", "wc", "porc", "chbl"])
def test_local_loads_drop_leavers_and_start_newcomers_at_the_mean(name, stream):
    keys = stream[0]
    g = groupings.make(name, 6, seed=2)
    g.route(keys[:6001])
    loads = g.local_loads()
    g.resize(8)
    assert np.array_equal(g.local_loads(), np.concatenate([loads, [math.floor(loads.mean())] * 2]))
    g.resize(4)
    assert np.array_equal(g.local_loads(), loads[:4])


@pytest.mark.parametrize("name", ["pkg", "potc", "wc", "dc"])
def test_a_newcomer_takes_about_its_share_at_once(name, stream):
    keys = np.tile(stream[0], 3)
    g = groupings.make(name, 10, seed=1)
    g.route(keys[:30_000])
    g.resize(11)
    share = np.mean(g.route(keys[30_000:]) == 10)
    assert 0.3 / 11 < share < 2.0 / 11  # neither flooded (started at 0) nor starved


@pytest.mark.parametrize("name", ["porc", "chbl"])
def test_capacity_bound_holds_across_a_grow(name, stream):
    keys = stream[0]
    eps, n = 0.05, 7
    g = groupings.make(name, 6, eps=eps)
    g.route(keys[:5000])
    g.resize(n)
    for m in range(200):
        g.route(keys[5000 + m : 5001 + m])
        loads = g.local_loads()
        assert loads.max() <= math.ceil((1 + eps) * loads.sum() / n)


def test_sg_round_robin_covers_the_new_workers():
    g = groupings.make("sg", 4, seed=1)
    g.route(np.zeros(5, dtype=np.uint64))
    g.resize(6)
    out = g.route(np.zeros(60, dtype=np.uint64))
    assert np.bincount(out, minlength=6).tolist() == [10] * 6


def test_dc_recomputes_d_for_the_new_worker_count():
    keys, _ = zipf_keys(1.4, 2000, 30_000, seed=5)
    g = groupings.make("dc", 50)
    g.route(keys[:20_000])
    g.resize(5)
    g.route(keys[20_000:20_010])
    assert g.stats()["d"] <= 5
    assert g.route(keys[20_010:]).max() < 5
