"""Grouping states stacked one row per source, as the compiled event loop (`topo.sim.loop`) takes them: a state is
a named tuple of arrays and named tuples of arrays (a compiled strategy's `State`, FISH's `FishState`), and the
stack has the same shape with each array one row per source; in compiled code `state_row` and `fish_row` give
one source's state as views of its rows."""

from __future__ import annotations

import numpy as np
from numba import njit

from groupings.adaptive.fish_epochs import EpochCounters
from groupings.adaptive.fish_route import FishState
from groupings.compiled.state import State, Summary


def _is_record(value) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def shapes(state) -> list:
    """Every array's shape, depth first: states stack only if all sources' agree."""
    return [shapes(part) if _is_record(part) else part.shape for part in state]


def stacked(states: list) -> tuple:
    """The sources' states as one tuple of the same shape, each array stacked one row per source."""
    first = states[0]
    return tuple(stacked([st[k] for st in states]) if _is_record(part) else np.stack([st[k] for st in states])
                 for k, part in enumerate(first))


def unstack(stack: tuple, state, s: int) -> None:
    """Copy source s's rows back into its own state's arrays."""
    for rows, part in zip(stack, state, strict=True):
        if _is_record(part):
            unstack(rows, part, s)
        else:
            part[...] = rows[s]


@njit(cache=True, inline="always")
def state_row(stack, s):
    # source s's grouping state: the rows of the stacked fields (views, so routing updates the stack)
    f = stack
    m = f[7]
    return State(f[0][s], f[1][s], f[2][s], f[3][s], f[4][s], f[5][s], f[6][s],
                 Summary(m[0][s], m[1][s], m[2][s], m[3][s], m[4][s], m[5][s], m[6][s], m[7][s], m[8][s], m[9][s],
                         m[10][s], m[11][s]), f[8][s])


@njit(cache=True, inline="always")
def fish_row(f, s):
    # source s's FISH state: the rows of the stacked fields (views)
    c = f[0]
    return FishState(EpochCounters(c[0][s], c[1][s], c[2][s], c[3][s], c[4][s], c[5][s], c[6][s], c[7][s]),
                     f[1][s], f[2][s], f[3][s], f[4][s], f[5][s], f[6][s], f[7][s], f[8][s], f[9][s], f[10][s])
