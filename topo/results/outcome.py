"""What a run computed, judged the same way on both engines: the key copies each worker held (from the routing,
the papers' memory cost), whether the merged operator state equals the exact result of the input, and the run
result (summary, time series, per-tuple log) built from the engine's log in one way."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future

import pyarrow as pa

import operators
from topo.results.headroom import attach
from topo.results.metrics import RunResult, TupleLog, effective_capacities, summarize, timeseries
from topo.results.passes import WorkerLoads, worker_loads
from topo.spec import TopologySpec


def operator_outcome(
    name: str,
    tuples: Callable[[], Iterable[tuple]],
    workers: int,
    params: dict | None = None,
) -> tuple[list[int], int, bool]:
    """Distinct keys each worker saw, distinct keys in all, and whether the merged operator state is exact.
    `tuples()` gives the processed tuples a chunk at a time: (key hashes, worker, values or None) each.

    Key counts come from the routing itself (the papers' memory cost: key copies held), not from the operator's
    state, which may keep fewer (a top-k summary holds a bounded number of keys); an operator whose state holds
    every key it was sent (word count) gives the same counts from its states.
    """
    op = operators.make(name, **(params or {}))
    states, whole = op.judge(tuples(), workers)
    exact = op.merges_to(states, whole)
    if op.holds_every_key:  # the states' keys are the routing's key copies (a pass over the tuples saved)
        return [op.distinct_keys(state) for state in states], op.distinct_keys(whole), bool(exact)
    per_worker, total = distinct_keys_per_worker(tuples(), workers)
    return per_worker, total, bool(exact)


def distinct_keys_per_worker(tuples: Iterable[tuple], workers: int) -> tuple[list[int], int]:
    """Number of distinct keys routed to each worker, and in the whole stream, from the tuples a chunk at a time
    ((key hashes, worker, values or None) each): the keys a word count's states would hold."""
    counter = operators.make("wordcount")
    states, whole = counter.judge(tuples, workers)
    return [counter.distinct_keys(state) for state in states], counter.distinct_keys(whole)


def run_result(
    spec: TopologySpec,
    engine: str,
    log: TupleLog,
    workers: int,
    capacity_history: list[tuple[float, tuple[float, ...]]],
    *,
    tuples_in: int,
    keys: tuple[list[int], int, bool] | Future,
    extra: dict,
    source_stats: Callable[[float], list[dict]],
    batches: pa.Table,
    amend: Callable[[dict], dict] | None = None,
    loads: WorkerLoads | Future | None = None,
) -> RunResult:
    """The summary (the contract's keys), time series and per-tuple log of a finished run, for either engine.

    `keys` is (distinct keys per worker, distinct keys in all, exact), or a future of it (the simulator judges the
    outcome on another thread meanwhile: both passes release the GIL); `source_stats(duration_s)` gives each
    source's node stats; `amend(summary)` adds the engine's own fields before the headroom is judged and returns
    the engine's own delays it measured, as `headroom.attach` takes them (transit and ack lateness p99, ms); `loads`
    are the log's `worker_loads` (or their future) when the engine folded them already.
    """
    loads = worker_loads(log, workers) if loads is None else loads.result() if isinstance(loads, Future) else loads
    start, end = loads.first_s, loads.last_s
    distinct, keys_total, exact = keys.result() if isinstance(keys, Future) else keys
    summary = summarize(
        log,
        grouping=spec.grouping,
        engine=engine,
        capacities=effective_capacities(capacity_history, start, end).tolist(),
        sources=spec.sources,
        tuples_in=tuples_in,
        distinct_keys=distinct,
        keys_total=keys_total,
        exact=exact,
        extra=extra,
        loads=loads,
    )
    summary["time_scale"] = spec.time_scale
    delays = amend(summary) if amend is not None else {}
    attach(summary, engine, spec.rate, source_stats(summary["duration_s"]), time_scale=spec.time_scale, **delays)
    series = timeseries(log, workers, spec.sample_interval_s, loads=loads)
    return RunResult(summary, series, log, extras={"batches": batches})
