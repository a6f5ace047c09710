"""Durable checkpoints of a Ray run's aggregator and controller: numbered parts in a directory, each written
whole or not at all.

A part is pickled to a temporary file in the same directory, flushed to disk, and renamed into place: a rename
within one file system is atomic, so a reader sees a part entirely or not at all, and a crash while writing leaves
only a temporary file that `load` ignores (Flink's checkpoints are made durable the same way: written first, then
acknowledged). The aggregator's checkpoints are incremental (each part holds what was merged since the previous
one, as RocksDB's incremental checkpoints do); the controller keeps one part, replaced on every version it installs.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

PART = re.compile(r"^(?P<name>[a-z]+)-(?P<number>\d{8})\.pkl$")


class CheckpointStore:
    """The checkpoint parts of one actor kind (`name`) in `directory`."""

    def __init__(self, directory: str | os.PathLike, name: str) -> None:
        self.directory = Path(directory)
        self.name = name
        self.directory.mkdir(parents=True, exist_ok=True)
        numbers = [number for number, _ in self._parts()]
        self.next = max(numbers, default=-1) + 1  # a restarted writer goes on after the parts that survived it
        self.bytes_written = 0

    def _parts(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.iterdir():
            match = PART.match(path.name)
            if match and match["name"] == self.name:
                found.append((int(match["number"]), path))
        return sorted(found)

    def write(self, part: Any, replace: bool = False) -> int:
        """Make `part` durable as the next part (`replace`: and drop the earlier ones); its size in bytes."""
        blob = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.name}-", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.directory / f"{self.name}-{self.next:08d}.pkl")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        if replace:
            for number, path in self._parts():
                if number < self.next:
                    path.unlink(missing_ok=True)
        self.next += 1
        self.bytes_written += len(blob)
        return len(blob)

    def load(self) -> list[Any]:
        """Every part written so far, oldest first."""
        return [pickle.loads(path.read_bytes()) for _, path in self._parts()]


def make_directory() -> str:
    """A fresh directory for one run's checkpoints (on the driver's node, where the aggregator is pinned)."""
    return tempfile.mkdtemp(prefix="topo-checkpoints-")


def remove_directory(directory: str | None) -> None:
    """Drop a run's checkpoints once its result is collected."""
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
