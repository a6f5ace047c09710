"""The actors of one run on Ray: where they go (Storm's process model, or the separate layout), how they start,
how the driver kills and resizes them, and how they stop.

Every actor is named after the run, and every restartable actor's constructor takes names, never object refs or
actor handles: Ray re-runs a constructor with the same arguments when the actor restarts, and warns on every run
that refs among them may be gone by then. The sources read their input from the driver's topic (`topic.InputTopic`).
"""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import groupings
from topo.chaos import KILL_AGGREGATOR, KILL_CONTROLLER, KILL_SOURCE, KILL_WORKER, label
from topo.model.inputs import arrival_times
from topo.ray_engine.aggregator import Aggregator
from topo.ray_engine.checkpoint import make_directory, remove_directory
from topo.ray_engine.controller import ControlLoop
from topo.ray_engine.host import Process, SourceRef, WorkerHost, WorkerRef, host_groups
from topo.ray_engine.metrics import MetricsContext
from topo.ray_engine.mortal import Named, until_back
from topo.ray_engine.source import Source
from topo.ray_engine.topic import open_topic
from topo.ray_engine.work import core_share
from topo.ray_engine.work_cgroup import apply_cgroup_quota, release_cgroup_quota, worker_quota
from topo.spec import SpecError, TopologySpec

START_TIMEOUT_S = 60.0  # actors that cannot be placed within this fail the run instead of hanging it
PLACEMENT_SHARE = 0.01  # how much of a placement resource a worker asks for (many workers fit one node)
RESTART = {"max_restarts": -1, "max_task_retries": 0}  # Ray restarts a dead actor; the driver re-issues its calls
_REMOTE: dict = {}  # actor classes made remote once per process


def default_processes(workers: int) -> int:
    """Worker processes of the separate layout when the spec names none: one, Storm's default (topology.workers);
    measured on 2 cores, one process kept the sources' loops 50% busy at the `make run` rate where two kept them 83%
    busy."""
    return 1


def storm_processes(spec: TopologySpec, placement, cores: float) -> int | None:
    """How many processes host sources and workers together (Storm's model), or None for the separate layout
    (each source an actor of its own, workers in `--worker-processes`), which `--worker-processes` and
    `--placement` ask for. By default half the cores Ray offers, at least one: the other half is left to Ray's own
    processes, the driver and the aggregator. Measured on 2 cores at the `make run` rate: one process had a p50 of
    20.7 ms and a transit p99 of 5 ms where two had 28.4 ms and 37 ms, and the separate layout 34.4 ms and 66 ms."""
    if spec.processes is not None:
        return spec.processes
    if spec.worker_processes is not None or placement is not None:
        return None
    return max(1, int(cores) // 2)


def spread_nodes() -> list[str]:
    """The alive nodes Storm's processes are dealt out over, one after another: the driver's node first, then the
    others by id."""
    here = ray.get_runtime_context().get_node_id()
    alive = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeID"] != here)
    return [here, *alive]


def reads_acks(spec: TopologySpec) -> bool:
    """Whether the run's grouping reads what acks carry (its feedback): else, and with no delegation and no
    metrics, a worker measures none of it."""
    return bool(getattr(groupings.make(spec.grouping, workers=spec.workers, seed=spec.seed, **spec.params),
                        "takes_feedback", True))


def check_placement(placement) -> None:
    """Every placement resource must exist somewhere in the cluster."""
    if placement is None:
        return
    offered = ray.cluster_resources()
    missing = sorted({name for name in placement if offered.get(name, 0) < PLACEMENT_SHARE})
    if missing:
        raise SpecError(f"--placement: no node of the Ray cluster offers resource {', '.join(map(repr, missing))}")


class Run:
    """The actors of one run and the driver's side of it. The actors start first (`Run(...)`), the stream goes to
    them while they start (`feed`): a process's start, about 0.8 s here, overlaps the stream's load."""

    def __init__(self, spec: TopologySpec, work: str, placement, metrics: MetricsContext | None = None) -> None:
        self.spec = spec
        n = spec.max_workers
        cores = float(ray.cluster_resources().get("CPU", 1.0))  # what Ray offers: sizes core shares and processes
        self.core_share, self.core_share_from = core_share(spec, cores)
        self.actors: list = []
        self.active = spec.workers  # workers [0, active) are the topology now
        self.capped: set[int] = set()  # worker pids under a cgroup quota
        # checkpoints on the driver's node, where the actors that write them are pinned (restarts land there too)
        self.checkpoints = make_directory() if spec.checkpoint_every_s is not None else None
        here = {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                                      soft=False)}
        self.prefix = prefix = f"run-{uuid.uuid4().hex[:12]}"  # every actor's name starts with it
        # the driver's input topic, which outlives the run; every actor that reads its input waits there for `feed`
        self.topic = open_topic()
        self.put = None
        aggregator = f"{prefix}-aggregator"  # workers and sources look it up by name, also after a restart
        self.aggregator = Named(aggregator, self._spawn(Aggregator, {"name": aggregator, **RESTART, **here},
                                                        spec.operator, n, spec.sources, prefix, self.checkpoints,
                                                        spec.checkpoint_every_s, spec.operator_params))
        self.workers: list[WorkerRef] = [None] * n  # type: ignore[list-item]
        delegation = groupings.make_delegation(spec.grouping, n, **spec.params)  # each worker gets a copy
        reads = reads_acks(spec)
        self.control = None
        self.processes = storm_processes(spec, placement, cores)
        self.process_handles: list = []  # Storm's model: each process's actor, by index
        if self.processes is not None:
            self._storm_processes(spec, self.processes, work, metrics, delegation, reads)
        else:
            self._separate_processes(spec, work, placement, metrics, delegation, reads)
        if groupings.describe(spec.grouping)["controller"]:
            options = {"name": f"{prefix}-control", "max_concurrency": 2, **RESTART, **here}
            self.control = self._spawn(ControlLoop, options, spec, self.sources, self.workers, metrics,
                                       self.checkpoints)

    def feed(self, stream) -> Any:
        """Put the stream's shares on the run's topic, where the actors wait for them; `stream` may be a call that
        loads it (it runs now, while the actors start). The stream, loaded."""
        if callable(stream):
            stream = stream()
        s = self.spec.sources
        key_hash = np.ascontiguousarray(stream.key_hash, dtype=np.uint64)
        arrivals = arrival_times(len(key_hash), self.spec.rate, getattr(stream, "ts", None))  # at the stretched rate
        values = getattr(stream, "values", None)
        # each source's input in the object store, referenced here until the run ends (a restart reads it again)
        self.inputs = [ray.put((key_hash[i::s].copy(), None if arrivals is None else arrivals[i::s].copy(),
                                None if values is None else np.asarray(values)[i::s].copy())) for i in range(s)]
        self.put = self.topic.put.remote(self.prefix, self.inputs, [len(key_hash[i::s]) for i in range(s)])
        return stream

    def _storm_processes(self, spec: TopologySpec, processes: int, work: str, metrics, delegation,
                         reads: bool) -> None:
        """Storm's process model: `processes` processes, each hosting a contiguous block of workers and every
        `processes`-th source; a source hands frames for its own process's workers over in-process, and reaches the
        others through Ray."""
        n, s = spec.max_workers, spec.sources
        self.hosts = host_groups(n, processes)
        prefix = f"{self.prefix}-process"
        self.workers = [WorkerRef(None, h, w, f"{prefix}-{h}") for h, members in enumerate(self.hosts)
                        for w in members]
        count = len(self.hosts)
        self.host_sources = [list(range(p, s, count)) for p in range(count)]
        self.sources = [None] * s  # type: ignore[list-item]
        nodes = spread_nodes()
        for p, members in enumerate(self.hosts):
            options = {"name": f"{prefix}-{p}", **RESTART}
            if len(nodes) > 1:  # as Storm's even scheduler deals a topology's processes out over the supervisors
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(nodes[p % len(nodes)], soft=False)
            handle = self._spawn(Process, options, members, self.host_sources[p], spec,
                                 self.aggregator.name, self.prefix, work, self.core_share, self.workers, metrics,
                                 delegation, reads)
            self.process_handles.append(handle)
            for i in self.host_sources[p]:
                self.sources[i] = SourceRef(handle, p, i, f"{prefix}-{p}")

    def _separate_processes(self, spec: TopologySpec, work: str, placement, metrics, delegation,
                            reads: bool) -> None:
        """Workers in `spec.worker_processes` processes, and every source in a process of its own."""
        n, s = spec.max_workers, spec.sources
        self.hosts = host_groups(n, spec.worker_processes or default_processes(n), placement)
        self.host_sources = [[] for _ in self.hosts]
        for h, members in enumerate(self.hosts):
            options = {"name": f"{self.prefix}-host-{h}", **RESTART}
            if placement is not None:
                options["resources"] = {placement[members[0]]: PLACEMENT_SHARE}
            host = self._spawn(WorkerHost, options, members, spec, self.aggregator.name, work, self.core_share,
                               metrics, delegation, reads)
            for w in members:
                self.workers[w] = WorkerRef(host, h, w, options["name"])
        self.sources = []
        for i in range(s):
            name = f"{self.prefix}-source-{i}"
            handle = self._spawn(Source, {"name": name, "max_concurrency": 4, **RESTART}, i, spec, self.workers,
                                 self.aggregator, self.prefix, metrics)
            self.sources.append(Named(name, handle))

    def _spawn(self, cls, options: dict, *args):
        """Start an actor that asks Ray for no CPU (the emulator's duty cycle governs CPU use)."""
        if cls not in _REMOTE:
            _REMOTE[cls] = ray.remote(cls)
        handle = _REMOTE[cls].options(num_cpus=0, **options).remote(*args)
        self.actors.append(handle)
        return handle

    def actor(self, action: str, target: int | None):
        """The handle a chaos event names (an actor's own handle where it has one, as `ray.kill` needs)."""
        found = {KILL_WORKER: lambda: self.workers[target], KILL_SOURCE: lambda: self.sources[target],
                 KILL_AGGREGATOR: lambda: self.aggregator, KILL_CONTROLLER: lambda: self.control}[action]()
        return found.handle if isinstance(found, Named) else found

    def wait_ready(self) -> None:
        """Block until every actor is up, or fail with one line when they cannot be placed in time."""
        checks = [w.hello.remote(-1, []) for w in self.workers] + [s.ready.remote() for s in self.sources]
        ray.get(self.put, timeout=START_TIMEOUT_S)  # (`feed` came first)
        ready, _ = ray.wait(checks, num_returns=len(checks), timeout=START_TIMEOUT_S)
        if len(ready) < len(checks):
            raise SpecError(f"the Ray cluster could not start all {len(self.workers)} workers and "
                            f"{len(self.sources)} sources within {START_TIMEOUT_S:g} s (resources, --placement?)")
        ray.get(checks)
        if len(self.process_handles) > 1:  # Storm's processes connect to their peers past Ray
            addresses = dict(enumerate(ray.get([p.wire_address.remote() for p in self.process_handles])))
            ray.get([p.connect_wires.remote(addresses) for p in self.process_handles])

    def kill(self, action: str, target: int | None) -> dict:
        """Kill an actor's process for real (SIGKILL); Ray restarts it."""
        event = {"action": action, "actor": label(action, target)}
        if action == KILL_WORKER:  # a worker process dies whole: every worker it hosts restarts with it
            event["process_workers"] = self.hosts[self.workers[target].host_index]
        if action in (KILL_WORKER, KILL_SOURCE) and self.processes is not None:
            # in Storm's model a process hosts sources and workers: all of them die with it
            process = (self.workers[target] if action == KILL_WORKER else self.sources[target]).host_index
            event.update(process=process, process_workers=self.hosts[process],
                         process_sources=self.host_sources[process])
        handle = self.actor(action, target)
        try:
            # an actor restarting (or too busy to answer at once) is asked again for a while
            pid, ip = until_back(lambda: ray.get(handle.where.remote(), timeout=5.0), None, 10.0,
                                 (RayActorError, GetTimeoutError))
        except (RayActorError, GetTimeoutError) as exc:
            return {**event, "error": type(exc).__name__}
        event.update(pid=pid, ip=ip)
        if ip == ray.util.get_node_ip_address():
            os.kill(pid, signal.SIGKILL)
            event["how"] = "SIGKILL from the driver"
        else:
            handle.kill_self.remote()
            event["how"] = "SIGKILL by the actor itself (another node)"
        return event

    def resize(self, workers: int) -> None:
        """From now on workers [0, `workers`) are the topology: the controller first (a strategy that moves keys
        off leaving workers pushes its new function), then every source, from its next batch on."""
        self.active = workers
        if self.control is not None:
            ray.get(self.control.resize.remote(workers))
        for ref in [s.resize.remote(workers) for s in self.sources] + [w.resize.remote(workers) for w in self.workers]:
            try:
                ray.get(ref)
            except RayActorError:
                pass  # restarting: a source is resized again when it resumes, a worker is told by its sources

    def apply_quotas(self, capacities) -> list[dict]:
        """Put every worker process on this node under a kernel CPU quota of its share of a core (plus headroom for
        the actor's own threads); one row per worker saying whether it was capped and at what share."""
        share = self.core_share
        here = ray.util.get_node_ip_address()
        rows = []
        for members in self.hosts:
            report = ray.get(self.workers[members[0]].report.remote(), timeout=10.0)
            # one quota per process: the shares of every worker it hosts
            quota = worker_quota(sum(float(capacities[w]) for w in members) * share)
            applied = report["node"]["ip"] == here and apply_cgroup_quota(report["pid"], quota)
            if applied:
                self.capped.add(report["pid"])
            rows += [{"worker": w, "pid": report["pid"], "cores": quota, "applied": bool(applied)} for w in members]
        return rows

    def teardown(self) -> None:
        """Stop every actor of the run for good (no restart), lift the quotas put on them, drop the checkpoints."""
        for pid in self.capped:
            release_cgroup_quota(pid)
        for handle in self.actors:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # already gone is fine
                pass
        if self.topic is not None:
            try:
                self.topic.drop.remote(self.prefix)
            except Exception:  # Ray already gone: the topic went with it
                pass
        remove_directory(self.checkpoints)
