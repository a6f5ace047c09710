"""What every experiment shares: running a topology, tables on disk, and small series helpers."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from topo.data.dataset import load_stream
from topo.data.streams import Stream
from topo.results.metrics import RunResult
from topo.sim import simulate
from topo.spec import TopologySpec

_STREAMS: dict[str, Stream] = {}


def stream(spec: str) -> Stream:
    """Load an inline stream once per process (experiments run several groupings on the same stream)."""
    if spec not in _STREAMS:
        _STREAMS[spec] = load_stream(spec)
    return _STREAMS[spec]


def words_stream(messages: int, seed: int = 7, lang: str = "en") -> Stream:
    """Real words drawn with their wordfreq frequencies (the `words` dataset of `make_stream.py`, without Spark):
    the stand-in for traces of words from text, such as the papers' Twitter and MemeTracker keys."""
    name = f"words:{lang},{messages},{seed}"
    if name not in _STREAMS:
        from spark.streams_keys import word_keys  # pure numpy: importing it does not start Spark

        words = word_keys(lang, seed=seed)
        raw = words.sample(0, messages)
        present = np.flatnonzero(np.bincount(raw, minlength=words.size))
        names = words.names(present).astype(str)
        order = np.argsort(names, kind="stable")
        # dense ids over the sorted table of the words that occur, as every Stream has
        remap = np.zeros(words.size, dtype=np.int64)
        remap[present[order]] = np.arange(present.size)
        meta = {**words.meta(), "spec": f"words:lang={lang},messages={messages},seed={seed}"}
        _STREAMS[name] = Stream(remap[raw], names[order].astype(object), meta=meta)
    return _STREAMS[name]


def run(spec: TopologySpec) -> RunResult:
    """Simulate one topology on its (cached) stream."""
    return simulate(spec, stream(spec.stream))


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    """Rows of dicts as CSV, columns in first-row order."""
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def markdown_table(rows: Sequence[dict], digits: int = 3) -> str:
    """Rows of dicts as a markdown table (numbers to `digits` significant digits)."""
    if not rows:
        return ""
    cols = list(rows[0])

    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.{digits}g}"
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def against_paper(rows: Sequence[dict], note: str) -> str:
    """The markdown section that puts our numbers next to the paper's: (claim, paper, ours) rows and a note."""
    return "\n## Against the paper\n\n" + markdown_table(rows) + "\n" + note.strip() + "\n"


def series(result: RunResult, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(sample times, workers x samples matrix) of one per-worker time-series column."""
    ts = result.timeseries
    t = ts.column("t_s").to_numpy()
    w = ts.column("worker").to_numpy().astype(int)
    v = ts.column(column).to_numpy().astype(float)
    times, idx = np.unique(t, return_inverse=True)
    grid = np.zeros((int(w.max()) + 1 if w.size else 0, times.size))
    grid[w, idx] = v
    return times, grid


def pyplot():
    """matplotlib's pyplot on the file-only backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
