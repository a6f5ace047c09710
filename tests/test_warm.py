"""A first run like the second: `python -m topo.warm` leaves numba's cache holding everything a default run compiles
on either engine, and a Ray source's rehearsal before the clock compiles what its run calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import groupings
from topo.data.streams import stream_from_spec
from topo.model import SourceNode
from topo.model.inputs import arrival_times
from topo.model.rehearsal import read_only, rehearse

ROOT = Path(__file__).resolve().parents[1]


def _signatures() -> dict[str, int]:
    """How many compiled versions each numba function of the project has in this process."""
    from numba.core.registry import CPUDispatcher

    seen = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("groupings", "topo", "operators")):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, CPUDispatcher):
                seen[f"{name}.{attr}"] = len(value.signatures)
    return seen


def _node(name: str, keys: np.ndarray, arrivals: np.ndarray) -> SourceNode:
    grouping = groupings.make(name, workers=4, seed=3)
    return SourceNode(0, grouping, keys, arrivals, pool=4, active=4, batch_size=100, linger_s=0.01, credits=10)


@pytest.mark.parametrize("name", ["pkg", "cg"])
def test_a_rehearsal_on_read_only_arrays_compiles_all_that_the_run_then_calls(name):
    # as a Ray source: its share comes from the object store, read-only; the rehearsal on its first tuples must
    # leave nothing for the run's own steps to compile, which would count in the run's time
    stream = stream_from_spec("zipf:z=1.2,keys=500,messages=4000,seed=2")
    keys = read_only(np.ascontiguousarray(stream.key_hash, np.uint64).copy())
    arrivals = read_only(arrival_times(len(keys), 20_000.0, None))
    rehearse(_node(name, keys[:512], arrivals[:512]))
    before = _signatures()
    node = _node(name, keys, arrivals)
    assert rehearse(node) > 0 and node.done and node.routed == len(keys)
    assert _signatures() == before


def test_a_rehearsal_jumps_to_a_slow_input_instead_of_stepping_through_it():
    keys = np.arange(1, 300, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    slow = arrival_times(len(keys), 2.0, None)  # two tuples a second: 150 s of input
    node = _node("kg", keys, slow)
    assert rehearse(node) < 2_000 and node.done


def _cache_files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*.nbc")}


@pytest.mark.slow
def test_after_warm_a_default_run_on_either_engine_compiles_nothing_new(tmp_path):
    # the literal check, on an empty cache of its own: warm, then a default simulator run and a default Ray run
    # (its actors inherit the cache folder) must add no compiled entry (about 4 minutes on 2 cores)
    cache = tmp_path / "numba"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    warmed = subprocess.run([sys.executable, "-m", "topo.warm"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=900)
    assert warmed.returncode == 0, warmed.stderr[-2000:]
    before = _cache_files(cache)
    assert before
    for engine in ("sim", "ray"):
        ran = subprocess.run([sys.executable, "scripts/run_topology.py", "--grouping", "cg", "--engine", engine,
                              "--out", str(tmp_path / engine), "--json", "--quiet"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
        assert ran.returncode == 0, ran.stderr[-2000:]
        summary = json.loads(ran.stdout.strip().splitlines()[-1])
        assert summary["exact"]
        assert _cache_files(cache) == before, f"{engine} compiled {sorted(_cache_files(cache) - before)}"
