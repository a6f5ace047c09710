"""How routing code is compiled: numba, cached on disk, and without reference counting on the hot path."""

from __future__ import annotations

from collections.abc import Callable

from numba import njit
from numba.core.cpu import CPUTargetOptions

# `_nrt` is numba's own (underscored) switch; should a release drop it, kernels still compile, only slower
_NO_REFCOUNT = {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}


def hot(fn: Callable | None = None, *, inline: bool = False) -> Callable:
    """Compile a routing function: no runtime reference counting, so it must not allocate or keep arrays.

    Every field read from the state tuple would otherwise cost an atomic increment and decrement per message,
    which numba cannot prune across branches: a tenfold slowdown of the per-tuple loops.
    """
    options = {"cache": True, **_NO_REFCOUNT}
    if inline:
        options["inline"] = "always"
    return njit(**options) if fn is None else njit(**options)(fn)
