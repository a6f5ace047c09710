"""One run on Ray: connect, place the actors, start them together, inject chaos, collect, tear down."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

import groupings
from topo.metrics import RunResult
from topo.model.inputs import arrival_times
from topo.ray_engine import local
from topo.ray_engine.aggregator import Aggregator
from topo.ray_engine.controller import ControlLoop
from topo.ray_engine.host import WorkerHost, WorkerRef, host_groups
from topo.ray_engine.metrics import DriverMetrics, MetricsContext, port_free, ray_init_options
from topo.ray_engine.outputs import Collected, build_result
from topo.ray_engine.source import Source
from topo.ray_engine.worker import DEFAULT_FLUSH_S
from topo.schedule import MESSAGES
from topo.spec import SpecError, TopologySpec
from topo.work_cgroup import apply_cgroup_quota, cgroup_quota_possible, release_cgroup_quota, worker_quota

START_TIMEOUT_S = 60.0  # actors that cannot be placed within this fail the run instead of hanging it
START_LEAD_S = 0.2  # sources start together this long after they are told to
POLL_S = 0.2  # progress and chaos checks
POLL_COUNT_S = 0.02  # while a change waits for a message count: how late after it the change may come
PLACEMENT_SHARE = 0.01  # how much of a placement resource a worker asks for (many workers fit one node)
KILL_WORKER = "kill-worker"
WORK_MODES = ("sleep", "cpu")
DEFAULT_CORE_SHARE = 0.4  # share of a core a capacity-1.0 worker burns in cpu mode, when the spec sets none

_REMOTE: dict = {}  # actor classes made remote once per process


def default_processes(workers: int) -> int:
    """Worker processes when the spec names none: one, Storm's default (topology.workers); measured on 2 cores, one
    process kept the sources' loops 50% busy at the `make run` rate where two kept them 83% busy."""
    return 1


def parse_chaos(chaos, workers: int) -> list[tuple[str, int, float]]:
    """Chaos events as (action, worker, at seconds), from tuples or `kill-worker:ID@SECONDS` strings."""
    out = []
    for item in chaos:
        if isinstance(item, str):
            action, _, rest = item.partition(":")
            target, _, at = rest.partition("@")
            try:
                item = (action, int(target), float(at))
            except ValueError:
                raise SpecError(f"--chaos {item}: expected kill-worker:ID@SECONDS") from None
        action, target, at = item
        if action != KILL_WORKER or not 0 <= int(target) < workers or not float(at) >= 0:
            raise SpecError(f"--chaos {action}:{target}@{at}: expected kill-worker:ID@SECONDS with ID < {workers}")
        out.append((action, int(target), float(at)))
    return sorted(out, key=lambda e: e[2])


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
    if work == "cpu":
        share = getattr(spec, "core_share", DEFAULT_CORE_SHARE)
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
        core_share = getattr(spec, "core_share", DEFAULT_CORE_SHARE)
        self.actors: list = []
        self.capped: set[int] = set()  # worker pids under a cgroup quota
        aggregator = f"aggregator-{uuid.uuid4().hex}"  # workers look it up by name, also after a restart
        self.aggregator = self._spawn(Aggregator, {"name": aggregator}, spec.operator, n, s, spec.operator_params)
        self.workers: list[WorkerRef] = [None] * n  # type: ignore[list-item]
        self.hosts = host_groups(n, spec.worker_processes or default_processes(n), placement)
        for h, members in enumerate(self.hosts):
            options = {"max_restarts": -1, "max_task_retries": 0}
            if placement is not None:
                options["resources"] = {placement[members[0]]: PLACEMENT_SHARE}
            host = self._spawn(WorkerHost, options, members, spec, aggregator, work, core_share, metrics)
            for w in members:
                self.workers[w] = WorkerRef(host, h, w)
        key_hash = np.ascontiguousarray(stream.key_hash, dtype=np.uint64)
        arrivals = arrival_times(len(key_hash), spec.rate, getattr(stream, "ts", None))
        values = getattr(stream, "values", None)
        self.sources = [
            self._spawn(
                Source, {"max_concurrency": 4}, i, spec, self.workers, self.aggregator, key_hash[i::s].copy(),
                None if arrivals is None else arrivals[i::s].copy(),
                None if values is None else np.asarray(values)[i::s].copy(), metrics)
            for i in range(s)
        ]
        self.control = None
        if groupings.describe(spec.grouping)["controller"]:
            self.control = self._spawn(ControlLoop, {"max_concurrency": 2}, spec, self.sources, self.workers,
                                       metrics)

    def _spawn(self, cls, options: dict, *args):
        """Start an actor that asks Ray for no CPU (the emulator's duty cycle governs CPU use)."""
        if cls not in _REMOTE:
            _REMOTE[cls] = ray.remote(cls)
        handle = _REMOTE[cls].options(num_cpus=0, **options).remote(*args)
        self.actors.append(handle)
        return handle

    def wait_ready(self) -> None:
        """Block until every actor is up, or fail with one line when they cannot be placed in time."""
        checks = [w.hello.remote(-1, []) for w in self.workers] + [s.ready.remote() for s in self.sources]
        ready, _ = ray.wait(checks, num_returns=len(checks), timeout=START_TIMEOUT_S)
        if len(ready) < len(checks):
            raise SpecError(f"the Ray cluster could not start all {len(self.workers)} workers and "
                            f"{len(self.sources)} sources within {START_TIMEOUT_S:g} s (resources, --placement?)")
        ray.get(checks)

    def kill(self, worker: int) -> dict:
        """Kill a worker's process for real (SIGKILL); Ray restarts the actor."""
        handle = self.workers[worker]
        # a worker process dies whole: every worker it hosts restarts with it
        event = {"action": KILL_WORKER, "worker": worker, "process_workers": self.hosts[handle.host_index]}
        try:
            pid = ray.get(handle.pid.remote(), timeout=10.0)
            report = ray.get(handle.report.remote(), timeout=10.0)
        except (RayActorError, GetTimeoutError) as exc:
            return {**event, "error": type(exc).__name__}
        event.update(pid=pid, incarnation=report["incarnation"], node=report["node"])
        if report["node"]["ip"] == ray.util.get_node_ip_address():
            os.kill(pid, signal.SIGKILL)
            event["how"] = "SIGKILL from the driver"
        else:
            handle.kill_self.remote()
            event["how"] = "SIGKILL by the actor itself (another node)"
        return event

    def resize(self, workers: int) -> None:
        """From now on workers [0, `workers`) are the topology: the controller first (a strategy that moves keys
        off leaving workers pushes its new function), then every source, from its next batch on."""
        if self.control is not None:
            ray.get(self.control.resize.remote(workers))
        ray.get([s.resize.remote(workers) for s in self.sources] + [w.resize.remote(workers) for w in self.workers])

    def apply_quotas(self, capacities) -> list[dict]:
        """Put every worker process on this node under a kernel CPU quota of its share of a core (plus headroom for
        the actor's own threads); one row per worker saying whether it was capped and at what share."""
        share = getattr(self.spec, "core_share", DEFAULT_CORE_SHARE)
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
        """Stop every actor of the run (workers for good: no restart) and lift the quotas put on them."""
        for pid in self.capped:
            release_cgroup_quota(pid)
        for handle in self.actors:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # already gone is fine
                pass


def run_ray(spec: TopologySpec, stream, *, progress: Callable[[int], None] | None = None,
            address: str | None = None, work: str = "sleep", chaos: tuple = (), placement=None,
            metrics_port: int | None = None, run_id: str | None = None) -> RunResult:
    """Run the topology as Ray actors (sources, workers, aggregator, controller) over the stream.

    address joins an existing cluster ("auto") instead of starting a local Ray; work is how a worker spends a
    tuple's service time ("sleep" or "cpu"); chaos lists kill-worker events; placement names one custom
    resource per worker to pin it to the nodes that offer it. metrics_port exports Prometheus metrics
    (`topo.metric_names`) on 127.0.0.1:metrics_port while the run lasts, every series labelled run=`run_id`
    (default: a random id); None records no metrics at all.
    """
    check_supported(spec, work)
    events = parse_chaos(chaos, spec.max_workers)
    if placement is not None and len(placement) != spec.max_workers:
        raise SpecError(f"--placement names {len(placement)} resources for {spec.max_workers} workers")
    session = local.acquire(address, local_options(metrics_port))
    setup = time.perf_counter()
    run = None
    metrics = None
    if metrics_port is not None:
        metrics = MetricsContext(run=str(run_id or uuid.uuid4().hex[:12]), grouping=spec.grouping)
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
        result = build_result(spec, stream, collected)
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
    """Start the sources together, inject chaos and scheduled changes until they end; what the actors hold, and
    the seconds the run took."""
    driver_metrics = DriverMetrics(metrics) if metrics is not None else None
    quotas = run.apply_quotas(spec.capacity_list) if getattr(spec, "cgroup_quota", False) else None
    clock = time.perf_counter()
    t0 = time.time() + START_LEAD_S
    control_ref = run.control.run.remote(t0) if run.control is not None else None
    pending = [s.run.remote(t0) for s in run.sources]
    world = World(spec, run)
    if quotas is not None:
        world.quotas.append({"at_s": 0.0, "workers": quotas})
    done_chaos: list[dict] = []
    todo = list(events)
    while True:
        poll = POLL_COUNT_S if world.counts_messages else POLL_S
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=poll)
        now = time.time() - t0
        while todo and todo[0][2] <= now and len(ready) < len(pending):
            _, worker, at = todo.pop(0)
            done_chaos.append({**run.kill(worker), "at_s": at, "done_s": time.time() - t0})
        emitted = 0
        if progress is not None or world.counts_messages:
            emitted = int(sum(ray.get([s.progress.remote() for s in run.sources])))
        if len(ready) < len(pending):
            world.apply_due(now, emitted)
        if progress is not None:
            progress(emitted)
        if driver_metrics is not None and (served := _served(run)) is not None:
            driver_metrics.served(time.time(), served, world.active_history[-1][1])
        if len(ready) == len(pending):
            break
    for _, worker, at in todo:
        done_chaos.append({"action": KILL_WORKER, "worker": worker, "at_s": at, "skipped": "the run was over"})
    sources = ray.get(pending)
    loop_s = time.perf_counter() - clock
    control = None
    if run.control is not None:
        ray.get(run.control.stop.remote())
        control = ray.get(control_ref)
        # a step may have pushed a version after a source finished: report what each source holds at the end
        for report, stats in zip(sources, ray.get([s.grouping_stats.remote() for s in run.sources]), strict=True):
            report["grouping_stats"] = stats
    workers = ray.get([w.report.remote() for w in run.workers])
    state, log, agg = ray.get(run.aggregator.result.remote())
    collected = Collected(
        t0=t0, state=state, log=log, aggregator=agg, sources=sources, workers=workers, control=control,
        chaos=done_chaos, capacity_history=world.capacity_history, active_history=world.active_history,
        facts={"address": address or "local", "work": work, "cgroup_quotas": world.quotas,
               "aggregate_every_s": spec.aggregate_every_s or DEFAULT_FLUSH_S},
    )
    return collected, loop_s
