"""Gedik's balance penalty rho (Eqs. 19-20) kept up to date as the builds (`gedik_build`) place, move and swap
keys, without recomputing every channel's load; and which channels can be a key's best placement at all, so that
Scan and Redist score only those and pick what scoring every channel would pick."""

from __future__ import annotations

import numpy as np
from numba import njit

from .gedik_cost import utility

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
