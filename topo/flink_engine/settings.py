"""What the Flink engine runs, and how: the spec's settings it maps onto Flink's, and the routing of each grouping.

A grouping that takes no feedback routes the same whatever the timing, so its choices are computed by the emulator's
own code before the job starts and Flink carries them out (`partitionCustom`): the routing is the emulator's by
construction. `flink_adaptive` is Flink's own adaptive partitioner (FLIP-339) and `sg` may be Flink's own
`rebalance()` (`--flink-rebalance`); a grouping that learns from the workers' acks cannot run there.
"""

from __future__ import annotations

import groupings
from topo.errors import SpecError
from topo.spec import TopologySpec
from topo.styles import FLINK_CREDITS, RECORD_BYTES

NATIVE = {"flink_adaptive": "adaptive"}  # Flink's own partitioner runs these
MAX_WORKERS = 32767  # the record carries its worker as a Java short


def runnable() -> list[str]:
    """The registered groupings Flink can run: every one without feedback, and Flink's own adaptive partitioner."""
    return sorted(n for n in groupings.names() if n in NATIVE or _feedback_free(n))


def _feedback_free(name: str) -> bool:
    """No ack teaches it anything and no controller or worker decides for it: its routing depends on the keys alone."""
    about = groupings.describe(name)
    if about["controller"] or about["delegation"]:
        return False
    try:
        return not getattr(groupings.make(name, workers=2, seed=0), "takes_feedback", True)
    except ValueError:
        return False


def routing_mode(spec: TopologySpec) -> str:
    """"precomputed" (the emulator's grouping, carried out by partitionCustom), "rebalance" or "adaptive"."""
    if spec.grouping in NATIVE:
        return NATIVE[spec.grouping]
    if spec.flink_rebalance:
        return "rebalance"
    return "precomputed"


def check_supported(spec: TopologySpec) -> None:
    """One SpecError line for what the Flink engine does not run, before the JVM starts."""
    if spec.grouping not in runnable():
        raise SpecError(f"--engine flink runs groupings whose routing needs no feedback from the workers, and "
                        f"Flink's own adaptive partitioner: {', '.join(runnable())} (not {spec.grouping})")
    if spec.operator != "wordcount":
        raise SpecError(f"--engine flink runs the wordcount operator only (not {spec.operator})")
    if spec.work != "sleep":
        raise SpecError("--engine flink emulates service time by sleeping (--work sleep) only")
    if spec.max_pending != FLINK_CREDITS:
        raise SpecError(f"--engine flink: Flink 2.3 fixes the buffers per channel at {FLINK_CREDITS}, so "
                        f"--max-pending must be {FLINK_CREDITS} (got {spec.max_pending})")
    if spec.linger_ms != int(spec.linger_ms):
        raise SpecError(f"--engine flink: Flink's buffer timeout is whole milliseconds (not --linger-ms "
                        f"{spec.linger_ms:g})")
    if spec.flush_phase != "spread":
        raise SpecError("--engine flink: every Flink task flushes on its own clock; --flush-phase must be spread")
    segment = spec.batch_size * RECORD_BYTES
    if segment & (segment - 1) or segment < 4096:
        raise SpecError(f"--engine flink: a network buffer is a power of two of at least 4 KiB, so --batch-size must "
                        f"be one of 128, 256, ..., 1024, ... tuples of {RECORD_BYTES} bytes (got {spec.batch_size})")
    if spec.workers > MAX_WORKERS:
        raise SpecError(f"--engine flink runs at most {MAX_WORKERS} workers")
    unsupported = [name for name, given in (
        ("--max-spout-pending", spec.max_spout_pending is not None), ("--net-delay-ms", spec.net_delay_ms),
        ("--transit-ms", spec.transit_ms), ("--capacity-schedule", spec.capacity_schedule),
        ("--scale-schedule", spec.scale_schedule), ("--aggregate-every", spec.aggregate_every_s is not None),
        ("--time-scale", spec.time_scale != 1)) if given]
    if unsupported:
        raise SpecError(f"--engine flink does not run {unsupported[0]} (the simulator and the Ray engine do)")
