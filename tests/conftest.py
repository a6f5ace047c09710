"""One local Ray instance for the whole test session, for the tests that need Ray."""

from __future__ import annotations

from collections.abc import Mapping

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


# experiments whose quick run takes more than about 8 s here (fish-ablations 69 s, ray-heterogeneous 39 s, fish-drift
# 31 s, the others 9 to 15 s): their tests are marked slow, and the default suite never runs them
SLOW_EXPERIMENTS = frozenset({"fish-ablations", "ray-heterogeneous", "fish-drift", "sim-vs-ray", "cg-heterogeneity",
                              "cg-capacity-change", "cg-virtual-workers", "albic-periods"})


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
