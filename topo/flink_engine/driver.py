"""`run_flink`: the spec's topology run by a real Flink job on a local MiniCluster, read back as a run result.

The sources' input, their arrival times and (for a grouping without feedback) each tuple's worker are computed here
exactly as the emulator's sources compute them (`topo.model.inputs`, the registered grouping seeded per source), and
written to a work directory; the job (`TopologyJob.java`) emits them on schedule through Flink's network stack and
serves them at the workers; its logs become the same `TupleLog`, summary and headroom verdict as the other engines'.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import groupings
import operators
from operators.wordcount import WordCountState
from topo.data.streams import Stream
from topo.errors import RunFailed
from topo.flink_engine.install import FLINK_VERSION, flink
from topo.flink_engine.settings import check_supported, routing_mode
from topo.model.inputs import arrival_times, source_keys, source_seed, source_share
from topo.model.lateness import Lateness
from topo.results.extras import batch_table, run_extras
from topo.results.metrics import RunResult, TupleLog
from topo.results.outcome import run_result
from topo.spec import TopologySpec
from topo.styles import RECORD_BYTES

LOG4J = "rootLogger.level = WARN\nrootLogger.appenderRef.file.ref = file\nappender.file.type = File\n" \
        "appender.file.name = file\nappender.file.fileName = {log}\nappender.file.layout.type = PatternLayout\n" \
        "appender.file.layout.pattern = %d %p %c - %m%n\n"
# Java 17 closes the JDK's internals that Flink's runtime reflects on (as Flink's own launch scripts open them)
JVM_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.io", "java.nio",
    "java.lang.reflect", "java.net", "sun.nio.ch", "java.text", "java.time")]


def _write_columns(path: Path, *columns: np.ndarray) -> None:
    n = len(columns[0]) if columns else 0
    with path.open("wb") as f:
        f.write(np.int64(n).astype("<i8").tobytes())
        for c in columns:
            f.write(np.ascontiguousarray(c, dtype="<i8").tobytes())


def _read_columns(path: Path, count: int) -> list[np.ndarray]:
    raw = np.fromfile(path, dtype="<i8")
    n = int(raw[0])
    return [raw[1 + i * n : 1 + (i + 1) * n] for i in range(count)]


def _inputs(spec: TopologySpec, stream: Stream, work: Path, mode: str) -> tuple[list[dict], list[np.ndarray], list]:
    """Write each source's input file; return each source's grouping stats, input positions and arrival times (s;
    None when saturating)."""
    key_hash = np.ascontiguousarray(stream.key_hash, dtype=np.uint64)
    messages = len(key_hash)
    arrivals = arrival_times(messages, spec.rate, getattr(stream, "ts", None))
    stats, positions, times = [], [], []
    for s in range(spec.sources):
        keys = source_keys(key_hash, s, spec.sources)
        seq = np.arange(s, messages, spec.sources, dtype=np.int64)
        at = source_share(arrivals, s, spec.sources)
        if at is not None and spec.duration is not None:
            keep = int(np.searchsorted(at, spec.duration, side="right"))
            keys, seq, at = keys[:keep], seq[:keep], at[:keep]
        to = np.full(keys.size, -1, np.int64)
        if mode == "precomputed":  # the emulator's own grouping, seeded as the emulator seeds this source's
            grouping = groupings.make(spec.grouping, workers=spec.workers, seed=source_seed(spec.seed, s),
                                      **spec.params)
            to = np.asarray(grouping.route(keys, 0.0), np.int64)
            stats.append(grouping.stats())
        else:
            stats.append({})
        at_ns = np.zeros(keys.size, np.int64) if at is None else np.round(at * 1e9).astype(np.int64)
        _write_columns(work / f"source-{s}.bin", seq, keys.view(np.int64), at_ns, to)
        positions.append(seq)
        times.append(at)
    return stats, positions, times


def _properties(spec: TopologySpec, mode: str) -> str:
    service_ns = [round(spec.cost_ms / c * 1e6) for c in spec.capacity_list]
    channels = spec.sources * spec.workers
    # every channel's 10 buffers at its writer and 2 at its reader, and a gate's floating ones, so that no channel
    # holds fewer buffers than Flink's own limit for want of network memory
    segments = 12 * channels + 16 * (spec.sources + spec.workers)
    network = max(64 << 20, segments * spec.batch_size * RECORD_BYTES)
    props = {
        "sources": spec.sources,
        "workers": spec.workers,
        "service_ns": ",".join(str(s) for s in service_ns),
        "routing": mode,
        "segment_bytes": spec.batch_size * RECORD_BYTES,
        "network_memory": f"{network}b",
        "max_traverse": max_traverse(spec),
        "buffer_timeout_ms": int(spec.linger_ms),
        "saturating": str(spec.rate is None).lower(),
        "end_ns": -1 if spec.duration is None else round(spec.duration * 1e9),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def max_traverse(spec: TopologySpec) -> int:
    """flink_adaptive's max_traverse as the registry resolves it (Flink's max-traverse-size), 4 otherwise."""
    if spec.grouping != "flink_adaptive":
        return 4
    grouping = groupings.make(spec.grouping, workers=spec.workers, seed=spec.seed, **spec.params)
    return int(grouping.params["max_traverse"])


def _run_job(spec: TopologySpec, work: Path, total: int, progress: Callable[[int], None] | None) -> float:
    """Run the job in a JVM; the JVM's wall time (s). RunFailed with the job's first error line if it fails."""
    job = flink()
    (work / "log4j2.properties").write_text(LOG4J.format(log=work / "flink.log"))
    cmd = [job.java, *JVM_OPENS, f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}", "-cp", job.classpath(),
           "TopologyJob", str(work)]
    began = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"}  # the run's options, never a user's conf
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work, env=env)
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
    reader.start()
    emitted = [0] * spec.sources
    try:
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "emitted":
                emitted[int(parts[1])] = int(parts[2])
                if progress is not None:
                    progress(min(total, sum(emitted)))
        code = proc.wait()
    finally:
        if proc.poll() is None:  # interrupted: the JVM goes with the run
            proc.kill()
            proc.wait()
    reader.join()
    if code != 0:
        raise RunFailed(f"the Flink job failed: {_first_error(errors, work / 'flink.log')}")
    return time.perf_counter() - began


def _first_error(stderr: list[str], log: Path) -> str:
    lines = [ln.strip() for ln in stderr if ln.strip()]
    if log.is_file():
        lines += [ln.strip() for ln in log.read_text(errors="replace").splitlines() if " ERROR " in ln]
    causes = [ln for ln in lines if "Caused by:" in ln or "Exception" in ln]
    return (causes[-1] if causes else lines[-1] if lines else "no output").removeprefix("Caused by: ")[:300]


def _source_stats(spec: TopologySpec, work: Path, at: list[np.ndarray | None]) -> list[dict]:
    """Each source's stats as the headroom reads them: tuples emitted, time held by backpressure, input lag, and the
    tuples its own thread emitted late when backpressure did not hold it."""
    stats = []
    for s in range(spec.sources):
        emitted_ns, held = _read_columns(work / f"source-{s}.out", 2)
        count, blocked_ns = _read_columns(work / f"source-{s}.stats", 1)[0]
        emitted = emitted_ns / 1e9
        lag = emitted - at[s][: emitted.size] if at[s] is not None else np.zeros(emitted.size)
        late = Lateness()  # the source's own thread late (JVM, timer), not held by backpressure
        late.add(lag[held == 0] * 1e3)
        stats.append({"index": s, "routed": int(count), "blocked_s": blocked_ns / 1e9,
                      "input_lag_max_ms": float(lag.max(initial=0.0)) * 1e3,
                      "input_lag_mean_ms": float(lag.mean()) * 1e3 if lag.size else 0.0,
                      "late": late.stats()})
    return stats


def run_flink(spec: TopologySpec, stream: Stream, *, progress: Callable[[int], None] | None = None) -> RunResult:
    """Run the topology as a Flink job on a local MiniCluster and return its summary, time series and log."""
    check_supported(spec)
    mode = routing_mode(spec)
    with tempfile.TemporaryDirectory(prefix="flink-run-") as tmp:
        work = Path(tmp)
        stats, positions, at = _inputs(spec, stream, work, mode)
        (work / "job.properties").write_text(_properties(spec, mode))
        total = sum(p.size for p in positions)
        wall_s = _run_job(spec, work, total, progress)
        return _result(spec, stream, work, stats, positions, at, wall_s)


def _result(spec: TopologySpec, stream: Stream, work: Path, grouping_stats: list[dict],
            positions: list[np.ndarray], at: list[np.ndarray | None], wall_s: float) -> RunResult:
    n = spec.workers
    parts = [_read_columns(work / f"worker-{w}.bin", 4) for w in range(n)]
    seq = np.concatenate([p[0] for p in parts])
    log = TupleLog(
        seq=seq,
        source=(seq % spec.sources).astype(np.int32),
        worker=np.concatenate([np.full(p[0].size, w, np.int32) for w, p in enumerate(parts)]),
        arrival_s=np.concatenate([p[1] for p in parts]) / 1e9,
        enqueue_s=np.concatenate([p[2] for p in parts]) / 1e9,  # Flink shows no record before its operator takes it
        start_s=np.concatenate([p[2] for p in parts]) / 1e9,
        finish_s=np.concatenate([p[3] for p in parts]) / 1e9,
    )
    key_hash = np.asarray(stream.key_hash, dtype=np.uint64)
    op = operators.make(spec.operator, **spec.operator_params)
    states = []
    for w in range(n):
        keys, counts = _read_columns(work / f"state-{w}.bin", 2)
        order = np.argsort(keys.view(np.uint64), kind="stable")
        states.append(WordCountState(keys.view(np.uint64)[order].copy(), counts[order].copy()))
    sources = _source_stats(spec, work, at)
    emitted = np.sort(np.concatenate([p[: s["routed"]] for s, p in zip(sources, positions, strict=True)]))
    # the state Flink's workers really kept, merged, against the state of everything the sources emitted
    whole = op.exact(key_hash[emitted])
    exact = bool(op.equal(op.merge(states), whole))
    distinct = [op.distinct_keys(state) for state in states]
    keys_total = op.distinct_keys(whole)
    caps = tuple(spec.capacity_list)
    extra = run_extras(spec, stream, log, n, [(0.0, caps)], [(0.0, n)], grouping_stats)
    extra["flink"] = {"version": FLINK_VERSION, "routing": routing_mode(spec), "buffer_timeout_ms": spec.linger_ms,
                      "buffer_bytes": spec.batch_size * RECORD_BYTES, "tuples_per_buffer": spec.batch_size,
                      "record_bytes": RECORD_BYTES, "job_wall_s": wall_s}
    empty = np.empty(0)

    def source_stats(duration_s: float) -> list[dict]:
        return [{**s, "blocked_fraction": s["blocked_s"] / duration_s if duration_s > 0 else 0.0} for s in sources]

    return run_result(spec, "flink", log, n, [(0.0, caps)], tuples_in=int(emitted.size),
                      keys=(distinct, keys_total, exact), extra=extra, source_stats=source_stats,
                      batches=batch_table(empty, empty, empty, empty, empty, empty))


