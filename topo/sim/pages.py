"""Small memory pages for a simulation's arrays.

numpy asks the kernel for transparent huge pages (madvise) for every array of 4 MB or more. On the virtual machine
this project is measured on, a 10M-tuple run spent 2.2-2.3 s of kernel time zeroing them on first touch against
0.5 s with small pages, about half its wall time (`benchmarks/bench_pages.py`, `results/sim-pages/`). A run asks
for small pages while it allocates and runs; a `NUMPY_MADVISE_HUGEPAGE` the user set (numpy's own switch, read when
numpy loads) is left to decide.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

_lock = threading.Lock()
_depth = 0  # runs inside `small_pages` now (threads may run several)
_before = True  # numpy's choice before the first of them


def hugepage_switch() -> Callable[[bool], bool] | None:
    """numpy's run-time form of NUMPY_MADVISE_HUGEPAGE: switch(on) returns the choice before; None where this numpy
    has none."""
    return getattr(getattr(np, "_core", np).multiarray, "_set_madvise_hugepage", None)


@contextmanager
def small_pages() -> Iterator[None]:
    """Arrays allocated inside take small pages, unless NUMPY_MADVISE_HUGEPAGE is set; numpy's choice comes back
    when the last run inside leaves."""
    global _depth, _before
    toggle = hugepage_switch()
    if toggle is None or "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        yield
        return
    with _lock:
        if _depth == 0:
            _before = toggle(False)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                toggle(_before)
