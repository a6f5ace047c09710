"""D-Choices paper (002) experiments in quick mode: the qualitative results of Figs. 1, 3-6, 10 and 11."""

from __future__ import annotations

import pytest


def _files(outputs, name: str, stem: str) -> dict:
    out, numbers = outputs[name]
    for ext in ("csv", "png", "md"):
        path = out / f"{stem}.{ext}" if stem != "imbalance" or ext != "csv" else out / "imbalance_zf.csv"
        assert path.exists() and path.stat().st_size > 0, path
    return numbers


def test_imbalance_files_and_against_paper(outputs):
    numbers = _files(outputs, "dchoices-imbalance", "imbalance")
    out, _ = outputs["dchoices-imbalance"]
    assert (out / "imbalance_traces.csv").exists()
    assert "Against the paper" in (out / "imbalance.md").read_text()
    assert numbers["zf"] and numbers["traces"]


def test_pkg_imbalance_grows_with_skew_and_workers(outputs):
    numbers = outputs["dchoices-imbalance"][1]
    zf, zs, ns = numbers["zf"], numbers["zs"], numbers["workers"]
    cell = {(r["workers"], r["z"]): r for r in zf}
    for n in ns:
        assert cell[(n, zs[-1])]["pkg"] > cell[(n, zs[0])]["pkg"]
    assert cell[(ns[-1], zs[-2])]["pkg"] > cell[(ns[0], zs[-2])]["pkg"]
    # WP-like trace: pkg is balanced at few workers and not at many (Fig. 1)
    wp = {r["workers"]: r for r in numbers["traces"] if r["trace"] == "WP-like"}
    assert wp[ns[0]]["pkg"] < 1e-3
    assert wp[ns[-1]]["pkg"] > 0.01


def test_dc_wc_stay_balanced_where_pkg_fails(outputs):
    numbers = outputs["dchoices-imbalance"][1]
    for r in numbers["zf"] + numbers["traces"]:
        assert r["wc"] < 1e-3, r
        assert r["dc"] < 5e-3, r
        assert r["wc"] <= r["dc"] + 1e-5 <= r["pkg"] + 2e-5, r
    hi = [r for r in numbers["zf"] if r["z"] == numbers["zs"][-1] and r["workers"] == numbers["workers"][-1]][0]
    assert hi["pkg"] > 50 * hi["dc"]
    assert hi["rr"] < hi["pkg"] / 10


def test_head_is_small_and_d_below_n(outputs):
    out, numbers = outputs["dchoices-head"]
    for ext in ("csv", "png", "md"):
        assert (out / f"head.{ext}").stat().st_size > 0
    zs = numbers["zs"]
    for n in numbers["workers"]:
        rows = [r for r in numbers["rows"] if r["workers"] == n]
        for r in rows:
            assert r["head_1/5n_exact"] <= 5 * n
            assert r["head_2/n_exact"] <= r["head_1/5n_exact"]
            assert 2 <= r["d_exact"] < n
            assert r["d_run"] < n
            assert r["head_1/5n_run"] == pytest.approx(r["head_1/5n_exact"], abs=max(2, 0.1 * r["head_1/5n_exact"]))
        # the head first grows with skew, then shrinks as a few keys take over (the bump of Fig. 3)
        sizes = [r["head_1/5n_exact"] for r in rows]
        peak = max(sizes)
        assert sizes[0] < peak and sizes[-1] < peak
        # d grows with skew (Fig. 4)
        ds = [r["d_exact"] for r in rows]
        assert ds == sorted(ds) and ds[-1] > ds[0]
        assert len(rows) == len(zs)


def test_memory_against_pkg_and_sg(outputs):
    out, numbers = outputs["dchoices-memory"]
    for ext in ("csv", "png", "md"):
        assert (out / f"memory.{ext}").stat().st_size > 0
    worst = numbers["worst"]
    # the paper's estimate: at most ~30% over pkg, at least 80% under sg (Figs. 5, 6)
    assert worst["dc/pkg_est"] <= 1.3 and worst["wc/pkg_est"] <= 1.3
    assert worst["dc/sg_est"] <= 0.21 and worst["wc/sg_est"] <= 0.21
    # measured replication: dc never above wc, both well below sg
    for r in numbers["rows"]:
        assert r["dc/pkg_est"] <= r["wc/pkg_est"] + 1e-9
        assert r["mem_dc_run"] <= r["mem_wc_run"]
        assert r["mem_wc_run"] < 0.5 * r["mem_sg_run"]
        assert r["mem_pkg_run"] <= r["mem_dc_run"]
    # dc much cheaper than wc at moderate skew with many workers
    mid = [r for r in numbers["rows"] if r["workers"] == 100 and r["z"] == 1.4][0]
    assert mid["wc/pkg_est"] - 1 > 2 * (mid["dc/pkg_est"] - 1)
