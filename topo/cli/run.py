"""`run_topology.py`: parse the command line, check everything, run one topology, write its run directory.

Every user mistake ends in one line on stderr and exit status 2, and is found before any work starts,
so a bad input never leaves a partial run directory behind.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from topo.cli.values import (  # noqa: F401 (UsageError and DEFAULT_LOAD: the commands' shared names)
    DEFAULT_LOAD,
    UsageError,
    parse_capacities,
    parse_chaos,
    parse_params,
    parse_rate,
    seed_value,
    time_scale_value,
)
from topo.errors import RunFailed
from topo.ray_engine.work import CPU_BUDGET, MAX_CORE_SHARE
from topo.ray_engine.work_cgroup import QUOTA_BASE_CORES, QUOTA_HEADROOM
from topo.spec import FLUSH_PHASES, RAY_TRANSIT_MS, SpecError, TopologySpec
from topo.styles import HELP as STYLE_HELP
from topo.styles import STYLES, default_style, setting

ENGINES = ("sim", "ray", "flink")
EXIT_USAGE = 2
EXIT_FAILED = 1  # a run that started and could not finish (not the user's mistake)
# a newcomer's first run: Fig. 8 of Consistent Grouping, ten workers of which three are 5x faster, at a load they
# can sustain (80% of what they serve together), 50k messages of a skewed stream: about 3 s of input
DEFAULT_WORKERS = 10
DEFAULT_CAPACITIES = "5,5,5,1,1,1,1,1,1,1"
FIRST_RUN_STREAM = "zipf:z=1.0224,keys=100000,messages=50000,seed=7"


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse prints usage plus a message; the contract is one clear line
        raise UsageError(message)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults after every option that has one and does not describe it in words; the groupings list as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, []) or "default:" in text or "%(default)" in text:
            return text
        return super()._get_help_string(action)


def groupings_epilog() -> str:
    """One paragraph per grouping: what it does and the --set parameters it takes, with defaults."""
    import groupings

    lines = ["groupings and their --set parameters (defaults in brackets; n = number of workers):"]
    for name in groupings.names():
        info = groupings.describe(name)
        lines.append(f"  {name:6s} {info['doc']}")
        for par in info["params"]:
            choices = f" ({'|'.join(par['choices'])})" if par.get("choices") else ""
            lines.append(f"           {par['name']}={par['default']}{choices}: {par['help']}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The option set of docs/design.md, each documented with its unit and default."""
    import groupings

    p = Parser(
        prog="run_topology.py",
        description="Run one stream topology (sources -> workers) with a chosen grouping and print its summary.",
        formatter_class=HelpFormatter,
        epilog=groupings_epilog(),
    )
    p.add_argument("--grouping", default="cg", metavar="NAME",
                   help=f"partitioning strategy, one of: {', '.join(groupings.names())}")
    p.add_argument("--engine", default="ray", choices=ENGINES,
                   help="ray = sources and workers as Ray actors (real time); sim = discrete-event simulator (fast); "
                        "flink = a real Apache Flink 2.3 job on a local MiniCluster (real time; `make flink` installs "
                        "it), which takes Flink's defaults (--style flink) and runs the groupings without feedback and "
                        "flink_adaptive")
    add_topology_options(p)
    add_ray_options(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="run directory to write; default: runs/<grouping>-<engine>-<UTC time>")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it already holds a run")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots in the run directory")
    p.add_argument("--json", action="store_true",
                   help="print the run summary as one JSON line (the last line of stdout) instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def add_topology_options(p: argparse.ArgumentParser) -> None:
    """The options that describe a topology and its input, the same for every command that runs one."""
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS, metavar="N", help="number of downstream workers")
    p.add_argument("--sources", type=int, default=2, metavar="S",
                   help="number of upstream sources; the input is shuffled among them")
    p.add_argument("--capacities", default=None, metavar="C1,C2,...",
                   help="relative capacity of each worker (one value per worker; 1.0 = nominal speed); "
                        f"default: {DEFAULT_CAPACITIES} with the default {DEFAULT_WORKERS} workers (three 5x faster, "
                        "Fig. 8 of Consistent Grouping), all 1.0 with any other --workers")
    p.add_argument("--stream", default=FIRST_RUN_STREAM, metavar="SPEC",
                   help="a dataset directory, or inline 'zipf:z=..,keys=..,messages=..,seed=..' or "
                        "'drift:z=..,keys=..,messages=..,shift_every=..,seed=..' (the hot set moves every shift_every "
                        "messages) or 'zf:z=..,keys=..,messages=..,block=..,hot_after=..,seed=..' (FISH's ZF: a fresh "
                        "ranking every block messages, moved once more after the share hot_after of each block)")
    p.add_argument("--operator", default="wordcount", metavar="NAME",
                   help="what each worker computes: wordcount, naivebayes (class = the value column, or key hash mod "
                        "classes) or topk (mergeable SpaceSaving summaries)")
    p.add_argument("--operator-set", action="append", default=[], metavar="KEY=VALUE", dest="operator_params",
                   help="an operator parameter, e.g. k=5 or counters=10000 (topk), classes=3 (naivebayes)")
    p.add_argument("--cost-ms", type=float, default=1.0, metavar="MS",
                   help="processing time of one tuple on a capacity-1.0 worker, in milliseconds")
    p.add_argument("--rate", default=None, metavar="TPS",
                   help="total input rate in tuples/s over all sources, or 'max': as fast as the topology takes "
                        f"them (saturating, bounded by --max-pending); default: {DEFAULT_LOAD * 100:.0f}%% of what the "
                        "workers serve together, sum(capacities) / cost-ms (max when --cost-ms is 0)")
    p.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                   help="stop emitting after this many seconds of (simulated) time; default: the whole stream")
    p.add_argument("--seed", type=seed_value, default=0, metavar="S",
                   help="seed of every random choice in the run, an integer >= 0")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="params",
                   help="a grouping parameter, e.g. eps=0.01 or theta=0.02; repeat for several")
    p.add_argument("--style", default=None, choices=tuple(STYLES), metavar="NAME",
                   help="whose defaults --batch-size, --linger-ms, --max-pending, --flush-phase and --transit-ms take "
                        "when not given: " + "; ".join(f"{k}: {v}" for k, v in STYLE_HELP.items())
                        + "; default: flink with --engine flink, emulator otherwise")
    p.add_argument("--batch-size", type=int, default=None, metavar="TUPLES",
                   help="capacity of a source's output buffer to one worker: a full buffer is sent at once (Flink's "
                        "network buffer, Storm 2's producer batch size); default: the --style's (emulator 1000, "
                        "flink 1024)")
    p.add_argument("--linger-ms", type=float, default=None, metavar="MS",
                   help="flush interval: every this many milliseconds a source sends every non-empty buffer, so no "
                        "tuple waits in a buffer longer (Flink's buffer timeout, Storm 2's flush interval); 0 sends "
                        "every buffer at once; default: the --style's (emulator 20, flink 100)")
    p.add_argument("--flush-phase", default=None, choices=FLUSH_PHASES,
                   help="where each source's flush ticks fall: aligned (every source at k x --linger-ms, as Storm's "
                        "one flush timer per worker process) or spread (source i at i / sources of a linger later, "
                        "as Flink's flusher thread per task keeps its own phase); default: the --style's (emulator "
                        "aligned, flink spread)")
    p.add_argument("--max-pending", type=int, default=None, metavar="BUFFERS",
                   help="credits per source-worker channel: buffers in flight from one source to one worker before "
                        "that channel waits for an ack; a full buffer without credit blocks its source "
                        "(backpressure; Flink's buffers per channel); default: the --style's (emulator 16, flink 10)")
    p.add_argument("--flink-rebalance", action="store_true",
                   help="with --engine flink and --grouping sg: Flink's own rebalance() (round robin from a random "
                        "channel per source) instead of the emulator's shuffle choices")
    p.add_argument("--max-spout-pending", type=int, default=None, metavar="TUPLES",
                   help="tuples a source may have routed and not yet acked, over all its channels, before it waits "
                        "for acks (Storm's topology.max.spout.pending: the run becomes a closed loop of sources x "
                        "this many tuples); default: no such limit, only --max-pending's credits")
    p.add_argument("--net-delay-ms", type=float, default=0.0, metavar="MS",
                   help="one-way network delay of tuples and of acks, in milliseconds (emulated on both engines)")
    p.add_argument("--transit-ms", type=float, default=None, metavar="MS",
                   help="simulator only: the Ray engine's own time to carry a buffer to its worker, and an ack "
                        f"back, in milliseconds, added to each trip; default: {RAY_TRANSIT_MS:g} with --engine sim "
                        "and the emulator --style (the median Ray takes on a 2-core machine), so the simulator "
                        "predicts the actors; 0 models an ideal transport (the flink --style's default); refused "
                        "with --engine ray, where the transit is real")
    p.add_argument("--capacity-schedule", default=None, metavar="AT:C1,C2,...;...",
                   help="capacity changes during the run: AT is a message count (6e6) or seconds (2.5s), then one "
                        "capacity per worker, e.g. '6e6:1,1,5,5;12e6:5,5,1,1'; default: capacities never change")
    p.add_argument("--scale-schedule", default=None, metavar="AT:N;...",
                   help="workers joining or leaving: from AT (message count or seconds) on, N workers are active "
                        "(they join and leave at the highest index), e.g. '3s:12;6s:8'; default: none")
    p.add_argument("--migration-ms-per-key", type=float, default=0.01, metavar="MS",
                   help="when a repartitioning strategy (gedik, albic) moves a key's state, both workers pause this "
                        "many milliseconds per key")
    p.add_argument("--aggregate-every", type=float, default=None, metavar="SECONDS",
                   help="periodic aggregation: workers flush partial state to the aggregator this often and the "
                        "summary counts the keys sent; default: one merge at the end")
    p.add_argument("--sample-interval", type=float, default=None, metavar="SECONDS",
                   help="resolution of the per-worker time series; default: about 200 samples per run")


def add_ray_options(p: argparse.ArgumentParser) -> None:
    """The options that only the Ray engine reads."""
    p.add_argument("--time-scale", default="1", metavar="K|auto",
                   help="time dilation, as network emulators slow a guest's clock: the emulated cluster runs K times "
                        "slower than the wall clock (every duration of the spec, from --cost-ms to chaos times, "
                        "stretched by K; every reported time divided by K, so the summary, logs and plots are in the "
                        "emulated cluster's time and rates). A run K times slower gives the Ray engine K times more "
                        "wall time per tuple, for topologies this machine cannot carry in real time. 'auto' runs "
                        "short pilots (the first 2 emulated seconds, at most 8 wall seconds each, from K = 1 up) "
                        "and takes the smallest K at which the engine and the host had headroom, and says which K "
                        "it chose and why. With --engine sim, "
                        "K divides --transit-ms (Ray's transit at that K); K >= 1",
                   type=time_scale_value)
    p.add_argument("--work", default="sleep", choices=("sleep", "cpu"),
                   help="ray engine: a worker spends each tuple's service time (cost-ms / capacity) waiting (sleep: "
                        "dozens fit on two cores) or burning real CPU capped at its share of a core (cpu)")
    p.add_argument("--core-share", type=float, default=None, metavar="FRACTION",
                   help="ray engine, --work cpu: the share of one core a capacity-1.0 worker may use (a capacity-c "
                        "worker uses c times it); default: chosen from the cores Ray offers so that all workers "
                        f"burning at once use at most {CPU_BUDGET:g} of them, leaving the rest to the sources and Ray "
                        f"(at most {MAX_CORE_SHARE:g}, and at most one core per worker); the summary says which share "
                        "was used (ray.core_share). A worker that serves below 90%% of its capacity makes the "
                        "run's bottleneck 'host'")
    p.add_argument("--cgroup-quota", action="store_true",
                   help="ray engine, --work cpu: also put each worker process on this machine under a kernel CPU "
                        "quota (its own cgroup, as cpulimit capped the paper's executors) of its share of a core "
                        f"plus {QUOTA_HEADROOM * 100:.0f}%% and {QUOTA_BASE_CORES:g} cores for the actor's own "
                        "threads; "
                        "needs root and a writable cgroup cpu controller")
    p.add_argument("--chaos", action="append", default=[], metavar="EVENT",
                   help="ray engine: kill an actor's process for real (SIGKILL) S seconds into the run; EVENT is "
                        "kill-worker:I@S, kill-source:I@S, kill-aggregator@S, kill-controller@S (gedik, albic) or "
                        "kill-any@S (an actor drawn with --seed); repeatable. Ray restarts the actor and the run "
                        "recovers (sources replay from the committed offsets, the aggregator restores its last "
                        "checkpoint, the controller its last version), so the result stays exact; the summary lists "
                        "every failure and its recovery")
    p.add_argument("--checkpoint-every", type=float, default=1.0, metavar="SECONDS",
                   help="ray engine: the aggregator makes its merged state and committed batches durable this often "
                        "(an incremental checkpoint on the driver's node); a batch counts as committed, and leaves "
                        "its source's replay buffer, once durable; 0 = with every flush")
    p.add_argument("--address", default=None, metavar="ADDRESS",
                   help="ray engine: join this Ray cluster ('auto' = the one this machine belongs to, e.g. one "
                        "started with `ray start --head`; a cluster with token authentication needs "
                        "RAY_AUTH_MODE=token) instead of starting a local Ray, whose start takes seconds; default: "
                        "a local Ray, started first and stopped with the command")
    p.add_argument("--placement", default=None, metavar="RES1,RES2,...",
                   help="ray engine: one custom resource name per worker (e.g. fast,fast,slow,slow); each worker "
                        "runs only on nodes offering it")
    p.add_argument("--worker-processes", type=int, default=None, metavar="N",
                   help="ray engine, separate layout: every source in a process of its own and the workers in N "
                        "processes; a source sends one call per process per flush, so fewer processes mean fewer "
                        "Ray calls and fewer processes sharing the cores; default: the combined layout of "
                        "--processes (with --placement: 1)")
    p.add_argument("--processes", type=int, default=None, metavar="N",
                   help="ray engine: Storm's process model (topology.workers): sources and workers together in N "
                        "processes, each hosting a contiguous block of workers and every N-th source, so that memory "
                        "and start-up grow with N, not with sources plus workers; a chaos kill of a source or worker "
                        "kills its whole process (a Storm worker restart). Takes neither --worker-processes nor "
                        "--placement; default: half the cores Ray offers, at least 1, unless --worker-processes or "
                        "--placement asks for the separate layout (each source a process of its own, the workers in "
                        "--worker-processes)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="ray engine: export Prometheus metrics on 127.0.0.1:PORT (Ray's metrics agent) while the run "
                        "lasts, every series labelled run=<name of the run directory>; with --address the metrics are "
                        "recorded and every node exports them on the port it was started with (ray start "
                        "--metrics-export-port, 8080 in clusters/*.yaml); default: off")


def _canonical(name: str) -> str:
    """The registered spelling of a grouping's name (`flink-adaptive` -> `flink_adaptive`); unknown names stay as
    typed, for the check that reports them."""
    import groupings

    try:
        return groupings.registry.lookup(name).name
    except ValueError:
        return name


def spec_from_args(args: argparse.Namespace) -> TopologySpec:
    """Build and validate the topology the options describe."""
    from topo.schedule import parse_capacity_schedule, parse_scale_schedule

    if args.capacities is None and args.workers == DEFAULT_WORKERS:
        args.capacities = DEFAULT_CAPACITIES
    scale_schedule = parse_scale_schedule(args.scale_schedule)
    most = max([args.workers, *(int(c.value) for c in scale_schedule)])
    capacity_schedule = parse_capacity_schedule(args.capacity_schedule, most)
    style = args.style or default_style(args.engine)

    def given(name: str):  # the user's value, else the style's
        value = getattr(args, name)
        return setting(style, name, args.engine) if value is None else value

    return TopologySpec(
        grouping=_canonical(args.grouping), engine=args.engine, workers=args.workers, sources=args.sources,
        capacities=parse_capacities(args.capacities), stream=args.stream, operator=args.operator,
        cost_ms=args.cost_ms, duration=args.duration, seed=args.seed,
        rate=parse_rate(args.rate, parse_capacities(args.capacities), args.workers, args.cost_ms),
        params=parse_params(args.params), operator_params=parse_params(args.operator_params),
        batch_size=given("batch_size"), linger_ms=given("linger_ms"), flush_phase=given("flush_phase"),
        max_pending=given("max_pending"), max_spout_pending=args.max_spout_pending, net_delay_ms=args.net_delay_ms,
        transit_ms=given("transit_ms"), flink_rebalance=args.flink_rebalance,
        sample_interval_s=args.sample_interval,
        capacity_schedule=capacity_schedule, scale_schedule=scale_schedule,
        migration_ms_per_key=args.migration_ms_per_key, aggregate_every_s=args.aggregate_every,
        work=args.work, core_share=args.core_share, cgroup_quota=args.cgroup_quota,
        chaos=parse_chaos(args.chaos), checkpoint_every_s=args.checkpoint_every, address=args.address,
        placement=tuple(p.strip() for p in args.placement.split(",")) if args.placement else None,
        metrics_port=args.metrics_port, worker_processes=args.worker_processes, processes=args.processes,
        time_scale=1.0 if args.time_scale == "auto" else args.time_scale,
    )


def guarded(prog: str, body: Callable[[list[str] | None], int], argv: list[str] | None, kept: str) -> int:
    """Run a command's body: a user's mistake is one line and exit status 2, an interrupt says what was `kept`."""
    try:
        return body(argv)
    except (UsageError, SpecError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RunFailed as exc:
        print(f"{prog}: run failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; {kept}", file=sys.stderr)
        return 130


def exit_process(status: int) -> int:
    """`status`, for a command line's `sys.exit`; if this process started a local Ray, the process ends here at once
    (its outputs are written), with Ray's processes, instead of the user waiting on `ray.shutdown`."""
    if "topo.ray_engine.local" in sys.modules:
        sys.modules["topo.ray_engine.local"].exit_now(status)
    return status


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    return guarded("run_topology.py", _main, argv, "no run directory written")


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    spec = spec_from_args(args)
    auto = args.time_scale == "auto"
    if auto and spec.engine != "ray":
        raise UsageError("--time-scale auto chooses K for the Ray engine; give the simulator a number")
    if spec.engine == "ray":  # a local Ray (about 3 s) starts first, while the rest is imported and checked
        from topo.ray_engine.local import begin_for

        begin_for(spec.engine, spec.address, spec.metrics_port)
    from topo import runner
    from topo.cli.report import print_summary
    from topo.results.rundir import atomic_run_dir, check_destination, default_run_dir

    try:
        runner.check(spec)  # grouping, operator, engine: raises SpecError before any run starts
        out = Path(args.out) if args.out else default_run_dir(spec.grouping, spec.engine)
        check_destination(out, args.overwrite)
        # on Ray the stream loads while the run's actors start; the pilots of --time-scale auto need it first
        prepared = runner.later(spec) if spec.engine == "ray" and not auto else runner.load(spec)
        choice = runner.choose_time_scale(prepared, quiet=args.quiet or args.json) if auto else None
        if choice is not None:
            prepared = runner.Prepared(prepared.spec.with_(time_scale=choice["time_scale"]), prepared.stream)
        with atomic_run_dir(out, overwrite=args.overwrite) as tmp:
            result = runner.execute(prepared, progress=not (args.quiet or args.json), run_id=out.name)
            if choice is not None:
                result.summary["time_scale_choice"] = choice
            runner.write_run(result, tmp, plots=not args.no_plots, spec=spec)
    except BaseException:
        runner.end_engine()
        raise
    # a local Ray stays up: the next run of this process shares it, and the command line's exit stops it
    summary = dict(result.summary, run_dir=str(out))
    if args.json:
        print(json.dumps(summary, separators=(",", ":")))
    else:
        print_summary(summary)
    return 0
