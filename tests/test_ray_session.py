"""A run's fixed cost on Ray: runs of one process share one local Ray, a command line leaves no Ray process behind
when it ends without waiting for Ray's stop, the input topic serves a source that asks before the driver's put,
and the exported latency histogram counts every tuple into the right bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil

from topo.ray_engine.metrics import LatencyBuckets
from topo.results.metric_names import LATENCY_BUCKETS_MS

ROOT = Path(__file__).resolve().parents[1]

TWO_RUNS = """
import json, sys
import ray
from topo.cli.run import exit_process, main

addresses = []
for n in (1, 2):
    status = main(["--engine", "ray", "--stream", "zipf:z=1.1,keys=500,messages=3000,seed=1", "--rate", "3000",
                   "--workers", "3", "--out", f"{sys.argv[1]}/run{n}", "--no-plots", "--json", "--quiet"])
    assert status == 0, status
    addresses.append(ray.get_runtime_context().gcs_address)
print(json.dumps(addresses))
exit_process(0)
"""


def _marked(mark: str) -> list[psutil.Process]:
    """Living processes whose environment carries TOPO_TEST_MARK=`mark` (children inherit it)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TOPO_TEST_MARK") == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            pass
    return found


def test_runs_of_one_process_share_one_ray_and_its_exit_leaves_none_behind(tmp_path):
    mark = f"session-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "TOPO_TEST_MARK": mark, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", TWO_RUNS, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    assert first == second  # the second run found the first one's Ray up
    for n in (1, 2):
        assert json.loads((tmp_path / f"run{n}" / "summary.json").read_text())["exact"] is True
    deadline = time.monotonic() + 10
    while (left := _marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, [p.name() for p in left]


def test_actors_that_ask_before_the_put_get_their_share(ray_session):
    import ray

    from topo.ray_engine.topic import InputTopic

    topic = ray.remote(InputTopic).options(num_cpus=0).remote()
    try:
        early = topic.ref.remote("run-x", 1)  # the source asks first
        lengths = topic.share_lengths.remote("run-x")  # and the aggregator
        ready, _ = ray.wait([early, lengths], num_returns=2, timeout=0.5)
        assert not ready  # they wait for the put, instead of failing on a run they do not know
        shares = [ray.put(np.arange(3)), ray.put(np.arange(5))]
        ray.get(topic.put.remote("run-x", shares, [3, 5]))
        assert list(ray.get(ray.get(early)[0])) == [0, 1, 2, 3, 4]
        assert ray.get(lengths) == [3, 5]
    finally:
        ray.kill(topic)


def test_latency_buckets_count_every_tuple_as_prometheus_does():
    rng = np.random.default_rng(5)
    hist = LatencyBuckets()
    values = []
    for size in (1, 17, 1000, 0, 3):
        latency = rng.lognormal(2.0, 2.0, size)
        latency[: min(size, 2)] = LATENCY_BUCKETS_MS[3]  # a value on a bound falls in that bound's bucket (le)
        wire = np.zeros(size, [("seq", np.int64), ("arrival", np.float64)])  # a strided field, as served
        wire["arrival"][2:] = rng.uniform(0.0, 5.0, max(0, size - 2))  # (the values on a bound arrive at 0)
        hist.add(wire["arrival"], wire["arrival"] + latency, 1.0)
        values.append(wire["arrival"] + latency - wire["arrival"])
    every = np.concatenate(values)
    cumulative = hist.cumulative()
    for bound, count in zip(LATENCY_BUCKETS_MS, cumulative, strict=False):
        assert count == np.count_nonzero(every <= bound)
    assert cumulative[-1] == len(every)  # +Inf
    assert np.isclose(hist.total_ms, every.sum())
