"""Whose defaults a run takes for the settings that shape its batching and flow control (`--style`).

Each style maps the emulator's settings to one system's own defaults, so that a run predicts that system as it is
shipped. The command line fills every setting the user did not give from the chosen style; `--engine flink` takes
the Flink style unless told otherwise.
"""

from __future__ import annotations

from topo.spec import CLI_BATCH_SIZE, CLI_LINGER_MS, RAY_TRANSIT_MS

# Flink 2.3: a network buffer is one 32 KiB memory segment (taskmanager.memory.segment-size); the emulator's
# record on Flink's wire is 32 bytes (27 of fields, Flink's 4-byte length and 1-byte tag), so 1,024 tuples fill one
FLINK_SEGMENT_BYTES = 32 * 1024
RECORD_BYTES = 32
FLINK_BUFFER_TUPLES = FLINK_SEGMENT_BYTES // RECORD_BYTES
FLINK_BUFFER_TIMEOUT_MS = 100.0  # execution.buffer-timeout.interval
FLINK_CREDITS = 10  # buffers one channel may hold before its writer blocks (Flink's fixed max buffers per channel)

STYLES = {
    # the emulator's own: sized so that the Ray engine carries Fig. 8's rate here with headroom
    "emulator": {"batch_size": CLI_BATCH_SIZE, "linger_ms": CLI_LINGER_MS, "max_pending": 16,
                 "flush_phase": "aligned", "transit_ms": {"sim": RAY_TRANSIT_MS}},
    # Flink's defaults: 32 KiB buffers, the 100 ms buffer timeout of a flusher thread per task (each its own phase),
    # 10 buffers per channel, and no Ray between the tasks
    "flink": {"batch_size": FLINK_BUFFER_TUPLES, "linger_ms": FLINK_BUFFER_TIMEOUT_MS, "max_pending": FLINK_CREDITS,
              "flush_phase": "spread", "transit_ms": {}},
}

HELP = {
    "emulator": f"the emulator's own ({CLI_BATCH_SIZE}-tuple buffers, {CLI_LINGER_MS:g} ms linger, 16 credits, "
                f"aligned flushes, {RAY_TRANSIT_MS:g} ms of Ray transit in the simulator)",
    "flink": f"Flink 2.3's defaults: --batch-size {FLINK_BUFFER_TUPLES} (a 32 KiB network buffer of "
             f"{RECORD_BYTES}-byte records), --linger-ms {FLINK_BUFFER_TIMEOUT_MS:g} (execution.buffer-timeout), "
             f"--max-pending {FLINK_CREDITS} (buffers per channel), --flush-phase spread (a flusher thread per task), "
             "--transit-ms 0",
}


def default_style(engine: str) -> str:
    """The style a run takes when none is given: Flink's on the Flink engine, the emulator's elsewhere."""
    return "flink" if engine == "flink" else "emulator"


def setting(style: str, name: str, engine: str):
    """The style's value of one setting on one engine (transit is the simulator's model of Ray's)."""
    value = STYLES[style][name]
    if name == "transit_ms":
        return value.get(engine, 0.0)
    return value
