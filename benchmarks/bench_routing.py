"""Routing speed of every grouping with a plain Python version: compiled code vs that version, on a Zipf stream.

    python benchmarks/bench_routing.py --messages 1000000 --workers 10,100

Time-driven groupings (lasg) get the engine clock too: the stream is routed in batches of --batch tuples, one
batch per millisecond of engine time, so their periodic refreshes are part of what is measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import groupings
from experiments.provenance import add_numbers_option
from groupings.reference import REFERENCE_NAMES, py_grouping


def zipf_keys(z: float, n_keys: int, messages: int, seed: int) -> np.ndarray:
    """Key hashes of a bounded Zipf stream: ranks drawn by inverse CDF, keys hashed like real string keys."""
    pmf = np.arange(1, n_keys + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(pmf / pmf.sum())
    ranks = np.searchsorted(cdf, np.random.default_rng(seed).random(messages), side="right")
    return groupings.hash_keys([f"key{i}" for i in range(n_keys)])[np.minimum(ranks, n_keys - 1)]


TIMED = ("lasg",)  # groupings whose routing depends on the engine clock


def route_all(g, keys: np.ndarray, batch: int, timed: bool) -> None:
    """Route every key: in one call, or for a timed grouping in batches one millisecond of engine time apart."""
    if not timed:
        g.route(keys)
        return
    for i, start in enumerate(range(0, keys.size, batch)):
        g.route(keys[start : start + batch], i * 1e-3)


def compiled_rate(name: str, workers: int, keys: np.ndarray, repeats: int, batch: int) -> tuple[float, float]:
    """Seconds of the first call (compile or cache load) and best tuples/s of a fresh instance routing all keys."""
    start = time.perf_counter()
    groupings.make(name, workers).route(keys[:1000], 0.0)
    first_call = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        g = groupings.make(name, workers, seed=1)
        start = time.perf_counter()
        route_all(g, keys, batch, name in TIMED)
        best = min(best, time.perf_counter() - start)
    return first_call, keys.size / best


def python_rate(name: str, workers: int, keys: np.ndarray, batch: int) -> float:
    """Tuples/s of the plain Python version routing the keys one at a time."""
    g = py_grouping(name, workers, seed=1)
    start = time.perf_counter()
    route_all(g, keys, batch, name in TIMED)
    return keys.size / (time.perf_counter() - start)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages for the compiled kernels")
    parser.add_argument("--python-messages", type=int, default=50_000, help="messages for the Python versions")
    parser.add_argument("--workers", default="10,100", help="comma-separated worker counts")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys")
    parser.add_argument("--z", type=float, default=1.1, help="Zipf exponent")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per kernel (best is kept)")
    parser.add_argument("--groupings", default=",".join(REFERENCE_NAMES), help="comma-separated names")
    parser.add_argument("--batch", type=int, default=10_000, help="batch size of time-driven groupings")
    parser.add_argument("--seed", type=int, default=7)
    add_numbers_option(parser, "every row")
    args = parser.parse_args(argv)
    try:
        args.workers = [int(w) for w in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers takes comma-separated integers (got {args.workers!r})")
    args.groupings = [g.strip() for g in args.groupings.split(",") if g.strip()]
    unknown = sorted(set(args.groupings) - set(REFERENCE_NAMES))
    if unknown:
        parser.error(f"no plain Python version of grouping {unknown[0]!r} (valid: {', '.join(REFERENCE_NAMES)})")
    if min(args.workers) < 1 or args.messages < 1000 or args.python_messages < 1 or args.keys < 1 or args.batch < 1:
        parser.error("--workers >= 1, --messages >= 1000, --python-messages >= 1, --keys >= 1 and --batch >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    keys = zipf_keys(args.z, args.keys, args.messages, args.seed)
    sample = keys[: args.python_messages]
    rows = []
    for workers in args.workers:
        for name in args.groupings:
            first_call, fast = compiled_rate(name, workers, keys, args.repeats, args.batch)
            slow = python_rate(name, workers, sample, args.batch)
            rows.append((name, workers, fast, slow, fast / slow, first_call))
    title = f"routing speed: Zipf z={args.z}, {args.keys} keys, {args.messages} messages (Python: {sample.size})"
    _show(title, rows)
    if args.json:
        print(json.dumps({"z": args.z, "keys": args.keys, "messages": args.messages, "rows": [
            {"grouping": name, "workers": workers, "compiled_tps": fast, "python_tps": slow, "ratio": ratio,
             "first_call_s": first} for name, workers, fast, slow, ratio, first in rows]}))
    return 0


def _show(title: str, rows: list[tuple]) -> None:
    """The table, with rich when it is there."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # rich is a declared dependency; plain text keeps the script usable without it
        print(title)
        print(f"{'strategy':9} {'workers':>7} {'numba t/s':>14} {'python t/s':>12} {'ratio':>8} {'first call s':>12}")
        for name, workers, fast, slow, ratio, first in rows:
            print(f"{name:9} {workers:7d} {fast:14,.0f} {slow:12,.0f} {ratio:8.0f} {first:12.2f}")
        return
    table = Table(title=title)
    for column in ("strategy", "workers", "numba tuples/s", "python tuples/s", "ratio", "first call (s)"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for name, workers, fast, slow, ratio, first in rows:
        table.add_row(name, str(workers), f"{fast:,.0f}", f"{slow:,.0f}", f"{ratio:,.0f}x", f"{first:.2f}")
    Console().print(table)


if __name__ == "__main__":
    sys.exit(main())
