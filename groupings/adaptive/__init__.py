"""Adaptive strategies, one module each: importing this package imports them all, and each registers itself.

A module here calls `groupings.registry.register(...)` at import time; one that fails to import makes the
first lookup of a grouping name fail, so a broken strategy is never silently missing from `groupings.names()`.
"""

from ..registry import import_submodules

STRATEGY_MODULES = import_submodules(__name__, __path__)
