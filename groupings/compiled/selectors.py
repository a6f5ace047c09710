"""Selectors: which candidate this message goes to (Storm's TargetSelector), as compiled functions.

A selector takes a candidate set (its locate and choice functions), picks one bin, records the send in the
local load estimate and returns the bin. Selectors are inlined into the kernels: the candidate functions are
then resolved at compile time, which keeps the kernels cacheable.
"""

from __future__ import annotations

import math

from ..jit import hot
from .state import EPS, FALLBACKS, LOAD_SHIFT, MESSAGES, PROBES, RR_NEXT


@hot
def send(st, b):
    """Record one message sent to bin `b` (the local load estimate of this source) and return `b`."""
    st.loads[b] += 1.0
    st.counters[MESSAGES] += 1
    return b


@hot
def least_loaded_bin(st):
    """Bin with the lowest local load (lowest index on ties)."""
    loads = st.loads
    best = 0
    for b in range(1, loads.size):
        if loads[b] < loads[best]:
            best = b
    return best


@hot(inline=True)
def least_loaded(locate, choice, key, st):
    """Greedy-d: the candidate with the lowest local load; ties go to the earlier candidate."""
    origin, count = locate(key, st)
    loads = st.loads
    best = choice(origin, 0, st)
    best_load = loads[best]
    for i in range(1, count):
        b = choice(origin, i, st)
        if loads[b] < best_load:
            best = b
            best_load = loads[b]
    return send(st, best)


@hot
def capacity(st):
    """Bound for the next message: ceil((1 + eps) * m / n), m counting that message, n the number of bins.

    m is the sum of the load estimates: the messages routed, plus what a resize added or removed.
    """
    return math.ceil((1.0 + st.params[EPS]) * (st.counters[MESSAGES] + st.params[LOAD_SHIFT] + 1) / st.loads.size)


@hot(inline=True)
def first_with_spare(locate, choice, key, st):
    """The first candidate whose load is below the capacity bound (PoRC, CH with bounded loads).

    Guarantee: after m messages every bin holds at most ceil((1 + eps) m / n) of them. Some bin is always
    below the bound, since n bins at the bound would hold n ceil((1 + eps) m / n) >= m > m - 1 messages.
    """
    origin, count = locate(key, st)
    loads = st.loads
    cap = capacity(st)
    for i in range(count):
        b = choice(origin, i, st)
        if loads[b] < cap:
            st.counters[PROBES] += i
            return send(st, b)
    # probe budget spent (vanishingly rare): the least-loaded bin always has spare capacity
    st.counters[PROBES] += count
    st.counters[FALLBACKS] += 1
    return send(st, least_loaded_bin(st))


@hot(inline=True)
def round_robin(locate, choice, key, st):
    """The candidates in turn, ignoring load."""
    origin, count = locate(key, st)
    i = st.counters[RR_NEXT]
    if i >= count:
        i = 0
    st.counters[RR_NEXT] = i + 1
    return send(st, choice(origin, i, st))
