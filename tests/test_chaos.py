"""Any actor may die: the chaos matrix on real Ray actors. Each kind of actor (source, worker, aggregator,
controller) is killed for real (SIGKILL) early, in the middle and late in a run under kg, pkg, cg and gedik, and
every run must end exact, with every input tuple processed once, and the death and its recovery in the summary.
One run in the default suite kills every kind of actor, several times; the whole matrix is marked slow."""

from __future__ import annotations

import time

import pytest
import ray

from experiments.engines.recovery import STREAM, chaos_spec, kill_event, matrix_cells
from topo.data.streams import stream_from_spec
from topo.errors import RunFailed
from topo.ray_engine import driver, run_ray, watch
from topo.ray_engine.mortal import until_back

spec = chaos_spec  # the chaos matrix's topology (experiments/engines/recovery.py: ray-recovery records its numbers)


@pytest.fixture(scope="module")
def stream():
    return stream_from_spec(STREAM)


def cells() -> list:
    return [pytest.param(g, k, w, id=f"{g}-{k}-{w}") for g, k, w in matrix_cells()]


def exact_after(summary: dict, stream) -> dict:
    assert summary["exact"] is True
    assert summary["tuples_in"] == summary["tuples_processed"] == stream.messages
    return summary["ray"]["recovery"]


@pytest.mark.slow  # the default suite kills every kind of actor in `test_repeated_and_random_kills_in_one_run`
@pytest.mark.parametrize(("grouping", "kind", "when"), cells())
def test_any_actor_killed_leaves_the_run_exact(ray_session, stream, grouping, kind, when):
    summary = run_ray(spec(grouping), stream, chaos=(kill_event(kind, when),)).summary
    recovery = exact_after(summary, stream)
    (kill,) = summary["ray"]["chaos"]
    if "skipped" in kill:  # a late kill may come after the last tuple: nothing to recover then
        assert when == "late"
        return
    assert kill["how"].startswith("SIGKILL")
    actor = kill["actor"]
    rows = [f for f in recovery["failures"] if f["actor"] == actor]
    if kind in ("source", "controller") and not rows:
        assert when == "late"  # it had already finished its part: nothing waited on it
        return
    (row,) = rows
    assert row["how"] == "killed by --chaos" and row["recovery_s"] > 0 and row["back_s"] >= row["died_s"]
    if kind == "aggregator":
        assert recovery["checkpoints"]["aggregator_starts"] == 2 and row["restored"]["parts"] >= 1
    if kind == "source":
        assert row["resumed"]["committed"] > 0 and row["resumed"]["grouping_state"] == "rebuilt"
    assert recovery["replayed_tuples"] == sum(recovery["replayed_by"].values())


def test_repeated_and_random_kills_in_one_run(ray_session, stream):
    """Several deaths of every kind in one run, including actors drawn by --seed, and it still ends exact."""
    # the controller dies again while source 1 restarts: the source, back first, waits for the controller's version
    events = ("kill-controller@0.4", "kill-worker:0@0.6", "kill-aggregator@0.9", "kill-source:1@1.6",
              "kill-controller@1.8", "kill-any@2.4", "kill-worker:0@3.0")
    summary = run_ray(spec("gedik"), stream, chaos=events).summary
    recovery = exact_after(summary, stream)
    killed = [e for e in summary["ray"]["chaos"] if "pid" in e]
    assert len(killed) >= 4
    assert recovery["deaths"] >= 4 and recovery["recovered"] == recovery["deaths"]
    assert all(r["recovery_s"] is not None for r in recovery["failures"])
    # each kill of worker 0's process started a new incarnation (one killed before it registered goes uncounted)
    starts = 1 + sum(1 for e in killed if 0 in e.get("process_workers", ()))
    assert summary["per_worker"][0]["incarnations"] == summary["ray"]["incarnations"][0]
    assert 2 <= summary["ray"]["incarnations"][0] <= starts
    # gedik's controller, killed too, left every source on its last version (on a slow machine the restarted
    # controller may not have installed one yet: then every source still routes with the initial one)
    version = summary["controller"]["version"]
    assert all(stats["version"] == version for stats in summary["grouping_stats"])
    peaks = recovery["peak_rss_mb"]
    assert peaks["aggregator"] > 0 and all(p > 0 for p in peaks["sources"] + peaks["workers"])


def random_kills(seed: int) -> tuple[str, tuple[str, ...]]:
    """A grouping and two to seven kills of any kind at random times in the first 3.8 s, drawn from `seed`."""
    import random

    rng = random.Random(seed)
    grouping = rng.choice(["kg", "pkg", "cg", "gedik"])
    kinds = ["kill-worker:0", "kill-worker:2", "kill-source:0", "kill-source:1", "kill-aggregator", "kill-any"]
    kinds += ["kill-controller"] if grouping == "gedik" else []
    events = {f"{rng.choice(kinds)}@{rng.uniform(0.3, 3.8):.1f}" for _ in range(rng.randint(2, 7))}
    return grouping, tuple(sorted(events, key=lambda e: float(e.split("@")[1])))


@pytest.mark.slow  # ten runs; on a loaded machine they once found a source waiting forever on a restarted worker
@pytest.mark.parametrize("seed", [516, *range(500, 509)])
def test_random_sequences_of_kills_end_exact(ray_session, stream, seed):
    grouping, events = random_kills(seed)
    summary = run_ray(spec(grouping), stream, chaos=events).summary
    recovery = exact_after(summary, stream)
    assert recovery["recovered"] == recovery["deaths"]


def test_an_actor_that_does_not_come_back_is_reported_as_a_death(ray_session, stream, monkeypatch):
    """An actor gone for good (no restart) ends the run with one line naming it and when it died, not as a
    start-up problem."""
    monkeypatch.setattr(watch, "RECOVERY_TIMEOUT_S", 2.0)

    def kill_for_good(self, action, target):
        ray.kill(self.actor(action, target), no_restart=True)
        return {"action": action, "actor": "source 1"}

    monkeypatch.setattr(driver.Run, "kill", kill_for_good)
    with pytest.raises(RunFailed, match=r"^the source 1 died \d+\.\d s into the run and did not come back within 2 s$"):
        run_ray(spec("pkg"), stream, chaos=("kill-source:1@1.0",))


def test_a_run_that_hears_nothing_fails_with_one_line_instead_of_waiting_forever(ray_session, stream, monkeypatch):
    """A worker process gone for good leaves its sources holding buffers that nothing acks: the driver fails the
    run once a source has heard nothing for the stall limit, naming the source and the workers it waits on."""
    monkeypatch.setattr(watch, "STALL_S", 1.0)  # the limit is then three flush periods: 1.5 s

    def kill_for_good(self, action, target):
        ray.kill(self.workers[target].host, no_restart=True)
        return {"action": action, "actor": f"worker {target}"}

    monkeypatch.setattr(driver.Run, "kill", kill_for_good)
    clock = time.perf_counter()
    with pytest.raises(RunFailed, match=r"^the run is stuck: source \d has heard no ack or commit for \d+ s while it "
                                        r"holds \d+ buffers \(of workers [\d, ]*0[\d, ]*\); a fault of the engine"):
        run_ray(spec("pkg"), stream, chaos=("kill-worker:0@1.0",))
    assert time.perf_counter() - clock < 60  # not the sources' own 120 s wait for the worker


def test_a_batch_the_restarted_aggregator_lost_is_served_again_when_re_sent(ray_session, tmp_path):
    """A batch left with a flush that the aggregator merged and then lost by dying before its checkpoint. Its
    source re-sends it to the same worker incarnation, which must serve it again, not answer it as a duplicate
    (a run with repeated kills once waited forever for that batch to be committed)."""
    import uuid

    import numpy as np

    from topo.ray_engine.aggregator import Aggregator
    from topo.ray_engine.host import WorkerHost
    from topo.ray_engine.protocol import WIRE, pack_frame, tag
    from topo.ray_engine.source import Entry

    topology = spec("pkg", workers=1, sources=1, capacities=(1.0,), worker_processes=1)
    name = f"aggregator-{uuid.uuid4().hex}"
    aggregator = ray.remote(Aggregator).options(name=name, max_restarts=-1, num_cpus=0).remote(
        topology.operator, 1, 1, [3], str(tmp_path), 3600.0)  # a checkpoint only when asked: the merge is lost
    host = ray.remote(WorkerHost).options(num_cpus=0).remote([0], topology, name, "sleep", 1.0)
    batch = tag(0, 7)
    records = np.zeros(3, WIRE)
    records["seq"], records["key"] = np.arange(3), np.array([5, 5, 6], np.uint64)
    frame = pack_frame(0, [Entry(batch, 0, records, None)])
    ray.get(host.call.remote(0, "hello", -1, []))
    host.process.remote(frame, 0.0)
    assert [a.batch_id for a in ray.get(host.acks.remote(0))] == [batch]
    ray.get(host.call.remote(0, "flush_now", 0))  # merged, not durable
    ray.kill(aggregator, no_restart=False)
    # ray.kill returns at once: the old aggregator may still answer before it dies, so wait for the restarted one
    deadline = time.time() + 60.0
    while until_back(lambda: ray.get(aggregator.alive.remote()), None, 60.0)["starts"] < 2:
        assert time.time() < deadline
        time.sleep(0.05)
    assert ray.get(host.call.remote(0, "hello", 0, [batch]))[1] == []  # the worker does not hold it any more
    host.process.remote(frame, 0.0)
    assert [a.batch_id for a in ray.get(host.acks.remote(0))] == [batch]
    ray.get(host.call.remote(0, "flush_now", 0))
    state, log, stats = until_back(lambda: ray.get(aggregator.result.remote()), None, 60.0)
    assert sorted(log["seq"].tolist()) == [0, 1, 2]
    report = ray.get(host.call.remote(0, "report"))
    assert report["dropped"]["duplicates"] == 0


def _processes() -> dict[int, tuple[str, int]]:
    """pid -> (first word of its command line, start time in clock ticks since boot); Ray's actor processes show
    `ray::<class or name>...` there."""
    from pathlib import Path

    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                title = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                started = int((proc / "stat").read_text().rpartition(")")[2].split()[19])
            except (OSError, IndexError, ValueError):  # gone meanwhile
                continue
            found[int(proc.name)] = (title, started)
    return found


def _kill_from_outside(titles: list[str], killed: list[int]) -> None:
    """Once a source runs, SIGKILL a process of each title in turn, a second apart, as `kill -9` from a shell would;
    note their pids in `killed`."""
    import os
    import signal

    deadline = time.time() + 60.0
    while not any("Source.run" in title for title, _ in _processes().values()):
        if time.time() > deadline:
            return
        time.sleep(0.05)
    for title in titles:
        time.sleep(1.0)
        # the newest such process: one of an earlier run may still be on its way out
        candidates = [(started, pid) for pid, (name, started) in _processes().items() if name.startswith(title)]
        if candidates:
            pid = max(candidates)[1]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)


@pytest.mark.slow  # with the chaos matrix; tests/test_recovery.py checks the record's logic in the default suite
def test_deaths_from_outside_the_run_are_on_the_record(ray_session, stream):
    """A worker process and then the aggregator, killed from outside the run (not by --chaos), are recovered and
    both appear in `ray.recovery` with their times."""
    import threading

    killed: list[int] = []
    killer = threading.Thread(target=_kill_from_outside, args=(["ray::WorkerHost", "ray::Aggregator"], killed))
    killer.start()
    summary = run_ray(spec("pkg"), stream).summary
    killer.join()
    assert len(killed) == 2
    recovery = exact_after(summary, stream)
    rows = {f["actor"].split(" (")[0].split(" ")[0]: f for f in recovery["failures"]}
    assert recovery["deaths"] == 2 and set(rows) == {"workers", "aggregator"}, recovery["failures"]
    for row in recovery["failures"]:
        assert row["how"] == "died" and 0 < row["died_s"] <= row["back_s"] and row["recovery_s"] >= 0
    assert recovery["checkpoints"]["aggregator_starts"] == 2


@pytest.mark.slow  # ray-recovery's quick run: three of the matrix's cells, each with its numbers
def test_the_recovery_experiment_records_each_kill_it_recovered_from(outputs):
    numbers = outputs["ray-recovery"][1]
    assert numbers["runs"] == numbers["exact"] == 3
    for kind, row in numbers["by_kind"].items():
        assert row["recovered"] == row["runs"] == 1, kind
        assert 0 < row["recovery_min_s"] <= row["recovery_mean_s"] <= row["recovery_max_s"] < 120, kind
    cells = {c["kind"]: c for c in numbers["cells"]}
    # each kill's re-sent tuples are counted under its own cause, and nowhere else; a worker's uncommitted tuples
    # and the aggregator's acked ones since its last checkpoint (a second's worth) are never none mid-run, where a
    # restarted source may find every position it had sent committed
    for kind in ("worker", "source", "aggregator"):
        assert cells[kind]["replayed"] == cells[kind][f"replayed_{kind}"], kind
    assert cells["worker"]["replayed"] > 0 and cells["aggregator"]["replayed"] > 0


@pytest.mark.slow  # ray-overload's quick run: 8 s of input at three times what the workers serve, three deaths
def test_the_overload_run_serves_its_backlog_exactly_after_three_deaths(outputs):
    n = outputs["ray-overload"][1]
    assert n["exact"] and n["tuples_processed"] == n["messages"] == 96_000
    assert {f["actor"] for f in n["failures"]} >= {"worker 1", "source 0", "aggregator"}
    assert all(f["recovery_s"] is not None and f["recovery_s"] > 0 for f in n["failures"])
    assert n["replayed"] == sum(n["replayed_by"].values()) > 0
    # the workers serve 4,000 tuples/s: the backlog is served after the 8 s of input end
    assert n["wall_s"] > n["messages"] / n["served_tps"] > n["input_s"]
    assert {m["actor"] for m in n["memory"]} == {"aggregator", "source 0", "source 1", "workers 0,1", "workers 2,3"}
