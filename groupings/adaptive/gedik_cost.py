"""Gedik's cost model: what an explicit hash costs in balance and in migration, and how the two are traded.

Resource functions follow the paper's letters: C(onstant) = 1, L(inear) = f, Q(uadratic) = f^2, written
beta_s beta_c beta_n ("LCL": memory linear, computation constant). From them come the balance targets (theta,
Eq. 15, and the tracking threshold delta, Eq. 17), the paper's measures of a placement (channel loads, the
imbalance r and the relative imbalance b, the migration cost, Eqs. 2-11), its balance penalty rho (Eqs. 19-20)
and the utilities U(rho, gamma) that weigh rho against the migration penalty gamma (Eq. 18); lower is better.
The builders that search for a placement of low utility are in `gedik_build`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

CONSTANT, LINEAR, QUADRATIC = 0, 1, 2
LETTERS = {"C": CONSTANT, "L": LINEAR, "Q": QUADRATIC}
RESOURCES = ("s", "c", "n")  # memory, computation, communication

U_A, U_APM, U_APLM, U_ATM, U_ATLM = 0, 1, 2, 3, 4
UTILITIES = ("a", "apm", "aplm", "atm", "atlm")


# --- resource functions and balance targets ---------------------------------------------------------------------


def parse_resources(text: str) -> tuple[int, int, int]:
    """Resource functions (beta_s, beta_c, beta_n) from the paper's three letters; beta_n must be linear."""
    letters = text.strip().upper()
    if len(letters) != 3 or any(ch not in LETTERS for ch in letters):
        raise ValueError(f"resources are three letters of C, L, Q for memory, computation, communication ({text!r})")
    if letters[2] != "L":
        raise ValueError(f"communication load is always linear: the third letter must be L ({text!r})")
    return LETTERS[letters[0]], LETTERS[letters[1]], LETTERS[letters[2]]


def beta(kind: int, f: np.ndarray | float) -> np.ndarray:
    """beta(f): 1, f or f^2 for a constant, linear or quadratic resource function."""
    f = np.asarray(f, dtype=np.float64)
    if kind == CONSTANT:
        return np.ones_like(f)
    if kind == LINEAR:
        return f.copy()
    if kind == QUADRATIC:
        return f * f
    raise ValueError(f"unknown resource function kind {kind}")


def theta(alpha: float, n: int) -> float:
    """Eq. 15: the largest deviation from the mean load, as a share of it, that keeps max/min <= alpha."""
    if alpha < 1 or n < 2:
        raise ValueError(f"theta needs alpha >= 1 and at least 2 channels (got {alpha}, {n})")
    return (alpha - 1.0) / (1.0 + alpha / (n - 1))


def delta(kinds: tuple[int, int, int], alphas: tuple[float, float, float], sigma: float, n: int, domain: int) -> float:
    """Eq. 17: the frequency from which keys are tracked explicitly, min over resources of delta_k."""
    if n < 2:
        return 1.0  # one channel: nothing to balance, the consistent hash alone is exact
    out = 1.0
    for kind, alpha in zip(kinds, alphas, strict=True):
        t = theta(alpha, n)
        if kind == LINEAR:
            out = min(out, sigma * t / n)
        elif kind == QUADRATIC:
            out = min(out, math.sqrt(sigma * t / (domain * n)))
    return out


def refined_delta(
    kinds: tuple[int, int, int],
    alphas: tuple[float, float, float],
    sigma: float,
    n: int,
    domain: int,
    f: np.ndarray,
) -> float:
    """Section 4.1.3's second filter for quadratic resources: delta' from the mean load the tracked keys imply."""
    first = delta(kinds, alphas, sigma, n, domain)
    if QUADRATIC not in kinds or n < 2:
        return first
    f = np.asarray(f, dtype=np.float64)
    rest = max(domain - f.size, 1)
    spread = max(1.0 - float(f.sum()), 0.0) / rest
    out = 1.0
    for kind, alpha in zip(kinds, alphas, strict=True):
        t = theta(alpha, n)
        if kind == LINEAR:
            out = min(out, sigma * t / n)
        elif kind == QUADRATIC:
            # the untracked keys at their worst (all of equal frequency); the paper leaves out the 1/N of the mean
            mean = (float((f * f).sum()) + rest * spread * spread) / n
            out = min(out, math.sqrt(sigma * t * mean))
    return max(first, out)


# --- loads, imbalance, migration (the paper's measures) ---------------------------------------------------------


def channel_loads(f: np.ndarray, channels: np.ndarray, n: int, kind: int) -> np.ndarray:
    """L_k(i) for i < n: the sum of beta_k(f(d)) over the keys d on channel i (an item's load is beta_k(f))."""
    channels = np.asarray(channels, dtype=np.int64)
    if channels.size and (channels.min() < 0 or channels.max() >= n):
        raise ValueError(f"channels must lie in [0, {n})")
    return np.bincount(channels, weights=beta(kind, f), minlength=n).astype(np.float64)


def imbalance(loads: np.ndarray) -> float:
    """r = max_i L(i) / min_i L(i) (Eqs. 2, 4, 6); infinite when a channel has no load and another has some."""
    loads = np.asarray(loads, dtype=np.float64)
    hi, lo = float(loads.max()), float(loads.min())
    if hi <= 0:
        return 1.0
    return hi / lo if lo > 0 else math.inf


def relative_imbalance(ratios: tuple[float, float, float], alphas: tuple[float, float, float]) -> float:
    """Eq. 11: b, the geometric mean of r_k / alpha_k over memory, computation and communication."""
    prod = 1.0
    for r, a in zip(ratios, alphas, strict=True):
        prod *= r / a
    return prod ** (1.0 / 3.0)


def migration_cost(f: np.ndarray, before: np.ndarray, after: np.ndarray, kind_s: int) -> float:
    """Eq. 9: the state that moves, sum of beta_s(f(d)) over the keys whose channel changes."""
    moved = np.asarray(before) != np.asarray(after)
    return float(beta(kind_s, np.asarray(f, dtype=np.float64)[moved]).sum())


# --- the utility (compiled) and the balance penalty of a placement ----------------------------------------------


@njit(cache=True, inline="always")
def utility(uid, rho, gamma):
    """U(rho, gamma): A, APM, APLM, ATM or ATLM (lower is better)."""
    if uid == U_A:
        return rho
    if uid == U_APM:
        return rho + gamma
    if uid == U_APLM:
        return rho + math.log1p(gamma)
    if uid == U_ATM:
        return rho * (1.0 + gamma)
    return rho * (1.0 + math.log1p(gamma))


def balance_penalty(
    f: np.ndarray, channels: np.ndarray, n: int, kinds: tuple[int, int, int], alphas: tuple[float, float, float]
) -> float:
    """rho (Eqs. 19-20) of a (partial) explicit hash: keys of frequencies `f` on `channels`."""
    counted = [k for k in range(3) if kinds[k] != CONSTANT]
    prod = 1.0
    for k in counted:
        loads = channel_loads(f, channels, n, kinds[k])
        total = float(loads.sum())
        if total > 0:
            prod *= (float(loads.max()) - float(loads.min())) / (theta(alphas[k], n) * total / n)
        else:
            prod *= 0.0
    return prod ** (1.0 / len(counted)) if counted else 0.0


def utility_value(name: str, rho: float, gamma: float) -> float:
    """U(rho, gamma) for the utility named `name` (a, apm, aplm, atm, atlm)."""
    if name not in UTILITIES:
        raise ValueError(f"utility must be one of {', '.join(UTILITIES)} (got {name!r})")
    return float(utility(UTILITIES.index(name), float(rho), float(gamma)))
