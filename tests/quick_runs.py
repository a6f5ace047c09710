"""The registered experiments in quick mode, run once per test session and read by the tests of several files.

The runs the selected tests will read are made ahead, in the session's background process (`ahead.AHEAD`); the
files that read them run after the other files (tests/conftest.py). Runs on Ray actors are made in the test
process, on the session's Ray.
"""

from __future__ import annotations

import inspect
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from ahead import AHEAD

# a literal name read in a test's body, e.g. outputs["cg-eps"]
_READ = re.compile(r"""outputs\[\s*["']([\w-]+)["']\s*\]""")


def run_quick(name: str, out: str) -> dict:
    """One experiment's quick run into `out`; its numbers."""
    import experiments

    return experiments.get(name).run(Path(out), True)


def wanted(items) -> list[str]:
    """Names of the experiments the selected tests read from `outputs`, in the order of the tests, except those a
    test marked `timing` reads (their times are measured in the test process, with the background paused)."""
    import experiments

    known = set(experiments.names())
    names: dict[str, None] = {}
    timed: set[str] = set()
    for item in items:
        if "outputs" not in getattr(item, "fixturenames", ()):
            continue
        params = getattr(item, "callspec", None)
        found = [v for v in (params.params.values() if params else ()) if isinstance(v, str) and v in known]
        found += [n for n in _READ.findall(inspect.getsource(item.function)) if n in known]
        names.update(dict.fromkeys(found))
        if item.get_closest_marker("timing") is not None:
            timed.update(found)
    return [n for n in names if n not in timed]


class QuickRuns(Mapping):
    """Every registered experiment in quick mode, by name: (its output directory, its numbers). The names given to
    `start_ahead` are made in the background; any other in the test process the first time a test asks for it."""

    def __init__(self, base: Path, on_ray: Callable[[], object]) -> None:
        import experiments

        self.base = base
        self.on_ray = on_ray  # readies the session's Ray
        self.names = list(experiments.names())
        self.done: dict = {}
        self.submitted: set[str] = set()

    def start_ahead(self, names: list[str]) -> None:
        import experiments

        for name in names:
            if not experiments.get(name).on_ray and name not in self.submitted:
                self.submitted.add(name)
                out = self.base / name
                out.mkdir()
                AHEAD.submit(("quick", name), run_quick, name, str(out))

    def __getitem__(self, name: str):
        import experiments

        if name not in self.done:
            out = self.base / name
            numbers = AHEAD.take(("quick", name))
            if numbers is not None:
                self.done[name] = (out, numbers)
            else:
                out.mkdir(exist_ok=True)
                experiment = experiments.get(name)
                if experiment.on_ray:
                    self.on_ray()  # the session's, not one started and stopped by each of the experiment's runs
                self.done[name] = (out, experiment.run(out, True))
        return self.done[name]

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def close(self) -> None:
        """Remove the runs' directories."""
        shutil.rmtree(self.base, ignore_errors=True)
