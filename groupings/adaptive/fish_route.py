"""FISH's per-tuple routing: classes of hot keys (Algorithm 2), candidates, heuristic worker assignment (Algorithm 3).

A tuple is counted (Algorithm 1, `fish_epochs`), its key's class gives d, the candidates are the first d
distinct workers of the key's candidate sequence (clockwise ring points, or the hash family F_1, F_2, ... when
consistent hashing is off), and the tuple goes to the candidate with the least inferred wait C_w * P_w.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..compiled.candidates import ring_successor, ring_walk
from ..hashing import mix64
from ..jit import hot
from .fish_epochs import EPOCH_LEN, SEEN, TOP, TOTAL, EpochCounters, count, lookup

# slots of FishState.flags (int64)
CHK = 0  # 1: classes of hot keys; 0: one d for every hot key, n or D_HOT (W-Choices or D-Choices)
HWA = 1  # 1: least inferred wait C_w * P_w; 0: fewest tuples sent (the "w/o hwa" ablation)
CH = 2  # 1: candidates walk the consistent-hash ring; 0: hash family mod n (the "w/o CH" ablation)
D_MIN = 3  # least number of candidates of a hot key
OFFSET = 4  # where this source starts its scans over all workers (spreads ties across sources)
MESSAGES = 5  # tuples routed so far
HOT_MESSAGES = 6  # tuples whose key was hot when routed
WALK = 7  # number of the current candidate walk (stamps mark the workers it met)
ESTIMATES = 8  # backlog inferences (Eq. 1) done so far
HEARD = 9  # 1 once some ack told a worker's time per tuple
D_HOT = 10  # without CHK: candidates of every hot key (0: all n, W-Choices; d > 0: D-Choices' fixed d)
N_FLAGS = 11

# slots of FishState.clock (float64)
THETA = 0  # hot threshold on frequency
INTERVAL = 1  # T: least engine time between two backlog inferences (seconds)
T_PRI = 2  # engine time of the last inference (NaN before the first clock reading)
N_CLOCK = 3


class FishState(NamedTuple):
    """Everything one FISH source remembers: its counters, its picture of the workers, the ring."""

    counters: EpochCounters
    backlog: np.ndarray  # float64[n]: C_w, tuples this source believes still wait at worker w
    service: np.ndarray  # float64[n]: P_w, seconds per tuple at w (equal placeholders until acks tell)
    sent: np.ndarray  # float64[n]: N_w, tuples this source sent to w so far
    stamp: np.ndarray  # int64[n]: last candidate walk that met w (distinct candidates without clearing)
    scratch: np.ndarray  # int32[n]: the candidates of the tuple being routed
    ring_points: np.ndarray  # uint64[R]: sorted ring positions
    ring_owner: np.ndarray  # int32[R]: worker owning each ring point
    ring_directory: np.ndarray  # int32[2^b]: first ring point at or after each of 2^b equal arcs
    flags: np.ndarray  # int64[N_FLAGS]
    clock: np.ndarray  # float64[N_CLOCK]


# --- Algorithm 2: classes of hot keys ---------------------------------------------------------------------


@hot(inline=True)
def chk_choices(c_k, c_top, workers, d_min):
    """Candidates of a hot key: n / 2^floor(log2(f_top / f_k)), at least d_min, at most n."""
    # f_k and f_top share the denominator (the counters' sum), so their ratio is the ratio of counts
    index = math.floor(math.log2(c_top / c_k)) if c_top > c_k else 0
    d = workers >> index if index < 62 else 0
    least = min(d_min, workers)
    return max(d, least)


@hot(inline=True)
def choices(st, slot, record):
    """d of the key in counter `slot`: its class while hot (never below its M_k), else 2 (PKG-like).

    Without CHK every hot key gets the same d: D_HOT if set (D-Choices), else all n workers (W-Choices).
    With `record`, a hot key's d is remembered as its new M_k and the tuple is counted as hot.
    """
    c = st.counters
    n = st.backlog.size
    cold = min(2, n)
    if c.meta[SEEN] <= c.meta[EPOCH_LEN]:
        return cold  # the first epoch only gathers counts: tiny sums would make every early key look hot
    count_k = c.counts[slot]
    if not count_k > st.clock[THETA] * c.mass[TOTAL]:
        return cold
    if record:
        st.flags[HOT_MESSAGES] += 1
    if not st.flags[CHK]:
        fixed = st.flags[D_HOT]
        # no M_k here: the strategies being ablated give the whole head one d
        return min(fixed, n) if fixed > 0 else n
    d = chk_choices(count_k, c.mass[TOP], n, st.flags[D_MIN])
    if c.choices[slot] < d:
        if record:
            c.choices[slot] = d
    else:
        d = c.choices[slot]
    return min(d, n)  # M_k may predate a resize that removed workers


# --- candidates ---------------------------------------------------------------------------------------


@hot(inline=True)
def _origin(st, key):
    # where the key's candidate sequence starts: its ring successor, or unused by the hash family
    if st.flags[CH]:
        origin, _ = ring_walk(key, st)
        return origin
    return np.uint64(0)


@hot(inline=True)
def _raw_candidate(st, key, origin, i):
    # the i-th worker of the key's sequence; repeats are possible and skipped by the caller
    if st.flags[CH]:
        return ring_successor(origin, i, st)
    # plain mod n, as the paper's baseline: a resize remaps almost every key
    return np.int64(mix64(key, np.uint64(i + 1)) % np.uint64(st.backlog.size))


@hot(inline=True)
def _walk_limit(st):
    # a ring turn meets every worker; the hash family gets a budget it exhausts with odds below e^-64
    return st.ring_points.size if st.flags[CH] else 64 * (st.backlog.size + 1)


@hot(inline=True)
def candidates_into(st, key, d, out):
    """Write the key's first d distinct candidates into `out` (every worker, from the source's offset, if d >= n)."""
    n = st.backlog.size
    if d >= n:
        for i in range(n):
            w = st.flags[OFFSET] + i
            out[i] = w - n if w >= n else w
        return n
    origin = _origin(st, key)
    walk = st.flags[WALK] + 1
    st.flags[WALK] = walk
    found = 0
    i = 0
    limit = _walk_limit(st)
    while found < d and i < limit:
        w = _raw_candidate(st, key, origin, i)
        i += 1
        if st.stamp[w] != walk:
            st.stamp[w] = walk
            out[found] = w
            found += 1
    return found


# --- Algorithm 3: heuristic worker assignment -------------------------------------------------------------


@hot
def drain(backlog, service, elapsed):
    """Eq. 1 over `elapsed` seconds: C_w <- max(0, (C_w P_w - elapsed) / P_w), sends already in C_w."""
    for w in range(backlog.size):
        left = backlog[w] - elapsed / service[w]
        backlog[w] = left if left > 0.0 else 0.0


@hot
def infer_backlogs(st, now):
    """At most every T seconds of engine time, let each worker's inferred backlog drain for the time elapsed."""
    clock = st.clock
    if now != now:
        return  # no engine clock (NaN): backlogs only grow, so choices weigh tuples sent by time per tuple
    if clock[T_PRI] != clock[T_PRI]:
        clock[T_PRI] = now
        return
    elapsed = now - clock[T_PRI]
    if not elapsed > clock[INTERVAL]:
        return
    if not st.flags[HEARD]:
        return  # no time per tuple known yet: keep t_pri, so the first inference covers this time too
    drain(st.backlog, st.service, elapsed)
    clock[T_PRI] = now
    st.flags[ESTIMATES] += 1


@hot(inline=True)
def _wait(st, w):
    # T_w = C_w * P_w (Eq. 2); without hwa, the tuples sent to w
    if st.flags[HWA]:
        return st.backlog[w] * st.service[w]
    return st.sent[w]


@hot(inline=True)
def least_wait(st, key, d):
    """The candidate with the least wait; ties go to the earlier candidate, as in Algorithm 3."""
    found = candidates_into(st, key, d, st.scratch)
    best = st.scratch[0]
    best_wait = _wait(st, best)
    for i in range(1, found):
        w = st.scratch[i]
        t = _wait(st, w)
        if t < best_wait:
            best = w
            best_wait = t
    return best


@hot
def route_fish(keys, out, st, now):
    """Route a batch at engine time `now` (NaN: none): count, classify, assign; as one tuple at a time."""
    infer_backlogs(st, now)
    for j in range(keys.size):
        key = keys[j]
        slot = count(st.counters, key)
        w = least_wait(st, key, choices(st, slot, True))
        st.backlog[w] += 1.0
        st.sent[w] += 1.0
        st.flags[MESSAGES] += 1
        out[j] = w


@hot
def choices_of(st, key):
    """d the key would get now, without counting a tuple (cold if it is not monitored)."""
    slot = lookup(st.counters, key)
    if slot < 0:
        return min(2, st.backlog.size)
    return choices(st, slot, False)


@hot
def hear(workers, service_ms, measured, heard, service, flags):
    """Ack feedback (Algorithm 3's P_w): each worker's most recent positive, finite `service_ms` (ms) becomes its
    `measured` time per tuple (s). -1: a worker outside [0, n), nothing changed; 0: nothing measured; 1: heard,
    and every worker is heard of, so P_w is what was measured (`service` updated); 2: heard, but some workers are
    not yet (the caller fills them with the mean of the others)."""
    n = measured.size
    for i in range(workers.size):
        if workers[i] < 0 or workers[i] >= n:
            return -1
    found = False
    for i in range(workers.size):  # in order: the most recent report of a worker wins
        s = service_ms[i]
        if math.isfinite(s) and s > 0:  # zero means the engine did not measure it
            measured[workers[i]] = s / 1e3
            heard[workers[i]] = True
            found = True
    if not found:
        return 0
    for w in range(n):
        if not heard[w]:
            return 2
    for w in range(n):
        service[w] = measured[w]
    flags[HEARD] = 1
    return 1
