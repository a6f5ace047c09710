"""Routing speed of every grouping: compiled kernel vs a plain per-tuple Python version, on a Zipf stream.

    python benchmarks/bench_routing.py --messages 1000000 --workers 10,100
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import groupings
from groupings.reference import PyGrouping


def zipf_keys(z: float, n_keys: int, messages: int, seed: int) -> np.ndarray:
    """Key hashes of a bounded Zipf stream: ranks drawn by inverse CDF, keys hashed like real string keys."""
    pmf = np.arange(1, n_keys + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(pmf / pmf.sum())
    ranks = np.searchsorted(cdf, np.random.default_rng(seed).random(messages), side="right")
    return groupings.hash_keys([f"key{i}" for i in range(n_keys)])[np.minimum(ranks, n_keys - 1)]


def compiled_rate(name: str, workers: int, keys: np.ndarray, repeats: int) -> tuple[float, float]:
    """Seconds of the first call (compile or cache load) and best tuples/s of a fresh instance routing all keys."""
    start = time.perf_counter()
    groupings.make(name, workers).route(keys[:1000])
    first_call = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        g = groupings.make(name, workers, seed=1)
        start = time.perf_counter()
        g.route(keys)
        best = min(best, time.perf_counter() - start)
    return first_call, keys.size / best


def python_rate(name: str, workers: int, keys: np.ndarray) -> float:
    """Tuples/s of the plain Python version routing the keys one at a time."""
    g = PyGrouping(name, workers, seed=1)
    start = time.perf_counter()
    g.route(keys)
    return keys.size / (time.perf_counter() - start)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages for the compiled kernels")
    parser.add_argument("--python-messages", type=int, default=50_000, help="messages for the Python versions")
    parser.add_argument("--workers", default="10,100", help="comma-separated worker counts")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys")
    parser.add_argument("--z", type=float, default=1.1, help="Zipf exponent")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per kernel (best is kept)")
    parser.add_argument("--groupings", default=",".join(groupings.names()), help="comma-separated names")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    try:
        args.workers = [int(w) for w in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers takes comma-separated integers (got {args.workers!r})")
    args.groupings = [g.strip() for g in args.groupings.split(",") if g.strip()]
    unknown = sorted(set(args.groupings) - set(groupings.names()))
    if unknown:
        parser.error(f"unknown grouping {unknown[0]!r} (valid: {', '.join(groupings.names())})")
    if min(args.workers) < 1 or args.messages < 1000 or args.python_messages < 1 or args.keys < 1:
        parser.error("--workers >= 1, --messages >= 1000, --python-messages >= 1 and --keys >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    keys = zipf_keys(args.z, args.keys, args.messages, args.seed)
    sample = keys[: args.python_messages]
    rows = []
    for workers in args.workers:
        for name in args.groupings:
            first_call, fast = compiled_rate(name, workers, keys, args.repeats)
            slow = python_rate(name, workers, sample)
            rows.append((name, workers, fast, slow, fast / slow, first_call))
    title = f"routing speed: Zipf z={args.z}, {args.keys} keys, {args.messages} messages (Python: {sample.size})"
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # rich is a declared dependency; plain text keeps the script usable without it
        print(title)
        print(f"{'strategy':9} {'workers':>7} {'numba t/s':>14} {'python t/s':>12} {'ratio':>8} {'first call s':>12}")
        for name, workers, fast, slow, ratio, first in rows:
            print(f"{name:9} {workers:7d} {fast:14,.0f} {slow:12,.0f} {ratio:8.0f} {first:12.2f}")
        return 0
    table = Table(title=title)
    for column in ("strategy", "workers", "numba tuples/s", "python tuples/s", "ratio", "first call (s)"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for name, workers, fast, slow, ratio, first in rows:
        table.add_row(name, str(workers), f"{fast:,.0f}", f"{slow:,.0f}", f"{ratio:,.0f}x", f"{first:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
