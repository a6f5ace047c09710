"""Columns of a per-tuple log kept in a file instead of memory, for runs whose log would not fit comfortably.

A column is a numpy array mapped from a file that is unlinked as soon as it is mapped (nothing is left behind, even
if the process dies), so it reads and writes like any array, compiled code included. `release` hands the pages of
rows already written, or already read, back to the file: the process then holds only the rows it is working on,
and a row read again comes back from the file.
"""

from __future__ import annotations

import mmap
import os
import tempfile

import numpy as np

from topo.errors import RunFailed

PAGE = mmap.PAGESIZE


def column(dtype: np.dtype | type, rows: int, directory: str | None = None) -> np.ndarray:
    """A file-mapped column of `rows` entries (zeros), in `directory` (default: the system's temporary directory,
    `TMPDIR`). Its blocks are reserved on disk at once: a disk that fills while a run writes a mapped page would kill
    the process, so a directory without room fails here, with `RunFailed`."""
    size = max(1, rows) * np.dtype(dtype).itemsize
    where = directory or tempfile.gettempdir()
    try:
        fd, path = tempfile.mkstemp(prefix="topo-log-", dir=directory)
    except OSError as exc:
        raise RunFailed(f"cannot keep the per-tuple log in {where} ({exc.strerror}): set TMPDIR to a writable "
                        "directory") from None
    try:
        os.posix_fallocate(fd, 0, size)
        return np.memmap(path, dtype=dtype, mode="r+", shape=(max(1, rows),))[:rows]
    except OSError as exc:
        raise RunFailed(f"cannot keep the per-tuple log in {where}: {size / 1e9:.1f} GB more needed there "
                        f"({exc.strerror}); set TMPDIR to a directory with room") from None
    finally:
        os.close(fd)
        os.unlink(path)  # the mapping keeps the file's blocks until it is dropped


def release(array: np.ndarray, start: int, stop: int) -> None:
    """Give the pages holding rows [start, stop) of a file-mapped column back to its file (nothing for an array in
    memory); the rows keep their values."""
    mapping = getattr(array, "_mmap", None)
    if mapping is None or stop <= start:
        return
    base = np.frombuffer(mapping, np.uint8).ctypes.data
    first = array[start:stop].ctypes.data - base
    last = first + (stop - start) * array.itemsize
    first -= first % PAGE  # whole pages: a page shared with rows still in use is read back when they are
    mapping.madvise(mmap.MADV_DONTNEED, first, min(len(mapping), last) - first)


def is_mapped(array: np.ndarray) -> bool:
    """Whether the array lives in a file (`column`)."""
    return getattr(array, "_mmap", None) is not None
