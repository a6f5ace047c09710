"""Word count's per-worker states in one compiled pass: at a thousand workers a sort and a count per worker were
a thousand rounds of numpy calls. Loaded only when a run's outcome is judged."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def count_runs(grouped, offsets):
    """Each run grouped[offsets[w]:offsets[w + 1]] sorted, as distinct keys and how often each occurs: (keys,
    counts, bounds), run w's at [bounds[w], bounds[w + 1])."""
    keys = np.empty(grouped.size, np.uint64)
    counts = np.empty(grouped.size, np.int64)
    bounds = np.zeros(offsets.size, np.int64)
    n = 0
    for w in range(offsets.size - 1):
        run = np.sort(grouped[offsets[w] : offsets[w + 1]])
        for i in range(run.size):
            if i == 0 or run[i] != run[i - 1]:
                keys[n] = run[i]
                counts[n] = 0
                n += 1
            counts[n - 1] += 1
        bounds[w + 1] = n
    return keys[:n].copy(), counts[:n].copy(), bounds
