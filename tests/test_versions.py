"""A result says what decided it besides the code (the versions and the machine), and a difference says its cause:
the versions, the machine or the code; a full reproduction runs from a commit only."""

from __future__ import annotations

import importlib.util
import json
import platform

import numpy as np
import pytest

from experiments import provenance
from experiments.registry import Experiment
from topo import versions


def test_the_environment_names_the_versions_and_the_machine():
    env = versions.environment()
    assert json.loads(json.dumps(env)) == env
    assert env["python"] == platform.python_version()
    assert set(env["packages"]) == set(versions.PACKAGES) and env["packages"]["numpy"] == np.__version__
    assert set(env["machine"]) == {"cpu", "arch", "blas"} and env["machine"]["arch"] == platform.machine()
    env["packages"]["numpy"] = "0"  # a caller's change stays its own
    assert versions.environment()["packages"]["numpy"] == np.__version__
    line = versions.describe(versions.environment())
    assert line.startswith(f"python {platform.python_version()}, numpy {np.__version__}") and "; machine: " in line


def _env(**changes) -> dict:
    """This environment, with `changes` to its packages ("scipy": version) or its machine ("cpu": name)."""
    env = versions.environment()
    for key, value in changes.items():
        env["machine" if key in versions.MACHINE else "packages"][key] = value
    return env


def test_compare_names_what_differs():
    now = _env(scipy="1.17.1", cpu="AMD EPYC", blas=None)
    assert versions.compare(now, now) == []
    assert versions.compare(_env(scipy="1.16.3", cpu="AMD EPYC"), now) == ["scipy 1.16.3 -> 1.17.1"]
    assert versions.compare(_env(scipy="1.17.1", cpu="Intel Xeon"), now) == ["machine: cpu 'Intel Xeon' -> 'AMD EPYC'"]
    assert versions.compare({**now, "python": "3.10.1"}, now) == [f"python 3.10.1 -> {now['python']}"]
    assert versions.compare(_env(scipy=None, cpu="AMD EPYC"), now) == ["scipy not installed -> 1.17.1"]
    # a kernel not known on one side (no threadpoolctl there) is not a difference
    assert versions.compare(_env(scipy="1.17.1", cpu="AMD EPYC", blas="openblas Haswell"), now) == []
    assert versions.compare(None, now) == ["recorded nothing of its versions or machine"]


@pytest.fixture
def quick_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "QUICK_DIR", tmp_path / "quick")
    return tmp_path / "quick"


def _rewrite(path, **recorded):
    held = json.loads(path.read_text())
    held["recorded"].update(recorded)
    path.write_text(json.dumps(held))


def test_a_difference_says_whether_the_versions_the_machine_or_the_code_caused_it(quick_dir):
    path = provenance.record("toy", {"a": 1, "b": [1.0, 2.0]})
    held = json.loads(path.read_text())
    assert held["numbers"] == {"a": 1, "b": [1.0, 2.0]}
    assert held["recorded"] == {"commit": provenance.commit(), "code": provenance.code_digest(),
                                "environment": versions.environment()}
    assert provenance.check("toy", {"a": 1, "b": [1.0, 2.0]}) == []
    assert provenance.check("toy", {"a": 2, "b": [1.0, 2.0]}) == ["a: committed 1, now 2"]
    assert provenance.cause("toy") == "same code, versions and machine: not deterministic?"

    now = versions.environment()
    _rewrite(path, environment=_env(scipy="0.1"))
    assert provenance.cause("toy") == (f"versions differ: scipy 0.1 -> {now['packages']['scipy']}; same code as at "
                                       f"{provenance.commit()}")
    _rewrite(path, environment=_env(cpu="Intel Xeon"), code="0" * 16, commit="abc1234")
    assert provenance.cause("toy") == (f"machine differs: cpu 'Intel Xeon' -> {now['machine']['cpu']!r}; the code "
                                       "changed since abc1234")
    _rewrite(path, environment=now)
    assert provenance.cause("toy") == "the code changed since abc1234"
    # without a digest, a commit git does not know, or one with changes, cannot be compared with
    _rewrite(path, code=None, commit="0000000")
    assert provenance.cause("toy") == "same versions and machine; the code could not be compared (git knows no " \
                                      "commit 0000000)"
    _rewrite(path, commit="abc1234+changes")
    assert "could not be compared (recorded at abc1234+changes)" in provenance.cause("toy")


def test_numbers_in_the_earlier_format_still_compare(quick_dir):
    quick_dir.mkdir()
    (quick_dir / "toy.json").write_text(json.dumps({"a": 1}))
    assert provenance.committed("toy") == (None, {"a": 1})
    assert provenance.check("toy", {"a": 1}) == [] and provenance.check("toy", {"a": 2}) != []
    assert "versions and machine that made them were not recorded" in provenance.cause("toy")
    assert provenance.check("gone", {"a": 1})[0].startswith("no committed quick numbers")
    assert provenance.cause("gone").startswith("no committed quick numbers")


def _reproduce():
    spec = importlib.util.spec_from_file_location("reproduce", provenance.ROOT / "scripts" / "reproduce.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_full_run_from_uncommitted_changes_is_refused(tmp_path, monkeypatch, capsys):
    reproduce = _reproduce()
    ran = []

    def fake_run(exp, parent, quick, at=None):  # what would run: nothing heavy, and where it would go
        ran.append((exp.name, quick, at))
        (parent / exp.name).mkdir(parents=True)
        return parent / exp.name

    monkeypatch.setattr(reproduce, "run_one", fake_run)
    monkeypatch.setattr(provenance, "commit", lambda: "abc1234+changes")
    out = tmp_path / "out"
    capsys.readouterr()
    assert reproduce.main(["cg-sources", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce.py: error: ") and "--allow-changes" in err[0]
    assert not out.exists() and ran == []
    # a quick run is allowed; a full one with --allow-changes too, loudly
    assert reproduce.main(["cg-sources", "--quick", "--out", str(out / "q")]) == 0
    assert "WARNING" not in capsys.readouterr().err
    assert reproduce.main(["cg-sources", "--allow-changes", "--out", str(out / "f")]) == 0
    assert "WARNING" in capsys.readouterr().err
    assert ran == [("cg-sources", True, "abc1234+changes"), ("cg-sources", False, "abc1234+changes")]
    # from a commit, a full run needs no flag
    monkeypatch.setattr(provenance, "commit", lambda: "abc1234")
    assert reproduce.main(["cg-sources", "--out", str(out / "c")]) == 0 and len(ran) == 3


def test_check_names_the_cause_of_a_difference(quick_dir, monkeypatch, capsys):
    reproduce = _reproduce()
    toy = Experiment("toy", "a toy", "none", lambda out, quick: {"a": 2}, False, ())
    monkeypatch.setattr(reproduce.experiments, "get", lambda name: toy)
    provenance.record("toy", {"a": 1})
    _rewrite(provenance.committed_path("toy"), environment=_env(scipy="0.1"))
    capsys.readouterr()
    assert reproduce.main(["--check", "toy"]) == 1
    got = capsys.readouterr()
    assert "DIFFERS" in got.out
    assert "  toy: versions differ: scipy 0.1 -> " in got.err and "a change of the code changed" not in got.err
