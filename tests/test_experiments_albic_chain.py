"""ALBIC's integrative half (004) in quick mode, through `outputs`: against COLA (5.3), integrated scale-in (5.1), and
the Wikipedia job's stand-in (5.2). Their quick runs take 5 to 15 s here (HiGHS spends about a second per solve
even on small instances), so they are marked slow."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_albic_balances_better_than_cola_with_as_much_collocation_and_few_migrations(outputs):
    out, n = outputs["albic-cola"]
    for f in ("cola.csv", "cola.png", "cola.md"):
        assert (out / f).stat().st_size > 0
    assert "Against the paper" in (out / "cola.md").read_text()
    for row in n["sweep"] + n["by_size"]:
        assert row["albic_ld"] < row["cola_ld"]
        assert row["albic_collocation"] >= row["cola_collocation"] - 0.02
        assert row["albic_migrations"] <= n["budget"]
        assert row["albic_collocation"] <= row["x"] + 0.5  # bounded by the one-to-one share (plus even traffic)


def test_integrated_scale_in_balances_sooner_and_drains_in_similar_time(outputs):
    out, n = outputs["albic-scale-in"]
    for f in ("scale_in.csv", "scale_in.png", "scale_in.md"):
        assert (out / f).stat().st_size > 0
    rows = {(r["case"], r["method"]): r for r in n["summary"]}
    for case in {r["case"] for r in n["summary"]}:
        integrated, separate = rows[case, "integrated"], rows[case, "non-integrated"]
        assert integrated["mean load distance"] < separate["mean load distance"]
        assert separate["periods to scale in"] is not None
        # quick mode's 2OL: with a third of 6 nodes at 100% the MILP keeps the removed node's last key group within
        # its 6 periods (the full run drains both cases); where both drained, in similar time
        if integrated["periods to scale in"] is not None:
            assert integrated["periods to scale in"] <= separate["periods to scale in"] + 3
    assert rows["1OL", "integrated"]["periods to scale in"] is not None


def test_wikipedia_milp_keeps_a_lower_steadier_load_distance_than_flux(outputs):
    out, n = outputs["albic-wikipedia"]
    for f in ("wikipedia.csv", "wikipedia.png", "wikipedia.md"):
        assert (out / f).stat().st_size > 0
    albic, flux = n["albic"], n["flux"]
    assert albic["mean_ld"] < flux["mean_ld"] and albic["max_ld"] < flux["max_ld"]
    assert albic["max_migrations"] <= n["budget"] and flux["max_migrations"] <= n["budget"]
    assert albic["mean_collocation"] < 2.0 / n["nodes"]  # even fan-out: about a random placement's 1/nodes


def test_the_cap_is_compared_with_every_key_group_movable_on_each_settings_periods(outputs):
    out, n = outputs["albic-cap"]
    for f in ("cap.csv", "cap.md"):
        assert (out / f).stat().st_size > 0
    assert set(n["summary"]) == {"albic-periods", "albic-scale-in (1OL, integrated)", "albic-cola (x = 50%)"}
    for setting in n["summary"]:
        runs = {r["milp"]: [x for x in n["rows"] if x["setting"] == setting and x["milp"] == r["milp"]]
                for r in n["rows"] if r["setting"] == setting}
        assert set(runs) == {"capped", "every key group"}
        capped, every = runs["capped"], runs["every key group"]
        assert [r["period"] for r in capped] == [r["period"] for r in every] and len(capped) >= 2
        assert capped[0]["variables"] <= n["cap"] or capped[0]["variables"] == every[0]["variables"]
        if every[0]["variables"] <= n["cap"]:  # under the cap nothing is frozen: the same plans
            assert [(r["ld"], r["migrations"]) for r in capped] == [(r["ld"], r["migrations"]) for r in every]
    # the quick periods setting is just over the cap (8 nodes x 64 key groups): the two MILPs differ there
    periods = [r for r in n["rows"] if r["setting"] == "albic-periods"]
    assert {r["variables"] for r in periods} == {n["cap"], 512}
