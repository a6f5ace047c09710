"""A buffer's latencies counted into the exported histogram's buckets in one compiled call (`metrics.LatencyBuckets`;
its own module, so that a process that exports no metrics loads no numba for it)."""

from __future__ import annotations

import numpy as np
from numba import njit

from topo.model.pairwise import pairwise_sum


@njit(cache=True)
def bucket_latencies(arrival, finish, ms, bounds, counts):
    """Count each latency (`finish` - `arrival`) x `ms` into the bucket of `bounds` that holds it (numpy's
    searchsorted, left), and return their numpy sum: per buffer on the serving thread, where numpy's searchsorted
    and bincount took a call each and let go of the GIL."""
    latency = np.empty(finish.size)
    for i in range(finish.size):
        latency[i] = (finish[i] - arrival[i]) * ms
        counts[np.searchsorted(bounds, latency[i])] += 1
    return pairwise_sum(latency)
