"""Gedik's partitioning functions: the paper's measures, the three builders, LOOKUP, and the shared controller."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupings
from groupings.adaptive import gedik_build as gb
from groupings.adaptive import gedik_cost as gcost
from groupings.adaptive.gedik import PARAMS, GedikController, GedikGrouping
from groupings.adaptive.gedik_function import make_ring, moved_share
from groupings.feedback import AckReport, WorkerReport
from groupings.hashing import seeded_hashes
from groupings.params import resolve

LCL = gcost.parse_resources("LCL")
ALPHAS = (1.2, 1.2, 1.2)

# the toy example of Fig. 1: eight keys, N goes from 2 to 3
TOY = dict(zip("XZVRUYWL", [5, 3, 2, 1, 4, 3, 3, 1], strict=True))


def toy(mapping: str) -> tuple[np.ndarray, np.ndarray]:
    """Frequencies (as counts) and channels of the toy keys in the order X Z V R U Y W L, from 'XZVR|UYWL'."""
    channel = {k: c for c, group in enumerate(mapping.split("|")) for k in group}
    return np.array(list(TOY.values()), float), np.array([channel[k] for k in TOY])


def controller(workers: int = 4, **params) -> GedikController:
    return groupings.registry.make_controller("gedik", workers, seed=0, **params)


def quiet_report(n: int, now: float = 1.0) -> WorkerReport:
    """A report in which the engine measured nothing (the controller then relies on its counters)."""
    z = np.zeros(n)
    return WorkerReport(np.zeros(n, np.int64), z, z, np.ones(n, bool), 1.0, now)


def zipf(n_keys: int, z: float = 1.0, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Random key hashes and their Zipf frequencies, most frequent first."""
    pmf = np.arange(1, n_keys + 1, dtype=float) ** -z
    keys = np.random.default_rng(seed).integers(0, 2**64 - 1, n_keys, dtype=np.uint64, endpoint=True)
    return keys, pmf / pmf.sum()


def zipf_stream(keys: np.ndarray, pmf: np.ndarray, messages: int, seed: int) -> np.ndarray:
    cdf = np.cumsum(pmf)
    return keys[np.minimum(np.searchsorted(cdf, np.random.default_rng(seed).random(messages)), keys.size - 1)]


# --- the paper's measures on the toy example --------------------------------------------------------------------


def test_toy_communication_optimised_row_of_figure_1():
    f, before = toy("XZVR|UYWL")
    assert gcost.channel_loads(f, before, 2, gcost.LINEAR).tolist() == [11, 11]
    assert gcost.channel_loads(f, before, 2, gcost.QUADRATIC).tolist() == [39, 35]  # an item's load is beta(f) = f^2
    assert gcost.imbalance(gcost.channel_loads(f, before, 2, gcost.LINEAR)) == 1.0
    assert gcost.imbalance(gcost.channel_loads(f, before, 2, gcost.QUADRATIC)) == pytest.approx(1.1, abs=0.02)
    _, after = toy("XZ|UY|VRWL")  # loads of the paper's N = 3, reached by moving 7 units of frequency
    assert gcost.channel_loads(f, after, 3, gcost.LINEAR).tolist() == [8, 7, 7]
    assert gcost.imbalance(gcost.channel_loads(f, after, 3, gcost.LINEAR)) == pytest.approx(1.14, abs=0.005)
    assert gcost.channel_loads(f, after, 3, gcost.QUADRATIC).tolist() == [34, 25, 15]  # 2.27; the paper prints 2.26
    assert gcost.migration_cost(f, before, after, gcost.LINEAR) == 7


def test_toy_computation_optimised_row_of_figure_1():
    f, before = toy("XZV|RUYWL")
    assert gcost.channel_loads(f, before, 2, gcost.QUADRATIC).tolist() == [38, 36]  # 1.05
    assert gcost.channel_loads(f, before, 2, gcost.LINEAR).tolist() == [10, 12]  # 1.2
    _, after = toy("ZVRYL|UW|X")
    assert gcost.channel_loads(f, after, 3, gcost.QUADRATIC).tolist() == [24, 25, 25]  # 1.04
    assert gcost.imbalance(gcost.channel_loads(f, after, 3, gcost.LINEAR)) == 2.0
    assert gcost.migration_cost(f, before, after, gcost.LINEAR) == 10  # quadratic balance costs more migration


def test_scan_on_the_toy_matches_a_hand_run():
    """Scan, LCL, alpha 1.2: N 1 -> 2 gives the paper's [11, 11] / [39, 35]; N 2 -> 3 keeps comm within 8/7."""
    names = "XUZYWVRL"  # decreasing frequency, ties in a fixed order
    f = np.array([TOY[k] for k in names], float) / 22
    two = gb.build("scan", f, np.zeros(8), np.zeros(8), 2, LCL, ALPHAS)
    assert "".join(names[i] for i in np.flatnonzero(two.channels == 0)) == "XYVR"
    assert (gcost.channel_loads(f * 22, two.channels, 2, gcost.LINEAR) == [11, 11]).all()
    assert (gcost.channel_loads(f * 22, two.channels, 2, gcost.QUADRATIC) == [39, 35]).all()
    assert two.migration * 22 == pytest.approx(11) and two.ideal * 22 == pytest.approx(11)  # m = 1
    three = gb.build("scan", f, two.channels, np.array([0, 1, 2, 0, 1, 2, 0, 1]), 3, LCL, ALPHAS)
    assert three.channels.tolist() == [0, 1, 2, 2, 1, 0, 2, 1]  # X V | U W L | Z Y R
    assert gcost.channel_loads(f * 22, three.channels, 3, gcost.LINEAR).tolist() == [7, 8, 7]  # comm 1.14, as the paper
    assert gcost.channel_loads(f * 22, three.channels, 3, gcost.QUADRATIC).tolist() == [29, 26, 19]
    assert three.migration * 22 == pytest.approx(7)  # Z, Y and R: 7, the paper's migration for this row
    assert gcost.migration_cost(f * 22, two.channels, three.channels, gcost.LINEAR) == pytest.approx(7)


@pytest.mark.parametrize("method", gb.BUILDS)
def test_every_builder_balances_the_toy_communication(method):
    names = "XUZYWVRL"
    f = np.array([TOY[k] for k in names], float) / 22
    two = gb.build(method, f, np.zeros(8), np.zeros(8), 2, LCL, ALPHAS)
    assert gcost.channel_loads(f * 22, two.channels, 2, gcost.LINEAR).tolist() == [11, 11]
    three = gb.build(method, f, two.channels, np.array([0, 1, 2, 0, 1, 2, 0, 1]), 3, LCL, ALPHAS)
    loads = gcost.channel_loads(f * 22, three.channels, 3, gcost.LINEAR)
    assert gcost.imbalance(loads) <= 8 / 6 + 1e-9 and loads.min() >= 6
    cost = gcost.migration_cost(f, two.channels, three.channels, gcost.LINEAR)
    assert three.migration == pytest.approx(cost) and cost * 22 <= 8


# --- formulas ---------------------------------------------------------------------------------------------------


def test_theta_and_delta_follow_equations_15_and_17():
    assert gcost.theta(1.2, 10) == pytest.approx(0.2 / (1 + 1.2 / 9))
    assert gcost.theta(1.2, 10) == pytest.approx(1.2 * 10 / (1.2 + 9) - 1)  # the unsimplified form
    t = gcost.theta(1.2, 10)
    assert gcost.delta(LCL, ALPHAS, 0.1, 10, 10**6) == pytest.approx(0.1 * t / 10)
    assert gcost.delta(gcost.parse_resources("CCL"), ALPHAS, 0.1, 10, 10**6) == pytest.approx(0.1 * t / 10)  # beta_n
    lql = gcost.parse_resources("LQL")
    assert gcost.delta(lql, ALPHAS, 0.1, 10, 10**6) == pytest.approx(math.sqrt(0.1 * t / (10**6 * 10)))
    assert gcost.delta(LCL, ALPHAS, 0.1, 1, 10**6) == 1.0
    _, pmf = zipf(10**5, 0.5)
    first = gcost.delta(lql, ALPHAS, 0.1, 10, 10**5)
    refined = gcost.refined_delta(lql, ALPHAS, 0.1, 10, 10**5, pmf[pmf >= first])
    assert refined >= first


def test_a_keys_load_on_a_channel_stays_within_theta_of_the_mean_when_ratio_is_alpha():
    # one channel at alpha x, the other N-1 at x: the gap to the mean is exactly theta of the mean (Eq. 15)
    n, alpha = 7, 1.3
    loads = np.array([alpha] + [1.0] * (n - 1))
    assert loads.max() - loads.mean() == pytest.approx(gcost.theta(alpha, n) * loads.mean())


def test_relative_imbalance_and_balance_penalty_by_hand():
    assert gcost.relative_imbalance((1.2, 1.2, 1.2), ALPHAS) == pytest.approx(1.0)
    assert gcost.relative_imbalance((2.4, 1.2, 0.6), ALPHAS) == pytest.approx(1.0)
    # partial map {a: 0.4 -> 0, b: 0.3 -> 1}, N = 2, LCL: rho_s = rho_n = (0.4 - 0.3) / (theta * 0.35)
    t = gcost.theta(1.2, 2)
    rho = gcost.balance_penalty(np.array([0.4, 0.3]), np.array([0, 1]), 2, LCL, ALPHAS)
    assert rho == pytest.approx(0.1 / (t * 0.35))
    # b moved (0.3) and the dropped c (0.2) moves under the new consistent hash; m-bar = 0.9 / 2
    gamma = (0.2 + 0.3) / 0.45
    assert gcost.utility_value("apm", rho, gamma) == pytest.approx(0.1 / (t * 0.35) + 0.5 / 0.45)
    assert gcost.utility_value("a", rho, gamma) == rho
    assert gcost.utility_value("aplm", rho, gamma) == pytest.approx(rho + math.log1p(gamma))
    assert gcost.utility_value("atm", rho, gamma) == pytest.approx(rho * (1 + gamma))
    assert gcost.utility_value("atlm", rho, gamma) == pytest.approx(rho * (1 + math.log1p(gamma)))
    # the same numbers through a build: Scan keeps a (0.4) home and must move b to balance
    p = gb.build("scan", np.array([0.4, 0.3]), np.array([0, 0]), np.array([0, 1]), 2, LCL, ALPHAS,
                 dropped_f=np.array([0.2]), dropped_moves=np.array([True]))  # fmt: skip
    assert p.channels.tolist() == [0, 1]
    assert p.migration == pytest.approx(0.5) and p.ideal == pytest.approx(0.45)


def test_constant_resources_stay_out_of_the_balance_penalty():
    f, ch = np.array([0.5, 0.1, 0.1]), np.array([0, 1, 1])
    assert gcost.balance_penalty(f, ch, 2, gcost.parse_resources("CCL"), ALPHAS) == pytest.approx(
        gcost.balance_penalty(f, ch, 2, (gcost.LINEAR, gcost.CONSTANT, gcost.LINEAR), ALPHAS)
    )


# --- the builders: properties and reference runs ----------------------------------------------------------------


def _rho(loads, totals, counted, thetas, n):
    prod, used = 1.0, 0
    for k in range(3):
        if counted[k]:
            prod *= (loads[k].max() - loads[k].min()) / (thetas[k] * totals[k] / n) if totals[k] > 0 else 0.0
            used += 1
    return prod ** (1 / used)


def reference(method, f, old, n, kinds, m0, mbar):
    """Scan (Algorithm 2) and Redist (Algorithm 3) written out literally, with U^APM."""
    w = np.stack([gcost.beta(k, f) for k in kinds])
    counted = [k != gcost.CONSTANT for k in kinds]
    thetas = [gcost.theta(a, n) for a in ALPHAS]
    loads, totals, m = np.zeros((3, n)), np.zeros(3), m0
    out = np.full(f.size, -1)
    todo = list(range(f.size))
    while todo:
        best = (math.inf, -1, -1)
        for d in todo if method == "redist" else todo[:1]:
            for c in range(n):
                trial = loads.copy()
                trial[:, c] += w[:, d]
                u = _rho(trial, totals + w[:, d], counted, thetas, n) + (m + w[0, d] * (c != old[d])) / mbar
                u = u / f[d] if method == "redist" else u
                if u < best[0]:
                    best = (u, d, c)
        _, d, c = best
        out[d] = c
        m += w[0, d] * (c != old[d])
        loads[:, c] += w[:, d]
        totals += w[:, d]
        todo.remove(d)
    return out, m


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(1, 10_000), min_size=1, max_size=25, unique=True),
    n_old=st.integers(1, 6),
    n=st.integers(2, 7),
    resources=st.sampled_from(["LCL", "LLL", "LQL", "CQL"]),
    seed=st.integers(0, 2**16),
)
def test_scan_and_redist_match_their_pseudocode(counts, n_old, n, resources, seed):
    f = np.sort(np.array(counts, float))[::-1] / (2 * sum(counts))
    old = np.random.default_rng(seed).integers(0, n_old, f.size)
    kinds = gcost.parse_resources(resources)
    for method in ("scan", "redist"):
        got = gb.build(method, f, old, old % n, n, kinds, ALPHAS)
        want, m = reference(method, f, old, n, kinds, 0.0, got.ideal)
        assert got.channels.tolist() == want.tolist()
        assert got.migration == pytest.approx(m)


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(1, 1000), min_size=0, max_size=30),
    dropped=st.lists(st.tuples(st.integers(1, 1000), st.booleans()), max_size=5),
    n_old=st.integers(1, 8),
    n=st.integers(1, 8),
    method=st.sampled_from(gb.BUILDS),
    utility=st.sampled_from(gcost.UTILITIES),
    resources=st.sampled_from(["LCL", "CCL", "LLL", "LQL", "QQL"]),
    seed=st.integers(0, 2**16),
)
def test_builders_place_on_valid_channels_and_count_migration_exactly(
    counts, dropped, n_old, n, method, utility, resources, seed
):
    rng = np.random.default_rng(seed)
    f = np.sort(np.array(counts, float))[::-1] / 10_000
    old = rng.integers(0, n_old, f.size)  # channels >= n are channels that were removed
    hc_new = rng.integers(0, n, f.size)
    kinds = gcost.parse_resources(resources)
    df = np.array([c for c, _ in dropped], float) / 10_000
    dm = np.array([m for _, m in dropped], bool)
    p = gb.build(method, f, old, hc_new, n, kinds, ALPHAS, utility, dropped_f=df, dropped_moves=dm)
    assert p.channels.shape == f.shape and p.channels.dtype == np.int32
    assert ((p.channels >= 0) & (p.channels < n)).all()
    expect = gcost.migration_cost(f, old, p.channels, kinds[0]) + gcost.beta(kinds[0], df[dm]).sum()
    assert p.migration == pytest.approx(expect)  # sum over moved keys of beta_s(f), plus D_o's share
    assert p.ideal == pytest.approx((gcost.beta(kinds[0], f).sum() + gcost.beta(kinds[0], df).sum()) / n)


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(1, 1000), min_size=2, max_size=30),
    n=st.integers(2, 8),
    utility=st.sampled_from(gcost.UTILITIES),
    seed=st.integers(0, 2**16),
)
def test_readj_only_improves_and_never_unbalances(counts, n, utility, seed):
    f = np.sort(np.array(counts, float))[::-1] / 10_000
    old = np.random.default_rng(seed).integers(0, n, f.size)
    p = gb.build("readj", f, old, old, n, LCL, ALPHAS, utility)
    before = gcost.balance_penalty(f, old, n, LCL, ALPHAS)
    after = gcost.balance_penalty(f, p.channels, n, LCL, ALPHAS)
    assert after <= before + 1e-12  # only readjustments that lower rho are taken
    if not np.array_equal(p.channels, old):
        assert after < before


def test_readj_keeps_balancing_while_a_readjustment_improves_it():
    # the best readjustments here balance better at a migration cost above what they buy (negative gains): Readj
    # takes them, as the paper's algorithm stops only when no candidate improves the balance
    f = np.array([81, 79, 45, 45, 33, 31, 13, 13]) / 1000
    old = np.array([2, 0, 1, 1, 2, 0, 1, 0])
    p = gb.build("readj", f, old, old, 3, LCL, ALPHAS)
    rho = gcost.balance_penalty(f, p.channels, 3, LCL, ALPHAS)
    assert rho < 0.3  # stopping at the first negative gain left 0.42 (from 1.41)
    u_start = gcost.utility_value("apm", gcost.balance_penalty(f, old, 3, LCL, ALPHAS), 0.0)
    assert gcost.utility_value("apm", rho, p.migration / p.ideal) < u_start
    for d in range(f.size):  # and no single move improves it further
        for j in range(3):
            moved = p.channels.copy()
            moved[d] = j
            assert gcost.balance_penalty(f, moved, 3, LCL, ALPHAS) >= rho - 1e-12


def test_readj_moves_keys_off_removed_channels_first():
    f = np.array([0.3, 0.2, 0.1])
    p = gb.build("readj", f, np.array([0, 3, 1]), np.array([0, 2, 1]), 3, LCL, ALPHAS)
    assert ((p.channels >= 0) & (p.channels < 3)).all()
    assert p.migration >= 0.2 - 1e-12  # the key of channel 3 had to move


@pytest.mark.parametrize(
    "kwargs",
    [
        {"method": "best"},
        {"utility_name": "apx"},
        {"f": np.array([0.1, 0.2])},  # not sorted by decreasing frequency
        {"hc_new": np.array([0, 9])},
    ],
)
def test_build_refuses_bad_input(kwargs):
    args = {"method": "scan", "f": np.array([0.2, 0.1]), "old": np.array([0, 1]), "hc_new": np.array([0, 1])}
    args.update(kwargs)
    with pytest.raises(ValueError):
        gb.build(args["method"], args["f"], args["old"], args["hc_new"], 2, LCL, ALPHAS,
                 args.get("utility_name", "apm"))  # fmt: skip


# --- LOOKUP and the consistent hash -----------------------------------------------------------------------------


def test_consistent_hash_moves_about_one_nth_of_the_keys_and_only_to_the_new_channel():
    keys = np.random.default_rng(1).integers(0, 2**64 - 1, 200_000, dtype=np.uint64, endpoint=True)
    for n in (2, 5, 10, 19):
        a, b = make_ring(n, 1000), make_ring(n + 1, 1000)
        before, after = a.channel_of(keys), b.channel_of(keys)
        moved = before != after
        assert (after[moved] == n).all()  # never between existing channels
        assert moved.mean() == pytest.approx(1 / (n + 1), rel=0.15)
        assert moved_share(a, b) == pytest.approx(moved.mean(), abs=0.01)
        assert b.shares().sum() == pytest.approx(1.0) and moved_share(a, a) == 0.0
    # key grouping's uniform hash, for contrast, moves several times that
    assert (seeded_hashes(keys, 0, 10) != seeded_hashes(keys, 0, 11)).mean() > 4 / 11


def test_lookup_uses_the_explicit_hash_first_then_the_consistent_hash():
    c = controller(4, build="scan")
    keys, pmf = zipf(10_000)
    plan = c.plan(keys, pmf)
    fn = plan.function
    assert fn.keys.size > 0 and fn.version == 1
    routed = fn.lookup(keys)
    explicit = np.isin(keys, fn.keys)
    assert np.array_equal(routed[explicit], np.array([fn.explicit()[k] for k in keys[explicit].tolist()]))
    assert np.array_equal(routed[~explicit], fn.ring.channel_of(keys[~explicit]))
    assert (fn.freqs >= fn.delta).all() and (pmf[~explicit] < fn.delta).all()  # D_p = {f >= delta}


# --- the controller and its sources -----------------------------------------------------------------------------


def test_registry_builds_one_controller_shared_by_the_sources():
    c = groupings.registry.make_controller("gedik", 4, seed=0)
    sources = [groupings.make("gedik", 4, seed=s, controller=c) for s in range(3)]
    assert isinstance(c, GedikController) and c.sources == sources
    assert all(isinstance(g, GedikGrouping) and g.controller is c for g in sources)
    alone = groupings.make("gedik", 4)
    assert isinstance(alone.controller, GedikController) and alone.controller.sources == [alone]
    assert "gedik" in groupings.names()


@pytest.mark.parametrize(
    "params",
    [{"build": "best"}, {"utility": "x"}, {"resources": "LCQ"}, {"resources": "LC"}, {"alpha": 0.9},
     {"sigma": 0}, {"counters": 1}, {"window": 0}, {"eps_share": 2}, {"replicas": 0}],
)  # fmt: skip
def test_bad_parameters_are_one_line_value_errors(params):
    with pytest.raises(ValueError) as err:
        groupings.registry.make_controller("gedik", 4, **params)
    assert "\n" not in str(err.value)


def test_parameters_resolve_with_the_papers_defaults():
    values = resolve("gedik", PARAMS, 10, {"alpha": "1.1", "build": "READJ"})
    assert values["alpha_n"] == 1.1 and values["build"] == "readj"
    defaults = resolve("gedik", PARAMS, 10, {})
    assert defaults["resources"] == "LCL" and defaults["utility"] == "apm" and defaults["sigma"] == 0.1
    assert defaults["build"] == "redist"


def _run(build="redist", seed=3):
    keys, pmf = zipf(20_000)
    c = controller(3, build=build, window=20_000)
    sources = [groupings.make("gedik", 3, seed=s, controller=c, window=20_000) for s in range(2)]
    outs = []
    for n in (3, 4, 5):
        c.resize(n)
        for s, g in enumerate(sources):
            outs.append(g.route(zipf_stream(keys, pmf, 30_000, seed + 10 * n + s)))
        c.step(quiet_report(n))
    return c, outs


def test_routing_is_deterministic():
    (a, outs_a), (b, outs_b) = _run(), _run()
    assert a.version == b.version and all(np.array_equal(x, y) for x, y in zip(outs_a, outs_b, strict=True))
    assert np.array_equal(a.function().keys, b.function().keys)
    assert np.array_equal(a.function().placed, b.function().placed)


def test_a_batch_routes_as_one_key_at_a_time():
    keys, pmf = zipf(5_000)
    stream = zipf_stream(keys, pmf, 6_000, 1)
    c1, c2 = controller(4, window=1_000), controller(4, window=1_000)
    g1 = groupings.make("gedik", 4, controller=c1, window=1_000)
    g2 = groupings.make("gedik", 4, controller=c2, window=1_000)
    whole = g1.route(stream)
    single = np.concatenate([g2.route(stream[i : i + 1]) for i in range(stream.size)])
    assert np.array_equal(whole, single)
    a, b = g1.counter.entries(), g2.counter.entries()
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.counts, b.counts)


def test_steps_build_first_then_on_resize_and_keep_the_previous_version():
    keys, pmf = zipf(50_000)
    c = controller(2, window=50_000)
    g = groupings.make("gedik", 2, controller=c, window=50_000)
    assert not c.step(quiet_report(2))  # nothing counted yet: nothing to build from
    g.route(zipf_stream(keys, pmf, 100_000, 1))
    assert c.step(quiet_report(2)) and c.last["reason"] == "first" and c.version == 1
    assert not c.step(quiet_report(2))  # same frequencies, balanced estimate: keep p
    for n in range(3, 8):
        c.resize(n)
        assert g.workers == n - 1  # the source routes with the current version until the step
        before = c.lookup(keys)
        assert c.step(quiet_report(n)) and c.last["reason"] == "resize" and g.workers == n
        after = c.lookup(keys)
        assert np.array_equal(c.lookup(keys, c.version - 1), before)
        assert after.max() == n - 1
        # keys that change channel are explicit in one version, or go to the new channel by the consistent hash
        old_fn, new_fn = c.function(c.version - 1), c.function()
        moved = before != after
        explicit = np.isin(keys, old_fn.keys) | np.isin(keys, new_fn.keys)
        assert (after[moved & ~explicit] == n - 1).all()
        # the migration recorded is Eq. 9 over the moved keys, relative to the ideal 1/N
        m = float(pmf[moved].sum()) * n
        assert c.last["relative_migration"] == pytest.approx(m, rel=0.25, abs=0.1)
        g.route(zipf_stream(keys, pmf, 100_000, n))
    with pytest.raises(ValueError):
        c.lookup(keys, 0)  # only the current and the previous versions are kept
    json.dumps(c.stats())
    assert c.stats()["rebuilds"] == len(c.events) == 6


@pytest.mark.parametrize("method", gb.BUILDS)
def test_shrinking_moves_every_key_off_the_removed_channels(method):
    keys, pmf = zipf(20_000)
    c = controller(8, build=method, window=20_000)
    g = groupings.make("gedik", 8, controller=c, window=20_000, build=method)
    g.route(zipf_stream(keys, pmf, 40_000, 1))
    assert c.step(quiet_report(8))
    before, version = c.lookup(keys), c.version
    c.resize(5)  # the removed channels hand their keys over at once, not at the next step
    assert c.version == version + 1 and c.last["reason"] == "resize"
    after = c.lookup(keys)
    assert after.max() <= 4 and (after[before <= 4] == before[before <= 4]).mean() > 0.9
    assert g.route(keys).max() <= 4
    g.feedback(AckReport.of([7]))  # an ack of a removed worker, sent before the new version took over
    with pytest.raises(ValueError):
        g.feedback(AckReport.of([8]))


def test_drifting_frequencies_trigger_a_rebuild_that_lowers_the_imbalance():
    keys, pmf = zipf(20_000)
    c = controller(6, window=40_000)
    g = groupings.make("gedik", 6, controller=c, window=40_000)
    g.route(zipf_stream(keys, pmf, 80_000, 1))
    assert c.step(quiet_report(6))
    shifted = np.roll(keys, 7)  # the hot keys are now other keys
    g.route(zipf_stream(shifted, pmf, 80_000, 2))
    assert c.step(quiet_report(6)) and c.last["reason"] == "imbalance"
    assert c.last["imbalance_after"] < 0.95 * c.last["imbalance_before"]
    assert set(c.function().keys[:5].tolist()) == set(shifted[:5].tolist())


def test_measured_imbalance_counts_arrivals_per_unit_of_capacity():
    c = controller(2)
    report = WorkerReport(np.array([100, 50]), np.array([1.0, 1.0]), np.array([0.0, 0.0]), np.ones(2, bool), 1, 1)
    assert c.measured_imbalance(report) == pytest.approx(1.0)  # worker 1 is half as fast: its half share fits
    report = WorkerReport(np.array([100, 50]), np.array([1.0, 0.5]), np.array([0.0, 0.0]), np.ones(2, bool), 1, 2)
    assert c.measured_imbalance(report) == pytest.approx(2.0)  # as fast, but idle half the time
    report = WorkerReport(np.array([100, 50]), np.array([1.0, 1.0]), np.array([0.0, 50.0]), np.ones(2, bool), 1, 3)
    assert c.measured_imbalance(report) == pytest.approx(2.0)  # 50 processed + 50 queued arrived at worker 1
    assert c.measured_imbalance(quiet_report(2)) is None


def test_sources_take_and_ignore_what_they_should():
    c = controller(3)
    g = GedikGrouping(3, 7, c.params, c)
    assert c.sources == [g]
    c.attach(g)
    assert c.sources == [g]  # attaching twice is harmless
    g.feedback(AckReport.empty())
    with pytest.raises(ValueError):
        g.feedback(AckReport.of([3]))
    g.resize(5)  # the controller owns N: nothing changes at the source
    assert g.workers == 3
    with pytest.raises(ValueError):
        g.route(np.zeros((2, 2), np.uint64))
    with pytest.raises(ValueError):
        g.route(np.zeros(2, np.uint64), now=math.nan)
    with pytest.raises(TypeError):
        c.step("report")
    assert g.route(np.zeros(0, np.uint64)).dtype == np.int32
    clone = pickle.loads(pickle.dumps(g))
    keys, _ = zipf(1_000)
    assert np.array_equal(clone.route(keys), g.route(keys))
    assert set(g.stats()) >= {"messages", "version", "counter_entries"}


@pytest.mark.slow
def test_experiment_zipf_growing_channels_against_uniform_and_consistent_hashing():
    """Zipf z = 1 over 10^5 keys, N from 2 to 20 one at a time, exact frequencies (the paper's Fig. 6 setting)."""
    keys, pmf = zipf(100_000)
    c = controller(1, domain=100_000)
    prev = {"gedik": c.lookup(keys), "uniform": np.zeros(keys.size, np.int32), "consistent": c.lookup(keys)}
    b = {name: [] for name in prev}
    m = {name: [] for name in prev}
    for n in range(2, 21):
        c.resize(n)
        c.install(c.plan(keys, pmf, reason="resize"))
        now = {"gedik": c.lookup(keys), "uniform": seeded_hashes(keys, 0, n), "consistent": c.ring(n).channel_of(keys)}
        for name, ch in now.items():
            ratios = tuple(gcost.imbalance(gcost.channel_loads(pmf, ch, n, k)) for k in LCL)
            b[name].append(gcost.relative_imbalance(ratios, ALPHAS))
            m[name].append(float(pmf[prev[name] != ch].sum()) * n)
        prev = now
    mean_b = {name: float(np.mean(v)) for name, v in b.items()}
    mean_m = {name: float(np.mean(v)) for name, v in m.items()}
    assert mean_b["gedik"] < 0.9 * mean_b["uniform"] and mean_b["gedik"] < 0.9 * mean_b["consistent"]
    assert mean_m["gedik"] < 1.5 and mean_m["gedik"] < 1.4 * mean_m["consistent"]
    assert mean_m["uniform"] > 3 * mean_m["gedik"]
