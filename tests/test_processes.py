"""Storm's process model on Ray (--processes N): sources and workers together in N processes, with the same
buffers, credits, acks, replay and exactness as one actor per source; a process that dies takes every source and
worker it hosted with it, and the run recovers them all."""

from __future__ import annotations

import pytest
from test_ray_engine import check_run, zipf_stream

from topo.ray_engine import run_ray
from topo.spec import SpecError, TopologySpec

pytestmark = pytest.mark.timing


def test_processes_refuse_what_they_cannot_mean():
    for bad, says in (({"processes": 0}, "--processes"), ({"processes": 2, "worker_processes": 2}, "--processes"),
                      ({"processes": 2, "engine": "sim"}, "--engine ray")):
        with pytest.raises(SpecError, match=says):
            TopologySpec(**{"engine": "ray", **bad})


@pytest.mark.parametrize("grouping", ["pkg", pytest.param("albic", marks=pytest.mark.slow)])
def test_sources_and_workers_share_processes_and_stay_exact(ray_session, grouping):
    # albic's controller pulls statistics from, and pushes versions to, sources that live inside processes
    spec = TopologySpec(grouping=grouping, engine="ray", workers=5, sources=3, cost_ms=0.2, rate=6000.0,
                        batch_size=50, linger_ms=10.0, processes=2,
                        params={"period": 0.25} if grouping == "albic" else {})
    summary = run_ray(spec, zipf_stream(6000)).summary
    check_run(summary, spec)
    procs = summary["ray"]["recovery"]["processes"]
    # two processes: a contiguous block of workers each, and every second source
    assert [p["workers"] for p in procs] == [[0, 1, 2], [3, 4]]
    assert [sorted(p["sources"]) for p in procs] == [[0, 2], [1]]
    assert len({p["pid"] for p in procs}) == 2 and all(p["peak_rss_mb"] > 0 for p in procs)
    # frames for a process's own workers are handed over; for the other process's they take the wire, not Ray
    assert all(p["frames"]["process"] > 0 and p["frames"]["wire"] > 0 and p["frames"]["ray"] == 0 for p in procs)
    # each process's scheduler served its sleeping workers as ideal servers: every batch was served at exactly the
    # configured capacity, and how late each ack left is reported beside it
    served = sum(row["tuples"] for row in summary["per_worker"])
    assert sum(e["late_ms"]["count"] for e in summary["ray"]["emulators"]) >= served / spec.batch_size
    assert all(row["measured_capacity"] == pytest.approx(row["capacity"]) for row in summary["per_worker"])
    assert summary["headroom"]["ack_late_p99_ms"] == summary["ray"]["ack_late_ms"]["p99"] >= 0.0
    if grouping == "albic":
        version = summary["controller"]["version"]
        assert version >= 1 and summary["ray"]["controller_pushes"] == version
        # every source, in either process, ends on the controller's last version
        assert all(stats["version"] == version for stats in summary["grouping_stats"])


def test_a_process_killed_mid_run_takes_its_sources_and_workers_and_loses_nothing(ray_session):
    spec = TopologySpec(grouping="pkg", engine="ray", workers=4, sources=4, cost_ms=0.1, rate=8000.0,
                        batch_size=100, linger_ms=10.0, aggregate_every_s=0.3, processes=2)
    # and the aggregator after it: every source, each driven by its process's scheduler, rewinds. Ray reports a
    # killed actor's death up to ~1.6 s late on this 2-core machine: the stream (4 s of input) outlasts both notices
    summary = run_ray(spec, zipf_stream(32000), chaos=(("kill-source", 1, 0.8), "kill-aggregator@1.4")).summary
    check_run(summary, spec)  # exact: nothing lost, nothing counted twice
    kill, _ = summary["ray"]["chaos"]
    assert kill["how"].startswith("SIGKILL") and kill["process_sources"] == [1, 3] and kill["process_workers"] == [2, 3]
    recovery = summary["ray"]["recovery"]
    dead = {f["actor"] for f in recovery["failures"]}
    # the process hosted sources 1 and 3 and workers 2 and 3: every one of them is on the record, and came back
    assert {"source 1", "source 3", "workers 2,3 (process 1)", "aggregator"} <= dead
    assert summary["ray"]["rewinds"] >= 1
    assert all(f["recovery_s"] is not None and f["how"] == "killed by --chaos" for f in recovery["failures"])
    assert summary["ray"]["incarnations"] == [1, 1, 2, 2]
