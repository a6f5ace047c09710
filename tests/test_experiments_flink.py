"""flink-check in quick mode: the emulator's engines against a real Flink on `make run`'s topology."""

from __future__ import annotations

import pytest
from conftest import MISSING_TOOL

from topo.flink_engine.install import missing

WHY = missing()


@pytest.mark.slow  # two cells on three engines: about a minute
@pytest.mark.skipif(WHY is not None, reason=f"{MISSING_TOOL}: {WHY}")
def test_the_emulator_predicts_flink_on_the_heterogeneous_spec(outputs):
    rows = {r["grouping"]: r for r in outputs["flink-check"][1]["rows"]}
    assert set(rows) == {"pkg", "flink_adaptive"}
    pkg = rows["pkg"]
    # the emulator's routing, carried out by Flink: every worker got the same tuples
    assert pkg["flink_per_worker"] == pkg["sim_per_worker"]
    assert all(r["exact"] for r in rows.values())
    for engine in ("sim", "ray"):
        assert "per-worker counts differ" not in pkg[f"{engine}_verdict"]
        # Flink's 100 ms buffer timeout dominates the latency of every engine
        assert pkg[f"{engine}_p50_ms"] > 40 and pkg["flink_p50_ms"] > 40
