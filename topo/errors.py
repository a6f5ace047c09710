"""The errors a user's mistake or a failed run raises, kept apart so that any module may raise them without importing
the spec; and where a library's own console output goes while we answer for it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class SpecError(ValueError):
    """A topology description that cannot run; the message is one line meant for the user."""


class RunFailed(RuntimeError):
    """A run that started could not finish (an actor died and did not come back); one line saying which and when."""


def first_line(exc: BaseException) -> str:
    """An exception's first line of text (its type's name if it has none): what a one-line error quotes."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def stderr_to(path: str) -> Iterator[None]:
    """Point file descriptor 2 at `path` for the block (a JVM started meanwhile keeps writing its console there; Ray's
    C++ client logs each failed try itself)."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def mute_native_stderr() -> None:
    """From now on, what native code writes to file descriptor 2 goes nowhere, while Python's `sys.stderr` keeps
    writing where it did: a Ray client that failed to connect leaves gRPC threads that log their own shutdown at
    exit, after the one line that says what was wrong. Only for the process's own stderr (not a test's capture)."""
    try:
        if sys.stderr.fileno() != 2:
            return
    except (AttributeError, OSError, ValueError):
        return
    sys.stderr.flush()
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding, errors=sys.stderr.errors)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)
    os.close(quiet)
