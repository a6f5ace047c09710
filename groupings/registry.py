"""Strategies by name: `register` adds one, `make` builds an instance, `names` and `describe` list them.

The registry knows no strategy: the compiled catalogue (`groupings.compiled.catalog`) and every module of
`groupings.adaptive` register theirs when imported, which the registry does the first time it is asked for a
name (`STRATEGY_PACKAGES`). A strategy may come with a
controller (one per run, shared by every source) and a worker delegation (the worker side of its feedback);
the factory, the controller and the delegation all receive the same resolved parameters.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .checks import check_workers
from .params import Param, resolve, shown_default

Factory = Callable[[int, int, dict, Any], Any]  # (workers, seed, params, controller) -> grouping
ControllerFactory = Callable[[int, int, dict], Any]  # (workers, seed, params) -> Controller
DelegationFactory = Callable[[int, dict], Any]  # (workers, params) -> worker delegation

# names() lists the compiled catalogue first (in its order), then these (when registered), then any other by name
ADAPTIVE_ORDER = ("cg", "fish", "gedik", "albic", "lasg", "flink_adaptive", "kafka_adaptive")
COMPILED_PACKAGE = "groupings.compiled."


@dataclass(frozen=True)
class Entry:
    """A registered strategy: how to build its per-source groupings, its controller and its delegation."""

    name: str
    factory: Factory
    params: tuple[Param, ...] = ()
    doc: str = ""
    controller: ControllerFactory | None = None
    delegation: DelegationFactory | None = None
    origin: str = ""  # module and name of the factory


_ENTRIES: dict[str, Entry] = {}
STRATEGY_PACKAGES = ("groupings.compiled.catalog", "groupings.adaptive")  # imported on the first lookup; they register
_LOADED: list[str] = []  # the packages imported so far (set before each import: a module may look a name up)


def _load_strategies() -> None:
    """Import the strategy packages once, so that every strategy has registered itself."""
    for package in STRATEGY_PACKAGES:
        if package not in _LOADED:
            _LOADED.append(package)
            importlib.import_module(package)


def register(
    name: str,
    factory: Factory,
    params: tuple[Param, ...] = (),
    doc: str = "",
    controller: ControllerFactory | None = None,
    delegation: DelegationFactory | None = None,
) -> None:
    """Add strategy `name`; a name already taken by another factory is a ValueError (re-imports are fine)."""
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise ValueError(f"a grouping name is a lower-case identifier (got {name!r})")
    params = tuple(params)
    if not all(isinstance(p, Param) for p in params):
        raise ValueError(f"grouping {name}: params must be a tuple of Param")
    seen = [p.name for p in params]
    if len(set(seen)) != len(seen):
        raise ValueError(f"grouping {name} declares a parameter twice: {seen}")
    owner = getattr(factory, "__self__", None)  # a class's factory classmethod names the class, not its base
    where = owner if isinstance(owner, type) else factory
    origin = f"{getattr(where, '__module__', '')}.{getattr(where, '__qualname__', '')}"
    old = _ENTRIES.get(name)
    if old is not None and old.origin != origin:  # the same factory again is a module being re-imported
        raise ValueError(f"grouping {name!r} is already registered by {old.origin}")
    _ENTRIES[name] = Entry(name, factory, params, doc, controller, delegation, origin)


def names() -> list[str]:
    """Names of every registered strategy: compiled ones, then adaptive ones, in a stable order."""
    _load_strategies()
    compiled = [n for n, e in _ENTRIES.items() if e.origin.startswith(COMPILED_PACKAGE)]
    first = [*compiled, *(n for n in ADAPTIVE_ORDER if n in _ENTRIES)]
    return first + sorted(set(_ENTRIES) - set(first))


def lookup(name: Any) -> Entry:
    """The entry of strategy `name` (case, surrounding blanks and - for _ ignored, so `flink-adaptive` names
    `flink_adaptive` as the production systems spell it); a one-line ValueError if unknown."""
    _load_strategies()
    entry = _ENTRIES.get(name.strip().lower().replace("-", "_")) if isinstance(name, str) else None
    if entry is None:
        raise ValueError(f"unknown grouping {name!r} (valid: {', '.join(names())})")
    return entry


def _resolved(entry: Entry, workers: Any, params: Mapping[str, Any]) -> tuple[int, dict]:
    workers = check_workers(workers)
    return workers, resolve(entry.name, entry.params, workers, params)


def _check_seed(seed: Any) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer (got {seed!r})")
    return int(seed)


def make(name: str, workers: int, seed: int = 0, controller: Any = None, **params: Any) -> Any:
    """A fresh grouping `name` for one source over `workers` workers; `seed` drives only its random choices.

    For a strategy with a controller, pass the run's shared controller (from `make_controller`); without one
    the grouping gets a private controller. The grouping is attached to the controller (once) here.
    """
    entry = lookup(name)
    workers, values = _resolved(entry, workers, params)
    seed = _check_seed(seed)
    if entry.controller is None:
        if controller is not None:
            raise ValueError(f"grouping {entry.name} takes no controller")
    elif controller is None:
        controller = entry.controller(workers, seed, dict(values))
    elif getattr(controller, "workers", workers) != workers:
        raise ValueError(f"the controller serves {controller.workers} workers, not {workers}")
    grouping = entry.factory(workers, seed, values, controller)
    if controller is not None and not any(s is grouping for s in controller.sources):
        controller.attach(grouping)
    return grouping


def make_controller(name: str, workers: int, seed: int = 0, **params: Any) -> Any:
    """The run's shared controller for strategy `name`, or None when the strategy has none."""
    entry = lookup(name)
    workers, values = _resolved(entry, workers, params)
    seed = _check_seed(seed)
    return None if entry.controller is None else entry.controller(workers, seed, values)


def make_delegation(name: str, workers: int, **params: Any) -> Any:
    """The worker side of strategy `name`'s feedback (one per run), or None when it has none."""
    entry = lookup(name)
    workers, values = _resolved(entry, workers, params)
    return None if entry.delegation is None else entry.delegation(workers, values)


def describe(name: str, workers: int | None = None) -> dict:
    """What `--help` and the README show of a strategy: its doc and its parameters (name, type, default, help).

    Defaults that follow the worker count are shown as a formula, or as values for `workers` when given.
    """
    entry = lookup(name)
    params = []
    for p in entry.params:
        row = {"name": p.name, "type": p.kind.__name__, "default": shown_default(p, entry.params, workers)}
        row["help"] = p.doc
        if p.choices:
            row["choices"] = list(p.choices)
        if p.duration:
            row["duration"] = True
        params.append(row)
    return {
        "name": entry.name,
        "doc": entry.doc,
        "params": params,
        "controller": entry.controller is not None,
        "delegation": entry.delegation is not None,
    }


def import_submodules(package: str, path: Iterable[str]) -> list[str]:
    """Import every module of package `package` found on `path` (they register themselves), in name order.

    A module that fails to import raises ImportError naming it: a broken strategy is never silently missing.
    """
    loaded = []
    for info in sorted(pkgutil.iter_modules(list(path)), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = f"{package}.{info.name}"
        try:
            importlib.import_module(module)
        except Exception as err:
            raise ImportError(f"grouping module {module} failed to import: {err}") from err
        loaded.append(module)
    return loaded
