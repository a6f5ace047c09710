"""The per-tuple log read while the event loop writes it: a pass on another thread takes the rows queued so far, so
the operator's outcome is judged on a second core during the run instead of after it.

A simulated worker's slots are written once, when their buffer is queued (a FIFO server's start and finish are
known then), so a row below the published count never changes and a reader needs no lock beyond the count.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

from topo.results import spill

FEED_CHUNK = 1 << 19  # rows a reader takes at a time while the loop runs: the last one is left after it ends


class LogFeed:
    """Rows [0, written) of a log's columns, handed to readers (`chunks`) as the writer publishes them."""

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self._columns = columns
        self._written = 0
        self._closed = False
        self._ready = threading.Condition()

    def publish(self, written: int) -> None:
        """Rows before `written` are final."""
        with self._ready:
            self._written = written
            self._ready.notify_all()

    def close(self, written: int) -> None:
        """No more rows come: readers take what is left and stop (also when the writer failed)."""
        with self._ready:
            self._written, self._closed = written, True
            self._ready.notify_all()

    def __len__(self) -> int:
        return self._written

    def chunks(self, *names: str, rows: int | None = None) -> Iterator[tuple[int, tuple[np.ndarray, ...]]]:
        """(first row, the named columns' rows from it), at most `rows` rows (default `FEED_CHUNK`) at a time, each
        once it is written; ends when the log is closed and read. A spilled column's chunk goes back to its file
        after it."""
        rows = rows or FEED_CHUNK
        columns = [self._columns[name] for name in names]
        a = 0
        while True:
            with self._ready:
                while not self._closed and self._written - a < rows:
                    self._ready.wait()
                b, last = min(a + rows, self._written), self._closed and self._written - a <= rows
            if b > a:
                yield a, tuple(c[a:b] for c in columns)
                for c in columns:
                    spill.release(c, a, b)
            a = b
            if last:
                return
