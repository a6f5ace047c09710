"""Deterministic computations the selected tests will need, made ahead in one background process of low priority.

The suite keeps both cores busy for much of its time, but leaves one idle while single-threaded tests run: the
background process computes meanwhile. A test module opts in with a function `ahead(items)` that lists, for its
selected tests, `(key, function, args)` triples (the function importable, its result picklable); tests/conftest.py
submits them when the tests are known and runs the module after the others. A test takes its result with
`AHEAD.take(key)`, which waits for a computation still running, or gets None for one never submitted.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

from sockets import READABLE, tree

_LOW_PRIORITY = 15  # nice: the tests' own processes come first


def _in_background() -> None:
    os.nice(_LOW_PRIORITY)
    quiet = os.open(os.devnull, os.O_WRONLY)  # progress lines would cut into pytest's own output
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # ended meanwhile
        pass


class Ahead:
    """The session's background computations, by key, made one after another in submission order."""

    def __init__(self) -> None:
        self.pool = None
        self.pending: dict = {}
        self.stopped: list[int] = []  # the background's processes while `paused`

    def submit(self, key: Hashable, fn: Callable, *args) -> None:
        if self.pool is None:
            self.pool = multiprocessing.get_context("spawn").Pool(1, initializer=_in_background)
        self.pending[key] = self.pool.apply_async(fn, args)

    def take(self, key: Hashable):
        """The result of the computation submitted under `key` (raising what it raised), or None if none was."""
        pending = self.pending.pop(key, None)
        if pending is None:
            return None
        if self.stopped and not pending.ready():
            # a paused background cannot finish it: let it go on until it has (else the test waits forever)
            for pid in self.stopped:
                _signal(pid, signal.SIGCONT)
            try:
                pending.wait()
            finally:
                for pid in self.stopped:
                    _signal(pid, signal.SIGSTOP)
        return pending.get()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The background process stops while the block runs (a test that measures CPU or wall time: a busy
        sibling core slows this one's loops), and goes on after it."""
        workers = [p.pid for p in multiprocessing.active_children() if p.name.startswith("SpawnPoolWorker")]
        # with their children (read from Linux's /proc)
        stopped = sorted(set().union(*(tree(pid) if READABLE else {pid} for pid in workers))) if workers else []
        for pid in stopped:
            _signal(pid, signal.SIGSTOP)
        self.stopped = stopped
        try:
            yield
        finally:
            self.stopped = []
            for pid in stopped:
                _signal(pid, signal.SIGCONT)

    def close(self) -> None:
        """Stop the background process, and whatever it has not finished (a session cut short)."""
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None


AHEAD = Ahead()
