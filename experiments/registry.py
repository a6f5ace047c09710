"""The registry of experiments: a name, what it reproduces, and a function that runs it into a directory."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Experiment:
    """One reproducible experiment; `run(out_dir, quick)` writes its files and returns its headline numbers."""

    name: str
    paper: str  # which paper and figure or table it reproduces
    claim: str  # the qualitative result the paper reports (what the quick test asserts)
    run: Callable[[Path, bool], dict]
    on_ray: bool = False  # runs Ray actors (a local Ray starts unless one is already up)
    volatile: tuple[str, ...] = ()  # suffixes of the numbers' keys that hold wall-clock times (never compared)
    on_flink: bool = False  # runs Flink jobs (`make flink`)

    @property
    def deterministic(self) -> bool:
        """Its quick numbers, but for the volatile ones, are the same on every run (`reproduce.py --check`)."""
        return not (self.on_ray or self.on_flink)


EXPERIMENTS: dict[str, Experiment] = {}


def register(
    name: str, paper: str, claim: str, on_ray: bool = False, volatile: tuple[str, ...] = (), on_flink: bool = False
) -> Callable[[Callable[[Path, bool], dict]], Callable]:
    """Decorator: add a `run(out_dir, quick) -> dict` function to the registry under `name` (`on_ray`: it runs Ray
    actors; `volatile`: suffixes of the keys of its numbers that are wall-clock times; `on_flink`: it runs Flink
    jobs)."""

    def wrap(fn: Callable[[Path, bool], dict]) -> Callable[[Path, bool], dict]:
        if name in EXPERIMENTS:
            raise ValueError(f"experiment {name!r} is registered twice")
        EXPERIMENTS[name] = Experiment(name, paper, claim, fn, on_ray, volatile, on_flink)
        return fn

    return wrap


PAPERS = ("gedik", "consistent_grouping", "dchoices", "fish", "albic", "engines")  # one folder per paper, and one
# for the engines and the production groupings; experiments that read every folder sit at the top
INFRASTRUCTURE = ("registry", "common", "routing", "provenance", "quoted", "topologies", "fidelity_rows")


def _load_all() -> None:
    # every module of a paper's folder, and every top-level module that is not infrastructure, defines experiments;
    # the folders load in the papers' order, so the registry lists them that way
    root = Path(__file__).parent
    for folder in PAPERS:
        for info in sorted(pkgutil.iter_modules([str(root / folder)]), key=lambda i: i.name):
            importlib.import_module(f"experiments.{folder}.{info.name}")
    for info in pkgutil.iter_modules([str(root)]):
        if not info.ispkg and info.name not in INFRASTRUCTURE:
            importlib.import_module(f"experiments.{info.name}")


def names() -> list[str]:
    """Names of every registered experiment, in registration order."""
    _load_all()
    return list(EXPERIMENTS)


def get(name: str) -> Experiment:
    """The experiment called `name`; ValueError with the valid names otherwise."""
    _load_all()
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r} (valid: {', '.join(EXPERIMENTS)})")
    return EXPERIMENTS[name]
