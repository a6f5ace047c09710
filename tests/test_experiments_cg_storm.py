"""Consistent Grouping's homogeneous Storm run (memory per grouping) in quick mode, on Ray actors (slow)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_kg_costs_least_sg_most_and_pkg_cg_little_more_than_kg(outputs):
    _, numbers = outputs["cg-storm-memory"]
    by = {r["grouping"]: r for r in numbers["rows"]}
    assert all(r["exact"] for r in by.values())
    kg, pkg, cg, sg = (by[g]["state_keys"] for g in ("kg", "pkg", "cg", "sg"))
    assert kg <= pkg <= 2 * kg and kg <= cg <= 2 * kg  # at most two workers per key (cg: about eps more)
    assert sg > 1.3 * max(pkg, cg) and sg > 1.5 * kg  # shuffle spreads every frequent key over all workers
    assert by["sg"]["state_bytes"] > by["kg"]["state_bytes"]
