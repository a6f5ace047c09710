"""Gedik's skew sweep (000, Fig. 4) and ALBIC against Flux per period (004), in quick mode, through `outputs`."""

from __future__ import annotations

import csv

import pytest

from groupings.adaptive import gedik_build as gb


def test_gedik_skew_builds_balance_better_than_hashing_at_high_skew(outputs):
    out, n = outputs["gedik-skew"]
    for f in ("skew.csv", "skew.png", "skew.md"):
        assert (out / f).stat().st_size > 0
    assert "paper" in (out / "skew.md").read_text()
    assert n["z"][-1] == 1.0
    for build in gb.BUILDS:
        b, m = n[build]["b"][-1], n[build]["m"][-1]
        assert b < n["consistent"]["b"][-1] and b < n["uniform"]["b"][-1]
        assert m < 1.5 * n["consistent"]["m"][-1]  # migration near consistent hashing's
        assert m < 0.6 * n["uniform"]["m"][-1]  # far below uniform hashing's
    # consistent hashing loses balance as skew grows; uniform hashing migrates well above the ideal throughout
    assert n["consistent"]["b"][-1] > n["consistent"]["b"][0] * 1.15
    assert min(n["uniform"]["m"]) > 2.0
    assert n["best_build_at_high_skew"] in gb.BUILDS
    with (out / "skew.csv").open() as f:
        assert len(list(csv.DictReader(f))) == len(n["z"])


@pytest.mark.slow
def test_albic_keeps_a_lower_load_distance_than_flux_within_the_budget(outputs):
    out, n = outputs["albic-periods"]
    for f in ("periods.csv", "periods.png", "periods.md"):
        assert (out / f).stat().st_size > 0
    albic, flux, none = n["albic"], n["flux"], n["none"]
    assert albic["mean_ld"] < flux["mean_ld"]
    assert flux["mean_ld"] < none["mean_ld"]
    assert 0 < albic["max_migrations"] <= n["budget"] and flux["max_migrations"] <= n["budget"]
    assert albic["mean_ld"] < 0.25 * none["mean_ld"]
