"""One run on Ray: connect, place the actors, start them together, inject chaos, recover, collect, tear down.

Every actor may die. Workers, sources, the aggregator and the controller restart (Ray's max_restarts); the
driver notices a death when the actor's long call fails (a source's or the controller's `run`, the aggregator's
`alive`), waits until it answers again, and restarts its part: a source's `run` (it resumes after what is
committed), the controller's loop (from its last installed version), or, after the aggregator restored its last
checkpoint, a rewind of every source. Workers are recovered by their sources. The aggregator and the controller
are pinned to the driver's node, where their checkpoints are written.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import groupings
from topo.chaos import KILL_AGGREGATOR, KILL_CONTROLLER, KILL_SOURCE, KILL_WORKER, check_events, label, resolve_any
from topo.model.inputs import arrival_times
from topo.ray_engine import local
from topo.ray_engine.aggregator import Aggregator
from topo.ray_engine.checkpoint import make_directory, remove_directory
from topo.ray_engine.controller import ControlLoop
from topo.ray_engine.dilation import shrink, stretch, stretch_events
from topo.ray_engine.host import Process, SourceRef, WorkerHost, WorkerRef, host_groups
from topo.ray_engine.metrics import DriverMetrics, MetricsContext, port_free, ray_init_options
from topo.ray_engine.mortal import until_back
from topo.ray_engine.outputs import Collected, build_result
from topo.ray_engine.source import Source
from topo.ray_engine.watch import POLL_S, Watch, final_result
from topo.ray_engine.work import core_share
from topo.ray_engine.work_cgroup import apply_cgroup_quota, cgroup_quota_possible, release_cgroup_quota, worker_quota
from topo.ray_engine.worker import DEFAULT_FLUSH_S
from topo.results.metrics import RunResult
from topo.schedule import MESSAGES
from topo.spec import SpecError, TopologySpec

START_TIMEOUT_S = 60.0  # actors that cannot be placed within this fail the run instead of hanging it
START_LEAD_S = 0.2  # sources start together this long after they are told to
POLL_COUNT_S = 0.02  # while a change waits for a message count: how late after it the change may come
PLACEMENT_SHARE = 0.01  # how much of a placement resource a worker asks for (many workers fit one node)
RESTART = {"max_restarts": -1, "max_task_retries": 0}  # Ray restarts a dead actor; the driver re-issues its calls
WORK_MODES = ("sleep", "cpu")
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


def parse_chaos(chaos, spec: TopologySpec, controller: bool) -> list[tuple[str, int | None, float]]:
    """Chaos events (`topo.chaos`) checked against the run, `kill-any` drawn with the run's seed, by time."""
    events = check_events(chaos, spec.max_workers, spec.sources, controller)
    return resolve_any(events, spec.seed, spec.max_workers, spec.sources, controller)


def check_supported(spec: TopologySpec, work: str = "sleep") -> None:
    """One SpecError line for what this engine does not run (yet), before any actor starts."""
    if work not in WORK_MODES:
        raise SpecError(f"--work must be one of {', '.join(WORK_MODES)} (got {work!r})")
    port = getattr(spec, "metrics_port", None)
    joining = getattr(spec, "address", None)  # a cluster's nodes export on the port they were started with
    if port is not None and not joining and not ray.is_initialized() and not local.begun() and not port_free(port):
        raise SpecError(f"--metrics-port {port}: something already listens on 127.0.0.1:{port}")
    if getattr(spec, "cgroup_quota", False):
        if work != "cpu":
            raise SpecError("--cgroup-quota caps burnt CPU: it needs --work cpu")
        if not cgroup_quota_possible():
            raise SpecError("--cgroup-quota needs root and a writable cgroup cpu controller on this machine")
    if work == "cpu" and spec.core_share is not None:  # a share chosen from the cores always fits
        share = spec.core_share
        for caps in [spec.capacity_list, *(c.value for c in spec.capacity_schedule)]:
            for w, c in enumerate(caps):
                if c * share > 1:
                    raise SpecError(f"--work cpu: worker {w} at capacity {c:g} x --core-share {share:g} would need "
                                    "more than one core; lower --core-share")


def local_options(metrics_port: int | None) -> dict:
    """`ray.init` options of a local Ray that exports Prometheus metrics on 127.0.0.1:`metrics_port` if given."""
    return ray_init_options(metrics_port) if metrics_port is not None else {}


def check_placement(placement) -> None:
    """Every placement resource must exist somewhere in the cluster."""
    if placement is None:
        return
    offered = ray.cluster_resources()
    missing = sorted({name for name in placement if offered.get(name, 0) < PLACEMENT_SHARE})
    if missing:
        raise SpecError(f"--placement: no node of the Ray cluster offers resource {', '.join(map(repr, missing))}")


class Run:
    """The actors of one run and the driver's side of it."""

    def __init__(self, spec: TopologySpec, stream, work: str, placement, metrics: MetricsContext | None = None) -> None:
        self.spec = spec
        n, s = spec.max_workers, spec.sources
        cores = float(ray.cluster_resources().get("CPU", 1.0))  # what Ray offers: sizes core shares and processes
        self.core_share, self.core_share_from = core_share(spec, cores)
        self.actors: list = []
        self.active = spec.workers  # workers [0, active) are the topology now
        self.capped: set[int] = set()  # worker pids under a cgroup quota
        # checkpoints on the driver's node, where the actors that write them are pinned (restarts land there too)
        self.checkpoints = make_directory() if spec.checkpoint_every_s is not None else None
        here = {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                                      soft=False)}
        key_hash = np.ascontiguousarray(stream.key_hash, dtype=np.uint64)
        shares = [len(key_hash[i::s]) for i in range(s)]
        aggregator = f"aggregator-{uuid.uuid4().hex}"  # workers look it up by name, also after a restart
        self.aggregator = self._spawn(Aggregator, {"name": aggregator, **RESTART, **here}, spec.operator, n, s, shares,
                                      self.checkpoints, spec.checkpoint_every_s, spec.operator_params)
        self.workers: list[WorkerRef] = [None] * n  # type: ignore[list-item]
        delegation = groupings.make_delegation(spec.grouping, n, **spec.params)  # each worker gets a copy
        arrivals = arrival_times(len(key_hash), spec.rate, getattr(stream, "ts", None))  # at the stretched rate
        values = getattr(stream, "values", None)
        # each source's input in the object store, referenced here until the run ends (a restart reads it again)
        self.inputs = [ray.put((key_hash[i::s].copy(), None if arrivals is None else arrivals[i::s].copy(),
                                None if values is None else np.asarray(values)[i::s].copy())) for i in range(s)]
        self.control = None
        self.processes = storm_processes(spec, placement, cores)
        if self.processes is not None:
            self._storm_processes(spec, self.processes, work, metrics, delegation, aggregator)
        else:
            self._separate_processes(spec, work, placement, metrics, delegation, aggregator)
        if groupings.describe(spec.grouping)["controller"]:
            self.control = self._spawn(ControlLoop, {"max_concurrency": 2, **RESTART, **here}, spec, self.sources,
                                       self.workers, metrics, self.checkpoints)

    def _storm_processes(self, spec: TopologySpec, processes: int, work: str, metrics, delegation,
                         aggregator: str) -> None:
        """Storm's process model: `processes` processes, each hosting a contiguous block of workers and every
        `processes`-th source; a source hands frames for its own process's workers over in-process, and reaches the
        others through Ray."""
        n, s = spec.max_workers, spec.sources
        self.hosts = host_groups(n, processes)
        prefix = f"process-{uuid.uuid4().hex[:12]}"
        self.workers = [WorkerRef(None, h, w, f"{prefix}-{h}") for h, members in enumerate(self.hosts)
                        for w in members]
        count = len(self.hosts)
        self.host_sources = [list(range(p, s, count)) for p in range(count)]
        self.sources = [None] * s  # type: ignore[list-item]
        for p, members in enumerate(self.hosts):
            hosted = [(i, [self.inputs[i]]) for i in self.host_sources[p]]
            handle = self._spawn(Process, {"name": f"{prefix}-{p}", **RESTART}, members, hosted, spec, aggregator,
                                 work, self.core_share, self.workers, self.aggregator, metrics, delegation)
            for i in self.host_sources[p]:
                self.sources[i] = SourceRef(handle, p, i)

    def _separate_processes(self, spec: TopologySpec, work: str, placement, metrics, delegation,
                            aggregator: str) -> None:
        """Workers in `spec.worker_processes` processes, and every source in a process of its own."""
        n, s = spec.max_workers, spec.sources
        self.hosts = host_groups(n, spec.worker_processes or default_processes(n), placement)
        self.host_sources = [[] for _ in self.hosts]
        for h, members in enumerate(self.hosts):
            options = dict(RESTART)
            if placement is not None:
                options["resources"] = {placement[members[0]]: PLACEMENT_SHARE}
            host = self._spawn(WorkerHost, options, members, spec, aggregator, work, self.core_share, metrics,
                               delegation)
            for w in members:
                self.workers[w] = WorkerRef(host, h, w)
        self.sources = [self._spawn(Source, {"max_concurrency": 4, **RESTART}, i, spec, self.workers,
                                    self.aggregator, [self.inputs[i]], metrics) for i in range(s)]

    def _spawn(self, cls, options: dict, *args):
        """Start an actor that asks Ray for no CPU (the emulator's duty cycle governs CPU use)."""
        if cls not in _REMOTE:
            _REMOTE[cls] = ray.remote(cls)
        handle = _REMOTE[cls].options(num_cpus=0, **options).remote(*args)
        self.actors.append(handle)
        return handle

    def actor(self, action: str, target: int | None):
        """The handle a chaos event names."""
        return {KILL_WORKER: lambda: self.workers[target], KILL_SOURCE: lambda: self.sources[target],
                KILL_AGGREGATOR: lambda: self.aggregator, KILL_CONTROLLER: lambda: self.control}[action]()

    def wait_ready(self) -> None:
        """Block until every actor is up, or fail with one line when they cannot be placed in time."""
        checks = [w.hello.remote(-1, []) for w in self.workers] + [s.ready.remote() for s in self.sources]
        ready, _ = ray.wait(checks, num_returns=len(checks), timeout=START_TIMEOUT_S)
        if len(ready) < len(checks):
            raise SpecError(f"the Ray cluster could not start all {len(self.workers)} workers and "
                            f"{len(self.sources)} sources within {START_TIMEOUT_S:g} s (resources, --placement?)")
        ray.get(checks)

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
        remove_directory(self.checkpoints)


def run_ray(spec: TopologySpec, stream, *, progress: Callable[[int], None] | None = None,
            address: str | None = None, work: str = "sleep", chaos: tuple = (), placement=None,
            metrics_port: int | None = None, run_id: str | None = None) -> RunResult:
    """Run the topology as Ray actors (sources, workers, aggregator, controller) over the stream.

    address joins an existing cluster ("auto") instead of starting a local Ray; work is how a worker spends a
    tuple's service time ("sleep" or "cpu"); chaos lists kill-worker events; placement names one custom
    resource per worker to pin it to the nodes that offer it. metrics_port exports Prometheus metrics
    (`topo.results.metric_names`) on 127.0.0.1:metrics_port while the run lasts, every series labelled run=`run_id`
    (default: a random id); None records no metrics at all.
    """
    check_supported(spec, work)
    k = spec.time_scale
    events = stretch_events(parse_chaos(chaos, spec, bool(groupings.describe(spec.grouping)["controller"])), k)
    emulated, spec = spec, stretch(spec)  # the actors run the stretched spec; the outputs are in emulated time
    if placement is not None and len(placement) != spec.max_workers:
        raise SpecError(f"--placement names {len(placement)} resources for {spec.max_workers} workers")
    session = local.acquire(address, local_options(metrics_port))
    setup = time.perf_counter()
    run = None
    metrics = None
    if metrics_port is not None:
        metrics = MetricsContext(run=str(run_id or uuid.uuid4().hex[:12]), grouping=spec.grouping, time_scale=k)
    try:
        try:
            check_placement(placement)
            run = Run(spec, stream, work, placement, metrics)
            run.wait_ready()
            setup_s = time.perf_counter() - setup
            collected, loop_s = _drive(spec, run, events, progress, address, work, metrics)
        finally:
            if run is not None:
                run.teardown()
            session.release()  # Ray stops in its own thread while the outputs are computed
        clock = time.perf_counter()
        result = build_result(emulated, stream, shrink(collected, k))
        result.summary["wall_clock_s"] = {"setup": setup_s, "loop": loop_s, "metrics": time.perf_counter() - clock}
        if progress is not None:
            progress(result.summary["tuples_in"])
        return result
    finally:
        session.join()


class World:
    """The scheduled changes of a run (capacities, active workers), applied by time or by messages emitted."""

    def __init__(self, spec: TopologySpec, run: Run) -> None:
        self.run = run
        self.todo = sorted([*spec.capacity_schedule, *spec.scale_schedule], key=lambda c: (c.unit, c.at))
        self.capacity_history = [(0.0, tuple(spec.capacity_list))]
        self.active_history = [(0.0, spec.workers)]
        self.quotas: list[dict] = []  # cgroup quotas set, at the start and on every capacity change

    @property
    def counts_messages(self) -> bool:
        """True while a change waits for a message count (the driver then polls the sources' progress often)."""
        return any(c.unit == MESSAGES for c in self.todo)

    def apply_due(self, now: float, emitted: int) -> None:
        """Apply every change whose time or message count has come, in order."""
        due = [c for c in self.todo if c.at <= (emitted if c.unit == MESSAGES else now)]
        for change in due:
            self.todo.remove(change)
            if isinstance(change.value, tuple):
                for w, handle in enumerate(self.run.workers):
                    handle.set_capacity.remote(float(change.value[w]))
                self.capacity_history.append((now, tuple(float(c) for c in change.value)))
                if self.run.capped:
                    self.quotas.append({"at_s": now, "workers": self.run.apply_quotas(change.value)})
            else:
                self.run.resize(int(change.value))
                self.active_history.append((now, int(change.value)))


def _served(run: Run) -> np.ndarray | None:
    """Tuples each worker has served (this incarnation), or None if one does not answer in time."""
    try:
        return np.array([c[0] for c in ray.get([w.counters.remote() for w in run.workers], timeout=POLL_S)])
    except (RayActorError, GetTimeoutError):
        return None


def _drive(spec, run: Run, events, progress, address, work,
           metrics: MetricsContext | None = None) -> tuple[Collected, float]:
    """Start the sources together, inject chaos and scheduled changes, and recover every death, until they end;
    what the actors hold, and the seconds the run took."""
    driver_metrics = DriverMetrics(metrics) if metrics is not None else None
    quotas = run.apply_quotas(spec.capacity_list) if getattr(spec, "cgroup_quota", False) else None
    clock = time.perf_counter()
    t0 = time.time() + START_LEAD_S
    watch = Watch(run, t0)
    world = World(spec, run)
    if quotas is not None:
        world.quotas.append({"at_s": 0.0, "workers": quotas})
    done_chaos: list[dict] = []
    todo = list(events)
    while not watch.sources_done:
        poll = POLL_COUNT_S if world.counts_messages else POLL_S
        refs = watch.refs()
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=poll)
        watch.check(ready)
        now = time.time() - t0
        while todo and todo[0][2] <= now and not watch.sources_done:
            action, target, at = todo.pop(0)
            done_chaos.append({**run.kill(action, target), "at_s": at, "done_s": time.time() - t0})
        if watch.sources_done:
            break
        emitted = 0
        if progress is not None or world.counts_messages:
            emitted = _emitted(run)
        world.apply_due(now, emitted)
        if progress is not None:
            progress(emitted)
        if driver_metrics is not None and (served := _served(run)) is not None:
            driver_metrics.served(time.time(), served, world.active_history[-1][1])
    for action, target, at in todo:
        done_chaos.append({"action": action, "actor": label(action, target), "at_s": at,
                           "skipped": "the run was over"})
    sources = [watch.reports[i] for i in range(len(run.sources))]
    loop_s = time.perf_counter() - clock
    watch.finish()
    if run.control is not None:
        # a step may have pushed a version after a source finished: report what each source holds at the end
        for report, stats in zip(sources, ray.get([s.grouping_stats.remote() for s in run.sources]), strict=True):
            report["grouping_stats"] = stats
    workers = ray.get([w.report.remote() for w in run.workers])
    state, log, agg = final_result(run)
    collected = Collected(
        t0=t0, state=state, log=log, aggregator=agg, sources=sources, workers=workers, control=watch.control,
        chaos=done_chaos, failures=watch.failures, capacity_history=world.capacity_history,
        active_history=world.active_history,
        facts={"address": address or "local", "work": work, "cgroup_quotas": world.quotas,
               "core_share": run.core_share if work == "cpu" else None,
               "core_share_from": run.core_share_from if work == "cpu" else None,
               "aggregate_every_s": spec.aggregate_every_s or DEFAULT_FLUSH_S,
               "checkpoint_every_s": spec.checkpoint_every_s},
    )
    return collected, loop_s


def _emitted(run: Run) -> int:
    """Tuples the sources have emitted so far (a source restarting counts as none this time)."""
    total = 0
    for ref in [s.progress.remote() for s in run.sources]:
        try:
            total += ray.get(ref, timeout=POLL_S)
        except (RayActorError, GetTimeoutError):
            pass
    return total
