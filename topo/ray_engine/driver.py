"""One run on Ray: connect, place the actors, start them together, inject chaos, recover, collect, tear down.

Every actor may die. Workers, sources, the aggregator and the controller restart (Ray's max_restarts); the
driver notices a death when the actor's long call fails (a source's or the controller's `run`, the aggregator's
`alive`), waits until it answers again, and restarts its part: a source's `run` (it resumes after what is
committed), the controller's loop (from its last installed version), or, after the aggregator restored its last
checkpoint, a rewind of every source. Workers are recovered by their sources. The aggregator and the controller
are pinned to the driver's node, where their checkpoints are written.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

import groupings
from topo.chaos import check_events, label, resolve_any
from topo.errors import RunFailed
from topo.ray_engine import local
from topo.ray_engine.actors import Run, check_placement
from topo.ray_engine.dilation import shrink, stretch, stretch_events
from topo.ray_engine.metrics import DriverMetrics, MetricsContext, local_options, port_free
from topo.ray_engine.mortal import until_back
from topo.ray_engine.outputs import Collected, build_result
from topo.ray_engine.watch import POLL_S, RECOVERY_TIMEOUT_S, Watch, final_result
from topo.ray_engine.work_cgroup import cgroup_quota_possible
from topo.ray_engine.worker import DEFAULT_FLUSH_S
from topo.results.metrics import RunResult
from topo.schedule import MESSAGES
from topo.spec import SpecError, TopologySpec

START_LEAD_S = 0.05  # sources start together this long after they are told to, plus START_LEAD_PER_SOURCE_S each
START_LEAD_PER_SOURCE_S = 0.002  # the driver's Ray call to start one source takes about 1 ms here
POLL_COUNT_S = 0.02  # while a change waits for a message count: how late after it the change may come
WORK_MODES = ("sleep", "cpu")


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


def run_ray(spec: TopologySpec, stream, *, progress: Callable[[int], None] | None = None,
            address: str | None = None, work: str = "sleep", chaos: tuple = (), placement=None,
            metrics_port: int | None = None, run_id: str | None = None) -> RunResult:
    """Run the topology as Ray actors (sources, workers, aggregator, controller) over the stream (or a call that
    loads it: it runs while the actors start).

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
            run = Run(spec, work, placement, metrics)
            stream = run.feed(stream)  # loaded now if it is still to load: the actors start meanwhile
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
    t0 = time.time() + START_LEAD_S + START_LEAD_PER_SOURCE_S * len(run.sources)
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
        watch.check_stalls(spec.aggregate_every_s or DEFAULT_FLUSH_S)
        if driver_metrics is not None and (served := _served(run)) is not None:
            driver_metrics.served(time.time(), served, world.active_history[-1][1])
    for action, target, at in todo:
        done_chaos.append({"action": action, "actor": label(action, target), "at_s": at,
                           "skipped": "the run was over"})
    sources = [watch.reports[i] for i in range(len(run.sources))]
    loop_s = time.perf_counter() - clock
    watch.settle()
    watch.finish()
    if run.control is not None:
        # a step may have pushed a version after a source finished: report what each source holds at the end
        for report, stats in zip(sources, _answers([s.grouping_stats for s in run.sources]), strict=True):
            report["grouping_stats"] = stats
    workers = _answers([w.report for w in run.workers])  # a worker process killed late may be restarting still
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


def _answers(methods: list) -> list:
    """Each actor method's answer, asked again while one of the actors is down (Ray restarting it)."""
    return until_back(lambda: ray.get([m.remote() for m in methods], timeout=RECOVERY_TIMEOUT_S),
                      lambda: RunFailed(f"an actor did not answer its report within {RECOVERY_TIMEOUT_S:g} s"),
                      RECOVERY_TIMEOUT_S, (RayActorError, GetTimeoutError))


def _emitted(run: Run) -> int:
    """Tuples the sources have emitted so far (a source restarting counts as none this time)."""
    total = 0
    for ref in [s.progress.remote() for s in run.sources]:
        try:
            total += ray.get(ref, timeout=POLL_S)
        except (RayActorError, GetTimeoutError):
            pass
    return total
