"""What a worker served since its last flush, kept column by column until the flush folds it."""

from __future__ import annotations

from typing import Any

import numpy as np

from topo.ray_engine.work import ideal_finish


class Served:
    """The batches served since the last flush, column by column: the server appends, the flush takes arrays
    (a flush of hundreds of batches then runs no Python loop over them)."""

    __slots__ = ("sources", "batch_ids", "tuples", "values", "enqueued", "begins", "finish")

    def __init__(self) -> None:
        self.sources: list[int] = []
        self.batch_ids: list[int] = []
        self.tuples: list[np.ndarray] = []  # protocol.WIRE records of each batch
        self.values: list[Any] = []
        self.enqueued: list[float] = []
        self.begins: list[float] = []
        self.finish: list[Any] = []  # each batch's finish times, or the ideal server's (start, service)

    def add(self, source: int, batch_id: int, tuples: np.ndarray, values: Any, enqueued: float, begin: float,
            finish: np.ndarray | tuple[float, float]) -> None:
        """A batch served from `begin` on: its finish times, or the ideal server's (start, service)."""
        self.sources.append(source)
        self.batch_ids.append(batch_id)
        self.tuples.append(tuples)
        self.values.append(values)
        self.enqueued.append(enqueued)
        self.begins.append(begin)
        self.finish.append(finish)

    def __len__(self) -> int:
        return len(self.batch_ids)

    def sizes(self) -> np.ndarray:
        return np.fromiter(map(len, self.tuples), np.int64, len(self.tuples))

    def finish_times(self) -> np.ndarray:
        """The finish times of every batch's tuples, in order."""
        return finish_times(self.finish, self.sizes())


def finish_times(finish: list, sizes: np.ndarray) -> np.ndarray:
    """The finish times of batches of `sizes` tuples, one after another: each batch's as served, or from the ideal
    server's (start, service)."""
    if not finish or not isinstance(finish[0], tuple):
        return np.concatenate(finish) if finish else np.empty(0)
    spans = np.array(finish, np.float64).reshape(-1, 2)
    return ideal_finish(spans[:, 0], spans[:, 1], sizes)
