"""Grouping states stacked one row per source, as the compiled event loop (`topo.sim.loop`) takes them: a state is
a named tuple of arrays and named tuples of arrays (a compiled strategy's `State`, FISH's `FishState`), and the
stack has the same shape with each array one row per source."""

from __future__ import annotations

import numpy as np


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
