"""production-vs-papers in quick mode: where the production partitioners stand against the papers' strategies."""

from __future__ import annotations

import pytest

from experiments.engines.production import GROUPINGS, PRODUCTION


@pytest.mark.slow  # its quick run takes about 7 s (tests/conftest.py)
def test_production_partitioners_against_the_papers(outputs):
    numbers = outputs["production-vs-papers"][1]
    scenarios = {key.split("/")[0] for key in numbers}
    assert scenarios == {"fig8", "capacity-change", "drift", "leave-join"}
    for sc in scenarios:
        row = {g: numbers[f"{sc}/{g}"] for g in GROUPINGS}
        assert all(r["exact"] for r in row.values()), sc
        # the load-aware shuffles follow the uneven workers; Key_Shared, keyed and load-blind, does not
        for g in ("flink_adaptive", "kafka_adaptive"):
            assert row[g]["p99_ms"] < row["key_shared"]["p99_ms"] / 2, (sc, g)
            assert row[g]["replication"] > 1.3, (sc, g)
        assert row["key_shared"]["replication"] < 1.05 and row["key_shared"]["p99_ms"] > row["cg"]["p99_ms"], sc
    assert set(PRODUCTION) <= set(GROUPINGS)
