"""One run, start to finish: check the inputs, run an engine, write the run directory.

`prepare` does every check that can fail on user input before any work starts (`check`, then `load` the stream);
`execute` runs the engine; `write_run` fills a (temporary) directory that the caller renames into place.
`begin_engine` starts a local Ray while the stream loads, which the process's runs share; `end_engine` stops it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import groupings
import operators
from topo.data.dataset import find_stream, load_stream
from topo.data.streams import Stream, StreamError
from topo.results.metrics import RunResult, write_outputs
from topo.results.rundir import SPEC_FILE
from topo.spec import SpecError, TopologySpec
from topo.versions import environment


@dataclass
class Prepared:
    """A topology whose every input has been checked: ready to run."""

    spec: TopologySpec
    stream: Stream | None  # None: checked by name, and loaded as the run starts (`later`)


def check(spec: TopologySpec) -> None:
    """Check the engine, operator, grouping and the stream's name; raise SpecError with one line on the first
    problem (the stream's data is checked as `load` reads it)."""
    if spec.engine == "ray":
        from topo.ray_engine.driver import check_supported

        check_supported(spec, spec.work)  # what Ray cannot run yet fails here, before the stream is loaded
        if spec.address:
            from topo.ray_engine.local import check_address

            check_address(spec.address)
    if spec.engine == "flink":
        from topo.flink_engine.settings import check_supported

        check_supported(spec)
    try:
        operators.make(spec.operator, **spec.operator_params)
    except ValueError as exc:
        raise SpecError(f"--operator: {exc}") from None
    try:
        # an unknown name or parameter fails here, before the stream is loaded
        groupings.make(spec.grouping, workers=spec.workers, seed=spec.seed, **spec.params)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    try:
        find_stream(spec.stream)
    except StreamError as exc:
        raise SpecError(str(exc)) from None


def load(spec: TopologySpec) -> Prepared:
    """Load the checked spec's stream; SpecError with one line if it cannot be read or is empty."""
    try:
        stream = load_stream(spec.stream)
    except StreamError as exc:
        raise SpecError(str(exc)) from None
    if stream.messages == 0:
        raise SpecError(f"--stream {spec.stream}: the stream is empty")
    return Prepared(spec, stream)


def later(spec: TopologySpec) -> Prepared:
    """The checked spec with its stream still to load: the Ray engine loads it while the run's actors start (a
    process's start, about 0.8 s here), the other engines before they run. A stream that cannot be read fails the
    run then, with the same one-line SpecError as `load`."""
    return Prepared(spec, None)


def prepare(spec: TopologySpec) -> Prepared:
    """Check the engine, operator, grouping and stream; raise SpecError with one line on the first problem."""
    check(spec)
    return load(spec)


def begin_engine(spec: TopologySpec) -> None:
    """Start what the spec's engine needs ahead of the run, while the stream loads (a local Ray, which the process's
    runs then share); `end_engine` stops it."""
    from topo.ray_engine.local import begin_for

    begin_for(spec.engine, spec.address, spec.metrics_port)


def end_engine() -> None:
    """Stop this process's local Ray, if it started one, and wait for it (runs in one process share it until then;
    a process that ends normally stops it at exit)."""
    import sys

    if "topo.ray_engine.local" in sys.modules:
        sys.modules["topo.ray_engine.local"].abandon()


def _engine(spec: TopologySpec, run_id: str | None = None):
    """The run function of the spec's engine: (spec, stream, progress callback) -> RunResult; `run_id` labels the
    run's Prometheus metrics (ray engine with a metrics port)."""
    if spec.engine == "ray":
        from topo.ray_engine import run_ray

        return lambda sp, st, progress=None: run_ray(
            sp, st, progress=progress, address=sp.address, work=sp.work, chaos=sp.chaos, placement=sp.placement,
            metrics_port=sp.metrics_port, run_id=run_id,
        )
    if spec.engine == "flink":
        from topo.flink_engine import run_flink

        return lambda sp, st, progress=None: run_flink(sp, _loaded(st), progress=progress)
    from topo.sim import simulate

    return lambda sp, st, progress=None: simulate(sp, _loaded(st), progress=progress)


def _loaded(stream):
    """The stream, loaded now if it is a call that loads it (only the Ray engine overlaps the load with its start)."""
    return stream() if callable(stream) else stream


def choose_time_scale(prepared: Prepared, quiet: bool = False) -> dict:
    """`--time-scale auto` on the Ray engine: pilots of the run from K = 1 up (`topo.ray_engine.dilation`); the
    record of the choice, whose `time_scale` the run then takes. Each pilot's verdict goes to stderr unless quiet."""
    import sys

    from topo.ray_engine.dilation import choose_time_scale as choose

    run = _engine(prepared.spec)
    say = None if quiet else (lambda line: print(f"--time-scale auto: {line}", file=sys.stderr))
    _, choice = choose(prepared.spec, prepared.stream, lambda sp, st: run(sp, st), say)
    return choice


def execute(prepared: Prepared, progress: bool = True, run_id: str | None = None) -> RunResult:
    """Run the prepared topology on its engine, with a progress bar on stderr when asked; `run_id` is the `run`
    label of its metrics (the CLI passes the run directory's name)."""
    spec, stream = prepared.spec, prepared.stream
    run = _engine(spec, run_id)
    if not progress:
        return run(spec, stream if stream is not None else lambda: load(spec).stream)

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn(f"{spec.grouping} on {spec.engine}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("tuples"), TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    with bar:
        task = bar.add_task("run", total=None if stream is None else stream.messages)

        def loading() -> Stream:
            loaded = load(spec).stream
            bar.update(task, total=loaded.messages)
            return loaded

        result = run(spec, stream if stream is not None else loading,
                     progress=lambda emitted: bar.update(task, completed=emitted))
    return result


def write_run(result: RunResult, directory: Path, plots: bool = True, spec: TopologySpec | None = None) -> None:
    """Summary, logs, the spec that made them (with the versions and machine they ran with) and (optionally) PNG
    plots, into `directory`."""
    write_outputs(result, directory)
    if spec is not None:
        # "environment" is no option of the spec: one who rebuilds a TopologySpec from the file drops it
        (directory / SPEC_FILE).write_text(json.dumps({**dataclasses.asdict(spec), "environment": environment()},
                                                      indent=2) + "\n")
    if plots:
        from topo.results import plots as p

        ts = {name: result.timeseries.column(name).to_numpy() for name in result.timeseries.column_names}
        # a CDF of millions of points draws the same from an evenly strided sample of them
        sample = result.log.every(max(1, -(-len(result.log) // p.CDF_SAMPLE)))
        p.latency_cdf(directory / "latency_cdf.png", sample.latency_ms, sample.worker, result.summary)
        p.worker_series(directory / "workers.png", ts, result.summary)
        p.worker_load(directory / "load.png", result.summary)
