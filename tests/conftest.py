"""One local Ray instance for the whole test session, for the tests that need Ray."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with two CPUs and no dashboard, shut down when the session ends."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (two cores) for the whole test session, stopped when it ends."""
    from spark.session import get_session

    session = get_session("local[2]", app="tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def outputs(tmp_path_factory, ray_session):
    """Every registered experiment run once in quick mode, by name: (its output directory, its numbers). The
    deployment ones use the shared Ray session; tests of several files read the same runs."""
    import experiments

    done = {}
    base = tmp_path_factory.mktemp("results")
    for name in experiments.names():
        out = base / name
        out.mkdir()
        done[name] = (out, experiments.get(name).run(out, True))
    return done
