"""What the Spark command-line tools share: one-line errors and exit statuses, and Spark's log kept on failure."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


class JobFailed(Exception):
    """Spark could not start or a job failed for a reason that is not the user's input; exit status 1."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one clear line (UsageError), not usage text plus a message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def run_main(prog: str, body: Callable[[list[str] | None], int], argv: list[str] | None,
             usage_errors: tuple[type[BaseException], ...]) -> int:
    """`body(argv)`'s exit status, with usage problems (UsageError and `usage_errors`) and failed Spark jobs
    printed as one line `prog: error: ...`."""
    try:
        return body(argv)
    except (UsageError, *usage_errors) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except JobFailed as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED


@contextmanager
def spark_log(prefix: str) -> Iterator[str]:
    """A log file for Spark's console output: deleted afterwards, kept when a JobFailed leaves the block with
    something in it (an empty log, no Java say, helps nobody)."""
    fd, log = tempfile.mkstemp(prefix=prefix, suffix=".log")
    os.close(fd)
    keep = False
    try:
        yield log
    except JobFailed:
        keep = os.path.getsize(log) > 0
        raise
    finally:
        if not keep:
            os.unlink(log)


def log_note(log: str) -> str:
    """Where Spark's console output went, if it wrote any (the tail of an error line)."""
    return f" (Spark's log: {log})" if os.path.getsize(log) else ""
