"""The topology to run: one stream edge, sources -> workers, and how it is driven.

Both engines (the simulator and the Ray actors) take a `TopologySpec`; the command line builds one.
Units: milliseconds for costs and delays, seconds for durations, tuples per second for rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from topo.chaos import check_events
from topo.errors import SpecError  # raised here, and imported from here by most callers

DEFAULT_STREAM = "zipf:z=1.2,keys=100000,messages=1000000,seed=7"


# median time from a Ray source's send to the buffer's place in its worker's queue, beyond --net-delay-ms, on a
# 2-core machine at `make run`'s rate (summary "ray.transit_ms"); the simulator's default transit on the CLI
RAY_TRANSIT_MS = 2.7
# the command line's output buffers: capacity in tuples and flush interval (ms); sized so that the Ray engine
# carries Fig. 8's 17,600 tuples/s here with headroom, and a lightly loaded topology keeps p50 below 20 ms
CLI_BATCH_SIZE = 1000
CLI_LINGER_MS = 20.0
FLUSH_PHASES = ("aligned", "spread")


@dataclass(frozen=True)
class TopologySpec:
    grouping: str = "cg"
    engine: str = "sim"
    workers: int = 4
    sources: int = 2
    capacities: tuple[float, ...] | None = None  # relative capacity of each worker; None = all 1.0
    stream: str = DEFAULT_STREAM
    operator: str = "wordcount"
    cost_ms: float = 0.1  # service time of one tuple on a capacity-1.0 worker
    rate: float | None = None  # total input rate over all sources; None = as fast as acks allow
    duration: float | None = None  # stop emitting after this many (simulated) seconds; None = whole stream
    seed: int = 0
    params: dict = field(default_factory=dict)  # grouping parameters from --set
    operator_params: dict = field(default_factory=dict)  # operator parameters from --operator-set
    batch_size: int = 100  # tuples a source routes and sends together (micro-batch)
    linger_ms: float = 5.0  # a partly filled batch is sent at most this long after its first tuple
    # where each source's flush ticks fall: "aligned" (all at k x linger, Storm's one flush timer per process) or
    # "spread" (source i at i / sources of a linger later, as Flink's flusher thread per task keeps its own phase)
    flush_phase: str = "aligned"
    max_pending: int = 16  # batches in flight per source before it waits for acks (backpressure)
    # tuples a source may have routed and not yet acked, over all its channels (Storm's max spout pending); None = no
    # such limit (the credits alone bound what is in flight)
    max_spout_pending: int | None = None
    net_delay_ms: float = 0.0  # one-way network delay, source->worker and ack worker->source
    # simulator: the Ray engine's own time to carry a buffer or an ack between processes, added to each trip
    # (RAY_TRANSIT_MS is what Ray takes here; 0 = an ideal transport, as in the papers' models)
    transit_ms: float = 0.0
    sample_interval_s: float | None = None  # time-series resolution; None = about 200 samples per run
    capacity_schedule: tuple = ()  # topo.schedule.Change items: capacity vectors from a message count or time on
    scale_schedule: tuple = ()  # topo.schedule.Change items: number of active workers from then on
    migration_ms_per_key: float = 0.01  # pause of both workers per key whose state moves (repartitioning)
    aggregate_every_s: float | None = None  # period of partial-state flushes to the aggregator; None = at the end
    work: str = "sleep"  # ray engine: how a worker spends a tuple's service time, "sleep" or "cpu" (real, capped)
    # ray engine, --work cpu: share of a core a capacity-1.0 worker may use; None = chosen from the cores Ray offers
    # so that the workers fit beside the sources and Ray (topo.ray_engine.driver.core_share)
    core_share: float | None = None
    cgroup_quota: bool = False  # ray engine, --work cpu: also cap each worker process with a kernel CPU quota
    chaos: tuple = ()  # ray engine: (action, target, at_seconds) events, e.g. ("kill-worker", 2, 5.0) (topo.chaos)
    # ray engine: the aggregator's merged state and committed batches become durable this often (a checkpoint);
    # a batch counts as committed only once durable; 0 = with every flush; None = no checkpoints (an aggregator
    # that dies loses the run)
    checkpoint_every_s: float | None = 1.0
    address: str | None = None  # ray engine: join this Ray cluster ("auto") instead of starting a local one
    placement: tuple[str, ...] | None = None  # ray engine: a custom resource name per worker, to pin it to nodes
    worker_processes: int | None = None  # ray engine: processes hosting the workers (Storm's workers); None = cores
    # ray engine: Storm's process model (topology.workers): sources and workers together in this many processes;
    # None = half the cores Ray offers, or, with `worker_processes` or `placement`, every source in a process of its
    # own and the workers in `worker_processes` processes
    processes: int | None = None
    # ray engine: record Prometheus metrics, exported on 127.0.0.1:metrics_port by the local Ray this run starts
    # (with `address`, by every node on the port it was started with); None = no metrics
    metrics_port: int | None = None
    # ray engine: time dilation K; the emulated cluster runs K times slower than the wall clock (every duration of
    # the spec stretched by K, every reported time divided by K); the simulator divides its transit by K
    time_scale: float = 1.0
    # flink engine: shuffle grouping by Flink's own rebalance() (round robin from a random channel per source)
    # instead of the emulator's sg choices
    flink_rebalance: bool = False

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise SpecError(f"--workers must be at least 1 (got {self.workers})")
        if self.sources < 1:
            raise SpecError(f"--sources must be at least 1 (got {self.sources})")
        if self.capacities is not None:
            if len(self.capacities) not in (self.workers, self.max_workers):
                also = f" (or {self.max_workers}, the most workers --scale-schedule asks for)" * (
                    self.max_workers != self.workers
                )
                raise SpecError(
                    f"--capacities lists {len(self.capacities)} values but --workers is {self.workers}{also}"
                )
            if any(not (0 < c < math.inf) for c in self.capacities):
                raise SpecError("--capacities must all be positive finite numbers")
        if not (0 <= self.cost_ms < math.inf):
            raise SpecError(f"--cost-ms must be >= 0 and finite (got {self.cost_ms})")
        if self.rate is not None and not (0 < self.rate < math.inf):
            raise SpecError(f"--rate must be positive and finite, or 'max' (got {self.rate})")
        if self.duration is not None and not (self.duration > 0):
            raise SpecError(f"--duration must be positive (got {self.duration})")
        if self.batch_size < 1:
            raise SpecError(f"--batch-size must be at least 1 (got {self.batch_size})")
        if self.flink_rebalance and (self.engine != "flink" or self.grouping != "sg"):
            raise SpecError("--flink-rebalance runs Flink's own rebalance() for sg: it needs --grouping sg and "
                            "--engine flink")
        if self.flush_phase not in FLUSH_PHASES:
            raise SpecError(f"--flush-phase must be one of {', '.join(FLUSH_PHASES)} (got {self.flush_phase!r})")
        if self.max_pending < 1:
            raise SpecError(f"--max-pending must be at least 1 (got {self.max_pending})")
        if self.max_spout_pending is not None and self.max_spout_pending < 1:
            raise SpecError(f"--max-spout-pending must be at least 1 (got {self.max_spout_pending})")
        if not all(0 <= ms < math.inf for ms in (self.linger_ms, self.net_delay_ms, self.transit_ms)):
            raise SpecError("--linger-ms, --net-delay-ms and --transit-ms must be >= 0 and finite")
        if self.engine == "ray" and self.transit_ms:
            raise SpecError("--transit-ms models Ray's own transit in the simulator; on --engine ray it is real")
        if not (0 <= self.migration_ms_per_key < math.inf):
            raise SpecError(f"--migration-ms-per-key must be >= 0 and finite (got {self.migration_ms_per_key})")
        if self.sample_interval_s is not None and not (0 < self.sample_interval_s < math.inf):
            raise SpecError(f"--sample-interval must be positive and finite (got {self.sample_interval_s})")
        if self.aggregate_every_s is not None and not (self.aggregate_every_s > 0):
            raise SpecError(f"--aggregate-every must be positive (got {self.aggregate_every_s})")
        if self.work not in ("sleep", "cpu"):
            raise SpecError(f"--work must be sleep or cpu (got {self.work!r})")
        if self.core_share is not None and not 0 < self.core_share <= 1:
            raise SpecError(f"--core-share must be in (0, 1] (got {self.core_share})")
        if self.placement is not None and len(self.placement) != self.max_workers:
            raise SpecError(f"--placement names {len(self.placement)} resources for {self.max_workers} workers")
        check_events(self.chaos, self.max_workers, self.sources)
        if self.checkpoint_every_s is not None and not self.checkpoint_every_s >= 0:
            raise SpecError(f"--checkpoint-every must be 0 or more seconds (got {self.checkpoint_every_s})")
        if isinstance(self.time_scale, bool) or not isinstance(self.time_scale, (int, float)) or not (
            1 <= self.time_scale < math.inf
        ):
            raise SpecError(f"--time-scale must be a number >= 1, or auto (got {self.time_scale!r})")
        if self.worker_processes is not None and self.worker_processes < 1:
            raise SpecError(f"--worker-processes must be at least 1 (got {self.worker_processes})")
        if self.processes is not None:
            if self.processes < 1:
                raise SpecError(f"--processes must be at least 1 (got {self.processes})")
            if self.worker_processes is not None or self.placement is not None:
                raise SpecError("--processes places sources and workers together: it takes neither "
                                "--worker-processes nor --placement")
        if self.engine != "ray" and (self.chaos or self.address or self.placement or self.worker_processes
                                     or self.processes or self.cgroup_quota):
            raise SpecError("--chaos, --address, --placement, --worker-processes, --processes and --cgroup-quota need "
                            "--engine ray")
        if self.metrics_port is not None:
            if self.engine != "ray":
                raise SpecError("--metrics-port needs --engine ray")
            if isinstance(self.metrics_port, bool) or not isinstance(self.metrics_port, int) or not (
                1 <= self.metrics_port <= 65535
            ):
                raise SpecError(f"--metrics-port must be a TCP port in 1..65535 (got {self.metrics_port!r})")
        for change in self.capacity_schedule:
            if len(change.value) != self.max_workers:
                raise SpecError(
                    f"--capacity-schedule: a change lists {len(change.value)} capacities for {self.max_workers} workers"
                )

    @property
    def max_workers(self) -> int:
        """The most workers active at any time: the pool the engine sets up."""
        return max([self.workers, *(int(c.value) for c in self.scale_schedule)])

    @property
    def capacity_list(self) -> list[float]:
        """Capacity of every worker of the pool (max_workers of them), 1.0 where none was given."""
        given = list(self.capacities) if self.capacities is not None else []
        return given + [1.0] * (self.max_workers - len(given))

    def with_(self, **changes) -> TopologySpec:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)
