"""Shared set-up for the whole test session: one local Ray and one Spark, both started in the background as soon as
the selected tests are known, the test files that use Spark run last (so its start overlaps the others), and the
quick runs of the registered experiments."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import pytest

_RAY: dict = {}  # the session's local Ray, started in the background as soon as a selected test will need it


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray (the engine's own `LocalRay`: loopback only, one CPU per core, no dashboard), stopped when the
    session ends."""
    import ray

    from topo.ray_engine.local import LocalRay

    local = _RAY.pop("local", None) or LocalRay()
    local.ready()
    yield ray
    local.join()


_SPARK: dict = {}  # the session's Spark, started in the background as soon as a selected test will need it


def _warm_up(session) -> None:
    """A first small import: its Spark jobs compile the SQL code paths and start the Python workers that every
    Spark test uses, which costs about 9 s the first time and 2 s after."""
    import tempfile
    from pathlib import Path

    from spark.streams_import import ImportSource, import_stream

    with tempfile.TemporaryDirectory(prefix="spark-warm-up-") as tmp:
        csv = Path(tmp, "a.csv")
        csv.write_text("user,ts,v\nu1,3,1\nu2,1,2\nu1,5,3\n")
        import_stream(session, ImportSource((str(csv),), "csv", key_col="user", ts_col="ts", value_col="v"),
                      Path(tmp, "out"), partitions=2)


def _start_spark() -> None:
    try:
        from spark.session import get_session

        session = get_session("local[2]", app="tests")
        _warm_up(session)
        _SPARK["session"] = session
    except BaseException as exc:  # noqa: BLE001 - re-raised in the fixture, where a test sees it
        _SPARK["error"] = exc


def _needs(item, fixture: str) -> bool:
    return fixture in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(session, config, items) -> None:
    """Test files that use Spark run last, in their own order, so that Spark's start overlaps every other file."""
    late = {item.module for item in items if _needs(item, "spark")}
    items[:] = [i for i in items if i.module not in late] + [i for i in items if i.module in late]


def pytest_collection_finish(session) -> None:
    """Start Spark (about 14 s) and Ray (about 4 s) while the tests before the first one that needs them run."""
    if any(_needs(item, "spark") for item in session.items):
        _SPARK["thread"] = threading.Thread(target=_start_spark, name="spark-start", daemon=True)
        _SPARK["thread"].start()
    if any(_needs(item, "ray_session") for item in session.items):
        from topo.ray_engine.local import LocalRay

        _RAY["local"] = LocalRay()


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (two cores) for the whole test session, stopped when it ends."""
    if "thread" not in _SPARK:  # a selection the collection hook did not see (e.g. a plugin added the test)
        _start_spark()
    else:
        _SPARK["thread"].join()
    if "error" in _SPARK:
        raise _SPARK["error"]
    session = _SPARK["session"]
    yield session
    session.stop()


# experiments whose quick run takes more than about 5 s here (fish-ablations 69 s, ray-heterogeneous 39 s, fish-drift
# 31 s, the others 5 to 15 s; dchoices-storm's closed loops about 5 s, the Ray runs of dchoices-storm-ray and
# cg-storm-memory 10 to 30 s; ALBIC's chain experiments 5 to 20 s of HiGHS solves): their tests are marked slow, and
# the default suite never runs them
SLOW_EXPERIMENTS = frozenset({"fish-ablations", "ray-heterogeneous", "fish-drift", "sim-vs-ray", "cg-heterogeneity",
                              "cg-capacity-change", "cg-virtual-workers", "albic-periods", "production-vs-papers",
                              "gedik-sigma", "dchoices-storm", "dchoices-storm-ray", "cg-storm-memory", "albic-cola",
                              "albic-scale-in", "albic-wikipedia"})


class QuickRuns(Mapping):
    """Every registered experiment in quick mode, by name: (its output directory, its numbers), each run the first
    time a test asks for it and kept for the session (tests of several files read the same runs)."""

    def __init__(self, base) -> None:
        import experiments

        self.base = base
        self.names = list(experiments.names())
        self.done: dict = {}

    def __getitem__(self, name: str):
        import experiments

        if name not in self.done:
            out = self.base / name
            out.mkdir()
            self.done[name] = (out, experiments.get(name).run(out, True))
        return self.done[name]

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


@pytest.fixture(scope="session")
def outputs(tmp_path_factory, ray_session):
    """Quick runs of the registered experiments (`QuickRuns`); the deployment ones use the shared Ray session."""
    return QuickRuns(tmp_path_factory.mktemp("results"))


def experiment_params(names) -> list:
    """Experiment names as test parameters, those in SLOW_EXPERIMENTS marked slow."""
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_EXPERIMENTS else n for n in names]
