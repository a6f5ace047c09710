"""The run summary's contract from docs/design.md, pinned once for every test that checks it."""

SUMMARY_KEYS = [
    "grouping",
    "engine",
    "workers",
    "sources",
    "tuples_in",
    "tuples_processed",
    "duration_s",
    "throughput_tps",
    "latency_ms",
    "imbalance",
    "replication",
    "per_worker",
    "exact",
]
LATENCY_KEYS = {"mean", "p50", "p95", "p99", "max"}
WORKER_KEYS = {"id", "capacity", "tuples", "distinct_keys", "busy_fraction"}
