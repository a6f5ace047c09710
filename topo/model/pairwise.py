"""numpy's float64 sum, bit for bit, in compiled code: numba's own `sum` adds one element after another, numpy
adds pairwise, and the two differ in the last bits, which a summary written by both must not."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _block_sum(a, lo, n):
    # numpy's sum of at most 128 float64s: eight running sums, then the rest one by one
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    m = n - (n % 8)
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def pairwise_sum(a):
    """numpy's float64 sum of `a`, bit for bit: halves (cut at a multiple of 8) summed apart down to blocks of
    128."""
    return pairwise_sum_with(a, new_stack())


@njit(cache=True)
def new_stack():
    """Room for `pairwise_sum_with`'s recursion (64 levels: halving stops at 128 elements)."""
    return np.empty((4, 64))


@njit(cache=True, inline="always")
def pairwise_sum_with(a, stack):
    """`pairwise_sum`, its recursion walked with `stack` (`new_stack`; numba cannot cache a recursive function),
    so that compiled code without reference counting, which cannot allocate, can sum too."""
    los, ns, stage, left = stack[0], stack[1], stack[2], stack[3]
    los[0], ns[0], stage[0] = 0, a.size, 0
    depth, value = 1, 0.0
    while depth:
        top = depth - 1
        lo, n = int(los[top]), int(ns[top])
        if n <= 128:
            value = _block_sum(a, lo, n)  # returned to the frame below
            depth -= 1
            continue
        half = n // 2
        half -= half % 8
        if stage[top] == 0:  # sum the first half
            stage[top] = 1
            los[depth], ns[depth], stage[depth] = lo, half, 0
            depth += 1
        elif stage[top] == 1:  # then the second
            left[top] = value
            stage[top] = 2
            los[depth], ns[depth], stage[depth] = lo + half, n - half, 0
            depth += 1
        else:
            value = left[top] + value
            depth -= 1
    return value
