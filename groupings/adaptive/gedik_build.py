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
from .gedik_penalty import _best, _floor, _frontier, _penalty, _penalty_after, _refresh, _summarise

SCAN, REDIST, READJ = 0, 1, 2
BUILDS = ("scan", "redist", "readj")

MAX_MOVES = 5  # Readj moves an item at most this often (the paper's c; it saw no difference from unlimited)
_TIE = 1e-12  # relative slack when comparing penalties, so rounding noise never counts as an improvement


# --- the three construction algorithms (compiled) ---------------------------------------------------------------


@njit(cache=True)
def _scan(weights, f, old, n, counted, thetas, m0, mbar, uid, base):
    """Algorithm 2: each key in decreasing frequency goes to the channel of lowest utility. `base` is each
    channel's load before any tracked key is placed (zeros: rho over the partial H_p alone, as the paper says)."""
    r = f.size
    loads = base.copy()
    totals = np.zeros(3)
    for k in range(3):
        totals[k] = loads[k].sum()
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
    for done in range(r):
        _summarise(loads, hi, lo1, lo1_at, lo2)
        count = _frontier(loads, counted, n, lo1_at, keep, cand)
        best_d, best_l, best_u = -1, -1, np.inf
        evals += n * (r - done)  # the algorithm weighs every channel of every key left; we score far fewer
        for d in range(r):
            if placed[d]:
                continue
            scale = f[d] if f[d] > 0 else 1e-300
            # a key whose every placement scores at least the best so far cannot be the first best (the margin
            # covers a last-bit difference of pow and log1p between the bound and the score)
            bound = _floor(totals, counted, thetas, n, hi, lo2, weights, d, m, mbar, uid) / scale * (1 - 1e-9)
            if bound >= best_u:
                # the keys come by decreasing frequency, and the bound per unit of frequency only grows as it falls
                # (a lighter key raises the total less, and U grows with rho): no later key can win either (the
                # factor covers pow's last bit, not correctly rounded)
                if bound >= best_u * (1 + 1e-12):
                    break
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
    """Algorithm 4: from the old placement, apply the move or swap of best utility gain per frequency moved among
    those that improve the balance, until none does. The gain may be negative: a readjustment that balances better
    at a migration cost greater than the balance it buys is still taken when it is the best there is (the paper
    stops only when no candidate qualifies; stopping at the first negative gain left Readj less balanced than Scan
    and Redist and migrating least, the opposite of Fig. 3)."""
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
        best_g, best_1, best_2, best_j, best_dm = -np.inf, -1, -1, -1, 0.0
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
            break  # no readjustment improves the balance
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
    *,
    base: np.ndarray | None = None,
    mbar: float | None = None,
    count_constant: bool = False,
) -> Placement:
    """Place the tracked keys (frequencies `f`, sorted decreasing) on `n` channels with Scan, Redist or Readj.

    `old` is p^t(d) of each tracked key (channel numbers >= n mean a removed channel), `hc_new` its channel
    under the new consistent hash H_c^{t+1}; `dropped_f` and `dropped_moves` are D_o, the keys no longer
    tracked: their frequencies and whether H_c^{t+1} moves them away from p^t.

    The keywords are other readings of the paper's text, for `gedik-scan-readings`, and leave the defaults as
    we read it: `base` (3 x n, Scan only) is each channel's load before the tracked keys are placed, `mbar`
    replaces Eq. 18's normaliser, and `count_constant` keeps constant resources in rho.
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
    if mbar is None:
        mbar = (float(weights[0].sum()) + float(beta(kinds[0], dropped_f).sum())) / n
    if n == 1 or f.size == 0:
        channels = np.zeros(f.size, np.int64) if n == 1 else hc_new.copy()
        m = m0 + migration_cost(f, old, channels, kinds[0])
        return Placement(channels.astype(np.int32), m, mbar)
    # a constant resource function is balanced by the consistent hash for free: it stays out of rho (Section 4.4)
    counted = np.array([count_constant or k != CONSTANT for k in kinds])
    thetas = np.array([theta(a, n) for a in alphas])
    uid = UTILITIES.index(utility_name)
    if method == "scan":
        channels, m, evals = _scan(weights, f, old, n, counted, thetas, m0, mbar, uid,
                                   np.zeros((3, n)) if base is None else np.asarray(base, dtype=np.float64))
    elif method == "redist":
        channels, m, evals = _redist(weights, f, old, n, counted, thetas, m0, mbar, uid)
    else:
        start = np.where(old < n, old, hc_new)  # keys of removed channels restart from H_c^{t+1}
        channels, m, evals = _readj(weights, f, old, start, n, counted, thetas, m0, mbar, uid)
    return Placement(channels.astype(np.int32), float(m), mbar, int(evals))
