"""The lock is the only place versions are chosen: every dependency of pyproject.toml is pinned in requirements.lock
(with the hashes pip checks), within pyproject's range, and no install step names a version of its own."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _pins(lock: str = "requirements.lock") -> dict[str, list[tuple[str, str | None, int]]]:
    """name -> [(version, marker or None, hashes)] of a lock file."""
    text = (ROOT / lock).read_text()
    pins: dict[str, list] = {}
    for block in re.split(r"\n(?=[a-z0-9])", text):
        head = block.split("\\", 1)[0].strip()
        found = re.match(r"([A-Za-z0-9._-]+)==([^ ;]+)\s*(?:;\s*(.*))?$", head)
        if found:
            name = re.sub(r"[-_.]+", "-", found[1]).lower()
            pins.setdefault(name, []).append((found[2], found[3], block.count("--hash=sha256:")))
    return pins


def test_every_dependency_is_pinned_within_its_range_with_hashes():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # the flink extra (330 MB of jars, no Python dependency) has a lock of its own, which `make flink` installs
    extras = project["optional-dependencies"]
    wanted = project["dependencies"] + [d for name, extra in extras.items() if name != "flink" for d in extra]
    pins = _pins()
    for line in wanted:
        req = Requirement(line)
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in pins, f"{name} is not in requirements.lock: run `make lock`"
        for version, marker, hashes in pins[name]:
            assert req.specifier.contains(version, prereleases=True), f"{name}=={version} is outside {req.specifier}"
            assert hashes > 0
            assert marker is None or Marker(marker)  # a marker pip can read
    assert all(h > 0 for versions in pins.values() for _, _, h in versions)
    flink = _pins("requirements-flink.lock")
    for line in extras["flink"]:
        req = Requirement(line)
        assert [req.specifier.contains(v) and h > 0 for v, _, h in flink[req.name]] == [True]


def test_the_numbers_deciding_packages_have_one_version_on_this_python():
    # a second version of numpy or scipy under another marker would let the same lock give other numbers
    env = {"python_full_version": "3.11.7", "python_version": "3.11", "sys_platform": "linux",
           "platform_machine": "x86_64", "platform_python_implementation": "CPython", "implementation_name": "cpython"}
    pins = _pins()
    for name in ("numpy", "numba", "llvmlite", "scipy", "ray", "pyarrow", "pyspark", "pandas"):
        chosen = [v for v, marker, _ in pins[name] if marker is None or Marker(marker).evaluate(env)]
        assert len(chosen) == 1, f"{name}: {chosen}"


def test_no_install_step_chooses_a_version_of_its_own():
    make = (ROOT / "Makefile").read_text()
    assert "--require-hashes -r requirements.lock" in make and "--no-deps --no-build-isolation -e ." in make
    assert "--require-hashes --no-deps -r requirements-flink.lock" in make
    for path in [ROOT / "Makefile", *(ROOT / "clusters").glob("*.yaml")]:
        for line in path.read_text().splitlines():
            if "pip install" in line and "boto3" not in line:  # boto3: the AWS launcher's own, on the head only
                assert "==" not in line and ">=" not in line, f"{path.name}: {line.strip()}"
