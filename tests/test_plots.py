"""The run directory's plots: a line per worker for a few workers, a workers x time heatmap for many."""

from __future__ import annotations

import numpy as np
import pytest

from topo.results import plots


def _series(workers: int, samples: int = 20) -> dict[str, np.ndarray]:
    t = np.repeat(np.arange(samples) * 0.1, workers)
    worker = np.tile(np.arange(workers), samples)
    return {"t_s": t, "worker": worker, "queue_len": (worker * 3 + t * 10).astype(float),
            "utilization": (worker / workers).astype(float)}


@pytest.mark.parametrize("workers", [4, 8, 24, 128])
def test_many_workers_are_a_heatmap_and_few_are_lines(workers, tmp_path):
    plt = plots._pyplot()
    summary = {"grouping": "cg", "engine": "sim", "sources": 2, "workers": workers}
    fig = plots.worker_series_figure(plt, _series(workers), summary)
    queue, utilization = fig.axes[:2]
    if workers <= plots.LINES_UP_TO:
        assert len(queue.lines) == workers and not queue.images
    else:
        (image,) = queue.images
        assert image.get_array().shape == (workers, 20) and not queue.lines  # one row per worker, one column a sample
        assert utilization.images[0].get_array()[-1, 0] == pytest.approx((workers - 1) / workers)
    plt.close(fig)
    plots.worker_series(tmp_path / "workers.png", _series(workers), summary)
    assert (tmp_path / "workers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
