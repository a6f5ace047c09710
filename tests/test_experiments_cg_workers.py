"""Consistent Grouping's Figs. 6 and 9 (imbalance and memory vs workers), quick mode, through `outputs`."""

from __future__ import annotations

import csv

EPS = 0.01


def _table(rows: list[dict], trace: str = "wp") -> dict[tuple[int, str], dict]:
    return {(r["workers"], r["grouping"]): r for r in rows if r["trace"] == trace}


def test_files_and_paper_columns(outputs):
    out, n = outputs["cg-workers"]
    for f in ("fig6_bins.csv", "fig9_workers.csv", "workers.png", "workers.md"):
        assert (out / f).stat().st_size > 0
    md = (out / "workers.md").read_text()
    assert "paper" in md and "words" in md
    with (out / "fig9_workers.csv").open() as f:
        assert len(list(csv.DictReader(f))) == len(n["fig9"]) == 2 * 4 * 7  # two traces, 4 sizes, 7 groupings


def test_fig6_hashing_grows_while_random_choices_stay_bounded(outputs):
    t = _table(outputs["cg-workers"][1]["fig6"])
    ws = outputs["cg-workers"][1]["workers"]
    for g in ("kg", "pkg"):  # imbalance grows with the number of bins
        imb = [t[(w, g)]["imbalance"] for w in ws]
        assert imb == sorted(imb) and imb[-1] > 10 * imb[0]
    for w in ws:
        for g in ("porc", "ch"):  # bounded by eps (plus rounding of the bin capacity)
            assert t[(w, g)]["imbalance"] <= 1.5 * EPS
        for g in ("potc", "sg"):
            assert t[(w, g)]["imbalance"] < 0.05
            # balance bought with memory: every copy count above porc's and pkg's
            assert t[(w, g)]["replication"] > t[(w, "porc")]["replication"] > t[(w, "kg")]["replication"] == 1.0
        assert t[(w, "porc")]["replication"] <= t[(w, "ch")]["replication"]


def test_fig9_cg_bounded_with_less_memory_than_ch_over_the_same_virtual_workers(outputs):
    n = outputs["cg-workers"][1]
    t = _table(n["fig9"])
    ws = n["workers"]
    assert [t[(w, "kg")]["imbalance"] for w in ws] == sorted(t[(w, "kg")]["imbalance"] for w in ws)
    assert t[(ws[0], "pkg")]["imbalance"] < 0.01 < t[(ws[-1], "pkg")]["imbalance"]  # pkg fine only when small
    for w in ws:
        assert t[(w, "cg")]["imbalance"] <= 1.5 * EPS
        assert t[(w, "cg")]["replication"] < t[(w, "ch")]["replication"]
        assert t[(w, "cg")]["replication"] < t[(w, "sg")]["replication"]
    # the words stream: the same order at the most workers (kg worst, cg bounded, sg most memory)
    words = _table(n["fig9"], "words")
    w = ws[-1]
    assert words[(w, "kg")]["imbalance"] > words[(w, "pkg")]["imbalance"] > 100 * words[(w, "cg")]["imbalance"]
    assert words[(w, "sg")]["replication"] > 2 * words[(w, "cg")]["replication"]
