"""Shared set-up for the whole test session, and what starts in the background as soon as the selected tests are
known: one local Ray, one Spark, and the computations test modules ask for ahead (`ahead.py`: the experiments'
quick runs, the acceptance table's runs). The files whose computations are made ahead run after the others, then
those that use Spark, and last the modules whose own set-up is mostly waiting (a `begin()`: the observed Ray run of
test_observability.py), which begins when that later part starts. So all of it overlaps other files."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pytest
from ahead import AHEAD
from quick_runs import QuickRuns, wanted

_RAY: dict = {}  # the session's local Ray, started in the background as soon as a selected test will need it


def _local_ray():
    """The session's local Ray (the engine's own `LocalRay`: loopback only, one CPU per core, no dashboard), ready;
    started now unless the collection hook started it."""
    if "ready" not in _RAY:
        from topo.ray_engine.local import LocalRay

        local = _RAY.pop("local", None) or LocalRay()
        local.ready()
        _RAY["ready"] = local
    return _RAY["ready"]


@pytest.fixture(scope="session")
def ray_session():
    """The session's local Ray (`_local_ray`), stopped when the session ends."""
    import ray

    local = _local_ray()
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

        session = get_session("local[2]", app="tests", short_jobs=True)  # many jobs of a few rows
        _warm_up(session)
        _SPARK["session"] = session
    except BaseException as exc:  # noqa: BLE001 - re-raised in the fixture, where a test sees it
        _SPARK["error"] = exc


def _needs(item, fixture: str) -> bool:
    return fixture in getattr(item, "fixturenames", ())


def _made_ahead(item) -> bool:
    """The test reads computations made ahead in the background (`ahead.py`)."""
    return _needs(item, "outputs") or hasattr(item.module, "ahead")


def _begins_late(item) -> bool:
    """The test's module has set-up that is mostly waiting (a `begin()` function): it starts when the files after
    the first ones start, and the module runs last."""
    return hasattr(item.module, "begin")


def pytest_collection_modifyitems(session, config, items) -> None:
    """Files run in their own order, but those whose computations are made ahead come after the others (they are
    made meanwhile), then those that use Spark (so that Spark's start overlaps the ones before), and last those
    that begin their own set-up when the second part starts (`_begins_late`)."""
    late = {item.module for item in items if _begins_late(item)}
    spark = {item.module for item in items if _needs(item, "spark")} - late
    ahead = {item.module for item in items if _made_ahead(item)} - spark - late
    items.sort(key=lambda i: 3 if i.module in late else 2 if i.module in spark else 1 if i.module in ahead else 0)


_LATER: dict = {}  # the first test after the first part, and the modules whose set-up begins with it


def _mark_the_later_part(items) -> None:
    later = [i for i in items if _begins_late(i) or _needs(i, "spark") or _made_ahead(i)]
    _LATER["first"] = later[0] if later else None
    _LATER["begin"] = list(dict.fromkeys(i.module for i in later if _begins_late(i)))


def pytest_runtest_setup(item) -> None:
    """The first test of the later part begins the set-up of the modules that run last."""
    if item is _LATER.get("first"):
        for module in _LATER.pop("begin", ()):
            module.begin()


def _start_ahead(items) -> None:
    """Every computation the selected tests will read, in the order of the tests that read them."""
    modules: dict = {}
    for item in items:
        if _made_ahead(item):
            modules.setdefault(item.module, []).append(item)
    for module, selected in modules.items():
        for key, fn, args in getattr(module, "ahead", lambda _: ())(selected):
            AHEAD.submit(key, fn, *args)
        names = wanted(selected)
        if names:
            _quick_runs().start_ahead(names)


def pytest_collection_finish(session) -> None:
    """Start Spark (about 14 s), Ray (about 4 s) and what the modules ask for ahead (about a minute of one core)
    while the tests before the first one that needs them run."""
    _start_ahead(session.items)
    _mark_the_later_part(session.items)
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
# cg-storm-memory 10 to 30 s, ray-recovery and ray-overload about 35 s each; ALBIC's chain experiments 5 to 20 s of
# HiGHS solves): their tests are marked slow, and the default suite never runs them
SLOW_EXPERIMENTS = frozenset({"fish-ablations", "ray-heterogeneous", "fish-drift", "sim-vs-ray", "cg-heterogeneity",
                              "cg-capacity-change", "cg-virtual-workers", "albic-periods", "production-vs-papers",
                              "gedik-sigma", "dchoices-storm", "dchoices-storm-ray", "cg-storm-memory", "albic-cola",
                              "albic-scale-in", "albic-wikipedia", "storm-deployments", "albic-cap",
                              "ray-recovery", "ray-overload", "flink-check", "cg-virtual-workers-length"})


_QUICK: dict = {}  # the session's quick runs, started ahead at collection when selected tests read them


def _quick_runs() -> QuickRuns:
    if "runs" not in _QUICK:
        _QUICK["runs"] = QuickRuns(Path(tempfile.mkdtemp(prefix="quick-runs-")), _local_ray)
    return _QUICK["runs"]


@pytest.fixture(scope="session")
def outputs():
    """Quick runs of the registered experiments (`quick_runs.QuickRuns`), shared by every test of the session."""
    runs = _quick_runs()
    yield runs
    runs.close()


@pytest.fixture(autouse=True)
def _calm(request):
    """A test marked `timing` runs with the background computations paused."""
    if request.node.get_closest_marker("timing") is None:
        yield
        return
    with AHEAD.paused():
        yield


def pytest_sessionfinish(session) -> None:
    AHEAD.close()


MISSING_TOOL = "needs a system tool"  # a skip reason that starts with this names a tool `make tools` installs


def pytest_terminal_summary(terminalreporter) -> None:
    """End with one line when tests were skipped for a system tool that is missing here, and how to get it."""
    reasons = [r.longrepr[2] for r in terminalreporter.stats.get("skipped", [])
               if isinstance(r.longrepr, tuple) and MISSING_TOOL in r.longrepr[2]]
    if reasons:
        tools = sorted({reason.split(": ", 2)[-1] for reason in reasons})
        terminalreporter.write_line(f"skipped {len(reasons)} tests that need a system tool ({'; '.join(tools)}): "
                                    "`sudo make tools` and `make flink` install what CI installs (a JDK 17, "
                                    "Prometheus, Flink's jars)", yellow=True)


def experiment_params(names) -> list:
    """Experiment names as test parameters, those in SLOW_EXPERIMENTS marked slow, those that run Flink skipped with
    one line where it is missing."""
    import experiments
    from topo.flink_engine.install import missing

    def marks(n: str) -> list:
        found = [pytest.mark.slow] if n in SLOW_EXPERIMENTS else []
        if experiments.get(n).on_flink and (why := missing()):
            found.append(pytest.mark.skip(reason=f"{MISSING_TOOL}: {why}"))
        return found

    return [pytest.param(n, marks=marks(n)) for n in names]
