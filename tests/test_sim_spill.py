"""A simulator run whose per-tuple log lives in files, read a chunk at a time, gives what the same run in memory
gives: the same summary, time series, latency table, batches and operator outcome."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from topo.data.streams import stream_from_spec
from topo.results import passes, spill
from topo.results.metrics import write_outputs
from topo.sim import simulator
from topo.sim.simulator import Simulation
from topo.spec import TopologySpec

STREAM = "zipf:z=1.2,keys=3000,messages=30000,seed=5"


def _run(grouping: str, tmp, spilled: bool, monkeypatch, **kw):
    monkeypatch.setattr(simulator, "SPILL_BYTES", 0 if spilled else 1 << 40)
    monkeypatch.setattr(passes, "CHUNK", 4093 if spilled else 1 << 21)  # chunks that cut buffers and instants
    spec = TopologySpec(grouping=grouping, stream=STREAM, seed=2, engine="sim", **kw)
    sim = Simulation(spec, stream_from_spec(STREAM))
    result = sim.run()
    assert spill.is_mapped(sim.pool.worker) == spilled
    out = tmp / ("spilled" if spilled else "memory")
    out.mkdir()
    write_outputs(result, out)
    summary = {k: v for k, v in result.summary.items() if k != "wall_clock_s"}
    return summary, pq.read_table(out / "latency.parquet"), result


@pytest.mark.parametrize("grouping, kw", [
    ("cg", dict(workers=12, sources=3, cost_ms=0.2)),  # the compiled loop
    ("lasg", dict(workers=8, sources=2, cost_ms=0.5, rate=12000, operator="topk")),  # the Python loop
    ("kg", dict(workers=10, sources=2, cost_ms=0.4, rate=20000, sample_interval_s=0.01)),
])
def test_a_spilled_log_gives_the_same_outputs(grouping, kw, tmp_path, monkeypatch):
    monkeypatch.setattr("topo.sim.queueing.KEEP_ROWS", 1000)  # rows go back to their files during the run
    in_memory, latency, result = _run(grouping, tmp_path, False, monkeypatch, **kw)
    spilled, spilled_latency, spilled_result = _run(grouping, tmp_path, True, monkeypatch, **kw)
    assert json.dumps(spilled, sort_keys=True) == json.dumps(in_memory, sort_keys=True)
    assert spilled_result.timeseries.equals(result.timeseries)
    assert spilled_latency.equals(latency) and latency.num_rows == 30000
    assert spilled_result.extras["batches"].equals(result.extras["batches"])


def test_released_rows_keep_their_values():
    column = spill.column(np.float64, 3_000_000)
    column[:] = np.arange(3_000_000)
    spill.release(column, 0, 2_500_000)
    spill.release(column[10:], 5, 7)  # a view of the column: its own rows
    assert column[123] == 123.0 and column.sum() == np.arange(3_000_000).sum()
    assert not spill.is_mapped(np.zeros(3)) and len(spill.column(np.int32, 0)) == 0
    spill.release(np.zeros(3), 0, 3)  # an array in memory: nothing to give back


def test_a_directory_without_room_or_rights_fails_in_one_line(tmp_path):
    from topo.errors import RunFailed

    with pytest.raises(RunFailed, match="set TMPDIR"):
        spill.column(np.float64, 10, directory=str(tmp_path / "missing"))
    with pytest.raises(RunFailed, match="GB more needed"):
        spill.column(np.float64, (1 << 60) // 8, directory=str(tmp_path))  # more than any disk here
    assert list(tmp_path.iterdir()) == []  # nothing left behind
