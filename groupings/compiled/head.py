"""Head/tail split (D-Choices, W-Choices, Round-Robin): a per-source SpaceSaving summary finds the head.

Algorithm 1 of the D-Choices paper: update the heavy-hitter summary with the key, then treat the key as head
when its estimated frequency (count / messages seen by this source) is at least theta.
"""

from __future__ import annotations

from ..dchoices import optimal_choices
from ..jit import hot
from ..spacesaving import head_into, offer
from .state import (
    EPS,
    FIRST_REFRESH,
    FIXED_D,
    HEAD_MESSAGES,
    HEAD_SIZE,
    MESSAGES,
    NEXT_REFRESH,
    REFRESH,
    REFRESHES,
    THETA,
    D,
)


@hot
def in_head(key, st):
    """Count the key in the summary and tell whether it is in the head H = {k : p_k >= theta}."""
    s = st.summary
    slot = offer(s, key)
    if s.counts[slot] >= st.params[THETA] * s.meta[1]:
        st.counters[HEAD_MESSAGES] += 1
        return True
    return False


@hot
def refresh_choices(st):
    """FindOptimalChoices on the current head estimates, at message counts fixed in advance (a fixed d stays)."""
    m = st.counters[MESSAGES]
    if m < st.counters[NEXT_REFRESH]:
        return
    s = st.summary
    p = s.scratch[: head_into(s, st.params[THETA], s.scratch)]
    tail_mass = 1.0
    for i in range(p.size):
        tail_mass -= p[i]
    # estimates overcount, so the head may seem to exceed the whole stream
    tail_mass = max(tail_mass, 0.0)
    fixed = st.counters[FIXED_D]
    st.counters[D] = fixed if fixed else optimal_choices(p, tail_mass, st.loads.size, st.params[EPS])
    st.counters[HEAD_SIZE] = p.size
    st.counters[REFRESHES] += 1
    # recompute often while estimates settle, then every REFRESH messages
    st.counters[NEXT_REFRESH] = m + min(st.counters[REFRESH], max(FIRST_REFRESH, m))
