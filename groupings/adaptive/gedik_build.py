"""Building Gedik's explicit hash: Scan, Redist and Readj, the paper's three construction algorithms.

Every algorithm places the tracked keys D_p^{t+1} on N^{t+1} channels, scoring a candidate placement with the
utility U(rho, gamma) of `gedik_cost`, from the balance penalty rho over the keys placed so far and the migration
penalty gamma; lower is better. The compiled kernels keep rho up to date as keys are added, moved or swapped,
without recomputing every channel's load. Keys reach the builders already sorted by decreasing frequency (ties
by key), so every build is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .gedik_cost import CONSTANT, UTILITIES, beta, migration_cost, theta, utility

SCAN, REDIST, READJ = 0, 1, 2
BUILDS = ("scan", "redist", "readj")

MAX_MOVES = 5  # Readj moves an item at most this often (the paper's c; it saw no difference from unlimited)
_TIE = 1e-12  # relative slack when comparing penalties, so rounding noise never counts as an improvement


# --- the balance penalty, kept up to date as keys are placed (compiled) -----------------------------------------


@njit(cache=True, inline="always")
def _spread(hi, lo, total, t, n):
    """rho_k of Eq. 19 from the max, min and total load: the max-min gap over the allowed gap theta_k * mean."""
    if total <= 0.0:
        return 0.0
    return (hi - lo) / (t * total / n)


@njit(cache=True, inline="always")
def _mean_of(prod, used):
    """Eq. 20's geometric mean over the resources that count."""
    if used == 0:
        return 0.0
    return prod ** (1.0 / used)


@njit(cache=True)
def _extremes(loads, k):
    """Indices of the 3 largest and 3 smallest loads of resource k (-1 where there are fewer channels)."""
    n = loads.shape[1]
    order = np.argsort(loads[k])
    top = np.full(3, -1, np.int64)
    bottom = np.full(3, -1, np.int64)
    for a in range(min(3, n)):
        bottom[a] = order[a]
        top[a] = order[n - 1 - a]
    return top, bottom


@njit(cache=True)
def _penalty(loads, totals, counted, thetas, n):
    """rho of the current loads."""
    prod = 1.0
    used = 0
    for k in range(3):
        if counted[k]:
            row = loads[k]
            prod *= _spread(row.max(), row.min(), totals[k], thetas[k], n)
            used += 1
    return _mean_of(prod, used)


@njit(cache=True, inline="always")
def _penalty_after(loads, totals, counted, thetas, n, tops, bottoms, weights, d1, i, d2, j):
    """rho after key d1 goes from channel i to j and key d2 (-1: none) from j to i; the totals stay."""
    prod = 1.0
    used = 0
    for k in range(3):
        if not counted[k]:
            continue
        x = weights[k, d1] - (weights[k, d2] if d2 >= 0 else 0.0)
        vi = loads[k, i] - x
        vj = loads[k, j] + x
        hi = max(vi, vj)
        lo = min(vi, vj)
        for a in range(3):  # the largest load on a channel other than i and j
            c = tops[k, a]
            if c >= 0 and c != i and c != j:
                hi = max(hi, loads[k, c])
                break
        for a in range(3):
            c = bottoms[k, a]
            if c >= 0 and c != i and c != j:
                lo = min(lo, loads[k, c])
                break
        prod *= _spread(hi, lo, totals[k], thetas[k], n)
        used += 1
    return _mean_of(prod, used)


@njit(cache=True)
def _refresh(loads, tops, bottoms):
    """Recompute the 3 largest and 3 smallest channels of every resource."""
    for k in range(3):
        top, bottom = _extremes(loads, k)
        tops[k] = top
        bottoms[k] = bottom


@njit(cache=True)
def _summarise(loads, hi, lo1, lo1_at, lo2):
    """Per resource: the largest load, the smallest (and where), and the second smallest."""
    n = loads.shape[1]
    for k in range(3):
        hi[k] = -np.inf
        lo1[k] = np.inf
        lo2[k] = np.inf
        lo1_at[k] = -1
        for c in range(n):
            v = loads[k, c]
            hi[k] = max(hi[k], v)
            if v < lo1[k]:
                lo2[k] = lo1[k]
                lo1[k] = v
                lo1_at[k] = c
            elif v < lo2[k]:
                lo2[k] = v


@njit(cache=True, inline="always")
def _penalty_add(loads, totals, counted, thetas, n, hi, lo1, lo1_at, lo2, weights, d, channel):
    """rho after adding key d to `channel` (O(1) per resource from the summary of the loads)."""
    prod = 1.0
    used = 0
    for k in range(3):
        if not counted[k]:
            continue
        v = loads[k, channel] + weights[k, d]
        top = max(hi[k], v)
        low = lo2[k] if lo1_at[k] == channel else lo1[k]
        low = min(low, v)
        prod *= _spread(top, low, totals[k] + weights[k, d], thetas[k], n)
        used += 1
    return _mean_of(prod, used)


@njit(cache=True)
def _frontier(loads, counted, n, lo1_at, keep, cand):
    """The channels worth scoring for a key, in channel order, into `cand` (and marked in `keep`): each resource's
    least-loaded channel (adding there may raise the minimum), and every channel that no lower-numbered one
    matches or beats on every counted resource. Any other channel, unless it is the key's own, scores no better
    than an earlier one (rho grows with the loads of the channel added to, and that channel's being least loaded
    or the key's own only lowers its score), so it can never be the first best: Scan and Redist pick the same
    channel scoring these only. Returns how many there are."""
    count = 0
    for c in range(n):
        kept = True
        for i in range(count):
            e = cand[i]
            beaten = True
            for k in range(3):
                if counted[k] and loads[k, e] > loads[k, c]:
                    beaten = False
                    break
            if beaten:
                kept = False
                break
        for k in range(3):
            if counted[k] and lo1_at[k] == c:
                kept = True
        keep[c] = kept
        if kept:
            cand[count] = c
            count += 1
    return count


@njit(cache=True, inline="always")
def _score(loads, totals, counted, thetas, n, hi, lo1, lo1_at, lo2, weights, d, channel, home, m, mbar, uid):
    """U of key d on `channel` (its old channel `home` costs no migration)."""
    a = _penalty_add(loads, totals, counted, thetas, n, hi, lo1, lo1_at, lo2, weights, d, channel)
    moved = weights[0, d] if channel != home else 0.0
    return utility(uid, a, (m + moved) / mbar if mbar > 0 else 0.0)


@njit(cache=True, inline="always")
def _best(loads, totals, counted, thetas, n, hi, lo1, lo1_at, lo2, weights, d, home, m, mbar, uid, scale, keep,
          cand, count, best_u):
    """The first channel, among `_frontier`'s and the key's own (in channel order), whose U per unit of `scale`
    is below `best_u`, and that U; (-1, best_u) when none is."""
    best = -1
    own = 0 <= home < n and not keep[home]  # the key's own channel, scored in its place among the frontier's
    for i in range(count + 1):
        c = cand[i] if i < count else n
        if own and home < c:
            u = _score(loads, totals, counted, thetas, n, hi, lo1, lo1_at, lo2, weights, d, home, home, m, mbar,
                       uid) / scale
            if u < best_u:
                best, best_u = home, u
            own = False
        if i < count:
            u = _score(loads, totals, counted, thetas, n, hi, lo1, lo1_at, lo2, weights, d, c, home, m, mbar,
                       uid) / scale
            if u < best_u:
                best, best_u = c, u
    return best, best_u


@njit(cache=True, inline="always")
def _floor(totals, counted, thetas, n, hi, lo2, weights, d, m, mbar, uid):
    """A lower bound of U for key d on any channel: adding it leaves the largest load at least `hi` and the
    smallest at most the second smallest `lo2`, and its migration at least nothing."""
    prod = 1.0
    used = 0
    for k in range(3):
        if counted[k]:
            prod *= max(0.0, _spread(hi[k], lo2[k], totals[k] + weights[k, d], thetas[k], n))
            used += 1
    return utility(uid, _mean_of(prod, used), m / mbar if mbar > 0 else 0.0)


# --- the three construction algorithms (compiled) ---------------------------------------------------------------


@njit(cache=True)
def _scan(weights, f, old, n, counted, thetas, m0, mbar, uid):
    """Algorithm 2: each key in decreasing frequency goes to the channel of lowest utility."""
    r = f.size
    loads = np.zeros((3, n))
    totals = np.zeros(3)
    hi, lo1, lo2 = np.zeros(3), np.zeros(3), np.zeros(3)
    lo1_at = np.zeros(3, np.int64)
    out = np.empty(r, np.int64)
    keep, cand = np.zeros(n, np.bool_), np.empty(n, np.int64)
    m = m0
    evals = 0
    for d in range(r):
        _summarise(loads, hi, lo1, lo1_at, lo2)
        count = _frontier(loads, counted, n, lo1_at, keep, cand)
        evals += n  # the algorithm weighs every channel; `_frontier` skips the ones that cannot win
        best, _ = _best(loads, totals, counted, thetas, n, hi, lo1, lo1_at, lo2, weights, d, old[d], m, mbar, uid,
                        1.0, keep, cand, count, np.inf)
        out[d] = best
        if best != old[d]:
            m += weights[0, d]
        for k in range(3):
            loads[k, best] += weights[k, d]
            totals[k] += weights[k, d]
    return out, m, evals


@njit(cache=True)
def _redist(weights, f, old, n, counted, thetas, m0, mbar, uid):
    """Algorithm 3: repeatedly place the (key, channel) pair of lowest utility per unit of frequency."""
    r = f.size
    loads = np.zeros((3, n))
    totals = np.zeros(3)
    hi, lo1, lo2 = np.zeros(3), np.zeros(3), np.zeros(3)
    lo1_at = np.zeros(3, np.int64)
    out = np.full(r, -1, np.int64)
    placed = np.zeros(r, np.bool_)  # D_c is the keys not placed yet (the pseudocode omits its upkeep)
    keep, cand = np.zeros(n, np.bool_), np.empty(n, np.int64)
    m = m0
    evals = 0
    for _ in range(r):
        _summarise(loads, hi, lo1, lo1_at, lo2)
        count = _frontier(loads, counted, n, lo1_at, keep, cand)
        best_d, best_l, best_u = -1, -1, np.inf
        for d in range(r):
            if placed[d]:
                continue
            evals += n  # the algorithm weighs every channel; `_frontier` skips the ones that cannot win
            scale = f[d] if f[d] > 0 else 1e-300
            # a key whose every placement scores at least the best so far cannot be the first best (the margin
            # covers a last-bit difference of pow and log1p between the bound and the score)
            if _floor(totals, counted, thetas, n, hi, lo2, weights, d, m, mbar, uid) / scale * (1 - 1e-9) >= best_u:
                continue
            channel, best_u = _best(loads, totals, counted, thetas, n, hi, lo1, lo1_at, lo2, weights, d, old[d], m,
                                    mbar, uid, scale, keep, cand, count, best_u)
            if channel >= 0:
                best_d, best_l = d, channel
        out[best_d] = best_l
        placed[best_d] = True
        if best_l != old[best_d]:
            m += weights[0, best_d]
        for k in range(3):
            loads[k, best_l] += weights[k, best_d]
            totals[k] += weights[k, best_d]
    return out, m, evals


@njit(cache=True, inline="always")
def _moved(w, was, frm, to):
    """Eq. 22 for one item going from channel frm to channel to: +w leaving its old channel, -w coming back."""
    return w * ((1.0 if was == frm else 0.0) - (1.0 if was == to else 0.0))


@njit(cache=True)
def _relocate(loads, weights, cur, moves, d, to):
    loads[:, cur[d]] -= weights[:, d]
    loads[:, to] += weights[:, d]
    cur[d] = to
    moves[d] += 1


@njit(cache=True)
def _readj(weights, f, old, start, n, counted, thetas, m0, mbar, uid):
    """Algorithm 4: from the old placement, apply the move or swap of best utility gain per frequency moved."""
    r = f.size
    cur = start.copy()
    loads = np.zeros((3, n))
    totals = np.zeros(3)
    m = m0
    for d in range(r):
        loads[:, cur[d]] += weights[:, d]
        totals += weights[:, d]
        if cur[d] != old[d]:
            m += weights[0, d]  # keys of removed channels went to their new consistent-hash channel
    tops = np.full((3, 3), -1, np.int64)
    bottoms = np.full((3, 3), -1, np.int64)
    moves = np.zeros(r, np.int64)
    evals = 0
    while True:
        _refresh(loads, tops, bottoms)
        rho = _penalty(loads, totals, counted, thetas, n)
        # the utility now, held fixed while candidates are scored (the pseudocode's u = 0 start is a slip)
        u = utility(uid, rho, m / mbar if mbar > 0 else 0.0)
        best_g, best_1, best_2, best_j, best_dm = 0.0, -1, -1, -1, 0.0
        for d1 in range(r):
            if moves[d1] >= MAX_MOVES:
                continue
            i = cur[d1]
            for j in range(n):
                if j == i:
                    continue
                # a move <i, d1, j, nothing>
                evals += 1
                a = _penalty_after(loads, totals, counted, thetas, n, tops, bottoms, weights, d1, i, -1, j)
                if a < rho * (1.0 - _TIE):  # only readjustments that improve the balance (the pseudocode's break)
                    dm = _moved(weights[0, d1], old[d1], i, j)
                    u2 = utility(uid, a, (m + dm) / mbar if mbar > 0 else 0.0)
                    g = (u - u2) / f[d1] if f[d1] > 0 else 0.0
                    if g > best_g:
                        best_g, best_1, best_2, best_j, best_dm = g, d1, -1, j, dm
            # swaps <i, d1, j, d2>, each pair once
            for d2 in range(d1 + 1, r):
                j = cur[d2]
                if j == i or moves[d2] >= MAX_MOVES or f[d1] == f[d2]:
                    continue
                evals += 1
                a = _penalty_after(loads, totals, counted, thetas, n, tops, bottoms, weights, d1, i, d2, j)
                if a < rho * (1.0 - _TIE):
                    dm = _moved(weights[0, d1], old[d1], i, j) + _moved(weights[0, d2], old[d2], j, i)
                    u2 = utility(uid, a, (m + dm) / mbar if mbar > 0 else 0.0)
                    g = (u - u2) / abs(f[d1] - f[d2])
                    if g > best_g:
                        best_g, best_1, best_2, best_j, best_dm = g, d1, d2, j, dm
        if best_1 < 0:
            break  # no readjustment improves the utility
        i = cur[best_1]
        m += best_dm
        _relocate(loads, weights, cur, moves, best_1, best_j)
        if best_2 >= 0:
            _relocate(loads, weights, cur, moves, best_2, i)
    return cur, m, evals


# --- the entry point --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """A built explicit hash: the channel of every tracked key and the migration cost the build counted."""

    channels: np.ndarray  # int32[R], aligned with the keys given
    migration: float  # m at the end: D_o's cost plus that of the tracked keys that moved (Eq. 18's numerator)
    ideal: float  # m-bar: sum over D_a of beta_s(f) / N^{t+1}
    evaluations: int = 0  # candidate placements scored (a machine-independent measure of the build's work)


def build(
    method: str,
    f: np.ndarray,
    old: np.ndarray,
    hc_new: np.ndarray,
    n: int,
    kinds: tuple[int, int, int],
    alphas: tuple[float, float, float],
    utility_name: str = "apm",
    dropped_f: np.ndarray | None = None,
    dropped_moves: np.ndarray | None = None,
) -> Placement:
    """Place the tracked keys (frequencies `f`, sorted decreasing) on `n` channels with Scan, Redist or Readj.

    `old` is p^t(d) of each tracked key (channel numbers >= n mean a removed channel), `hc_new` its channel
    under the new consistent hash H_c^{t+1}; `dropped_f` and `dropped_moves` are D_o, the keys no longer
    tracked: their frequencies and whether H_c^{t+1} moves them away from p^t.
    """
    if method not in BUILDS:
        raise ValueError(f"build must be one of {', '.join(BUILDS)} (got {method!r})")
    if utility_name not in UTILITIES:
        raise ValueError(f"utility must be one of {', '.join(UTILITIES)} (got {utility_name!r})")
    if n < 1:
        raise ValueError(f"a partitioning function needs at least one channel (got {n})")
    f = np.ascontiguousarray(f, dtype=np.float64)
    old = np.ascontiguousarray(old, dtype=np.int64)
    hc_new = np.ascontiguousarray(hc_new, dtype=np.int64)
    if not (f.shape == old.shape == hc_new.shape) or f.ndim != 1:
        raise ValueError("f, old and hc_new must be one-dimensional and of the same length")
    if f.size > 1 and np.any(np.diff(f) > 0):
        raise ValueError("the tracked keys must come sorted by decreasing frequency")
    if hc_new.size and (hc_new.min() < 0 or hc_new.max() >= n):
        raise ValueError(f"hc_new must name channels in [0, {n})")
    dropped_f = np.zeros(0) if dropped_f is None else np.asarray(dropped_f, dtype=np.float64)
    dropped_moves = np.zeros(0, bool) if dropped_moves is None else np.asarray(dropped_moves, dtype=bool)
    if dropped_f.shape != dropped_moves.shape:
        raise ValueError("dropped_f and dropped_moves must be of the same length")
    weights = np.ascontiguousarray(np.stack([beta(k, f) for k in kinds]))
    m0 = float(beta(kinds[0], dropped_f[dropped_moves]).sum())
    # Eq. 18's normaliser over D_a = tracked now or before (the pseudocode's D_p^{t+1} or D_n disagree with it)
    mbar = (float(weights[0].sum()) + float(beta(kinds[0], dropped_f).sum())) / n
    if n == 1 or f.size == 0:
        channels = np.zeros(f.size, np.int64) if n == 1 else hc_new.copy()
        m = m0 + migration_cost(f, old, channels, kinds[0])
        return Placement(channels.astype(np.int32), m, mbar)
    # a constant resource function is balanced by the consistent hash for free: it stays out of rho (Section 4.4)
    counted = np.array([k != CONSTANT for k in kinds])
    thetas = np.array([theta(a, n) for a in alphas])
    uid = UTILITIES.index(utility_name)
    if method == "scan":
        channels, m, evals = _scan(weights, f, old, n, counted, thetas, m0, mbar, uid)
    elif method == "redist":
        channels, m, evals = _redist(weights, f, old, n, counted, thetas, m0, mbar, uid)
    else:
        start = np.where(old < n, old, hc_new)  # keys of removed channels restart from H_c^{t+1}
        channels, m, evals = _readj(weights, f, old, start, n, counted, thetas, m0, mbar, uid)
    return Placement(channels.astype(np.int32), float(m), mbar, int(evals))
