"""Results that cannot drift from the code: what ran each result, and the quick numbers a fresh run must equal.

Every experiment's folder gets a `COMMAND` file when it is written: the command, the commit it ran at (marked when
the checkout had uncommitted changes), the date, the wall time, and the versions and machine it ran with
(`topo.versions`). The quick numbers of every deterministic experiment (no Ray, no wall clock in them) are committed
under `results/quick/`, with the commit, a digest of the code and the environment that recorded them; `reproduce.py
--check` and the test suite run each experiment in quick mode and compare, and `cause` says why numbers differ: the
versions, the machine or the code. Floats compare to within a relative 1e-9 (the last bits of a sum may depend on
the CPU's vector width), everything else exactly. Values an experiment declares `volatile` (wall-clock
measurements, by key suffix) are left out of the comparison.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import shlex
import subprocess
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from groupings.digest import source_digest
from topo import versions

ROOT = Path(__file__).resolve().parents[1]
QUICK_DIR = ROOT / "results" / "quick"
REL_TOL = 1e-9
SHOWN = 5  # differences listed per experiment at most
CODE = ("groupings", "operators", "topo", "experiments", "spark")  # the packages whose code makes the numbers


def add_numbers_option(parser: ArgumentParser, what: str) -> None:
    """A benchmark's `--json`: it prints `what` as its last line, one JSON object, which `scripts/record.py
    --numbers` keeps as numbers.json for the docs to quote."""
    parser.add_argument("--json", action="store_true",
                        help=f"at the end, print {what} as one JSON line (what `scripts/record.py --numbers` keeps as "
                             "numbers.json)")


def commit() -> str:
    """The checkout's short commit hash, with "+changes" if its code has uncommitted changes ("unknown" without
    git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        # the code's changes only: docs and results being edited meanwhile do not change what ran
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)docs", ":(exclude)results", ":(exclude)*.md"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def command_text(name: str, quick: bool, parent: Path, seconds: float, at: str | None = None) -> str:
    """What `COMMAND` holds for an experiment's folder: the command that reproduces it, then how and when it ran
    (`at`: the commit when the run began, `commit()` by default)."""
    try:
        out = parent.resolve().relative_to(ROOT)  # no path of the machine that ran it
    except ValueError:
        out = Path(parent.name)
    return ran_text(["python", "scripts/reproduce.py", name, *(["--quick"] if quick else []), "--out", str(out)],
                    seconds, at)


def ran_text(argv: list[str], seconds: float, at: str | None = None) -> str:
    """A `COMMAND` file's text: the command line, then the commit (`at`, taken when the run began: the code may be
    edited while it runs), the UTC date and the wall time of its run, and the versions and machine it ran with."""
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{shlex.join(argv)}\n# at commit {at or commit()} on {when}; took {seconds:.0f} s wall on a "
            f"{os.cpu_count()}-core machine\n# with {versions.describe(versions.environment())}\n")


TOOK = re.compile(r"took (\d+(?:\.\d+)?) s wall")  # the wall time as `ran_text` writes it


def took_seconds(text: str) -> float | None:
    """The wall seconds a `COMMAND` file's text records (None if it records none)."""
    found = TOOK.search(text)
    return float(found[1]) if found else None


def normalized(numbers: dict) -> Any:
    """The numbers as `numbers.json` holds them (tuples as lists, numpy scalars as floats)."""
    return json.loads(json.dumps(numbers, default=float))


def without(value: Any, volatile: tuple[str, ...]) -> Any:
    """`value` with every mapping entry whose key ends with one of the `volatile` suffixes left out."""
    if isinstance(value, dict):
        return {k: without(v, volatile) for k, v in value.items() if not (volatile and str(k).endswith(volatile))}
    if isinstance(value, list):
        return [without(v, volatile) for v in value]
    return value


def differences(expected: Any, got: Any, path: str = "") -> list[str]:
    """Where `got` differs from `expected` (paths like `by_n[2].scan_evals`), up to SHOWN of them."""
    out: list[str] = []
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in list(expected) + [k for k in got if k not in expected]:
            where = f"{path}.{key}" if path else str(key)
            if key not in got or key not in expected:
                out.append(f"{where}: {'missing now' if key not in got else 'new'}")
            else:
                out += differences(expected[key], got[key], where)
            if len(out) >= SHOWN:
                break
    elif isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            out += differences(e, g, f"{path}[{i}]")
            if len(out) >= SHOWN:
                break
    elif not _same(expected, got):
        out.append(f"{path}: committed {_short(expected)}, now {_short(got)}")
    return out[:SHOWN]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool) or not all(isinstance(x, int | float) for x in (a, b)):
            return False
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0)
    return type(a) is type(b) and a == b


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def committed_path(name: str) -> Path:
    return QUICK_DIR / f"{name}.json"


def code_digest() -> str:
    """A digest of the code that makes the numbers (every .py file of CODE, by path and content): equal digests,
    same code. The commit alone cannot tell: numbers are recorded before the change that moved them is committed,
    so their commit is usually the one before it, with "+changes"."""
    return source_digest([ROOT / package for package in CODE], ROOT)[:16]


def record(name: str, numbers: dict) -> Path:
    """Commit-to-be: these quick numbers become what `name` must give, with what recorded them (the commit, the
    code's digest, the versions and machine) so that `cause` can say why a later run differs."""
    QUICK_DIR.mkdir(parents=True, exist_ok=True)
    path = committed_path(name)
    recorded = {"commit": commit(), "code": code_digest(), "environment": versions.environment()}
    path.write_text(json.dumps({"recorded": recorded, "numbers": normalized(numbers)}, indent=2) + "\n")
    return path


def committed(name: str) -> tuple[dict | None, Any]:
    """What `results/quick/NAME.json` holds: (what recorded them, the numbers), or (None, the numbers) for a file of
    the earlier format, which held the numbers alone. FileNotFoundError if there is none."""
    held = json.loads(committed_path(name).read_text())
    if isinstance(held, dict) and set(held) == {"recorded", "numbers"}:
        return held["recorded"], held["numbers"]
    return None, held


def check(name: str, numbers: dict, volatile: tuple[str, ...] = ()) -> list[str]:
    """How a fresh quick run's numbers differ from the committed ones ([] when they are the same)."""
    path = committed_path(name)
    if not path.exists():
        return [f"no committed quick numbers ({_shown(path)})"]
    _, expected = committed(name)
    return differences(without(expected, volatile), without(normalized(numbers), volatile))


def cause(name: str) -> str:
    """Why this checkout's quick numbers of `name` may differ from the committed ones, one line: the versions or
    the machine that differ ("versions differ: scipy 1.16.3 -> 1.17.1"), and whether the code changed since they
    were recorded; with all three the same, the experiment is not deterministic."""
    path = committed_path(name)
    if not path.exists():
        return f"no committed quick numbers ({_shown(path)})"
    recorded, _ = committed(name)
    if recorded is None:  # the earlier format: the commit that committed them stands for the code that made them
        _, code = _code_changed({"commit": _last_commit(path)})
        return f"{code}; the versions and machine that made them were not recorded: `--check --update {name}` does"
    if recorded.get("environment") is None:
        return f"{_code_changed(recorded)[1]}; the versions and machine that made them were not recorded"
    changes = versions.compare(recorded["environment"], versions.environment())
    found = [f"versions differ: {', '.join(c for c in changes if not c.startswith('machine: '))}",
             f"machine differs: {', '.join(c.removeprefix('machine: ') for c in changes if c.startswith('machine: '))}"]
    found = [f for f in found if not f.endswith(": ")]
    changed, code = _code_changed(recorded)
    if found:
        return "; ".join([*found, code])
    if changed is False:
        return "same code, versions and machine: not deterministic?"
    return code if changed else f"same versions and machine; {code}"


def _code_changed(recorded: dict) -> tuple[bool | None, str]:
    """Whether the code differs from the recorded one (None: cannot tell), and a line saying so."""
    at = recorded.get("commit") or "unknown"
    if recorded.get("code"):
        same = recorded["code"] == code_digest()
        return (False, f"same code as at {at}") if same else (True, f"the code changed since {at}")
    if at == "unknown" or at.endswith("+changes"):  # the recorded code was no commit's
        return None, f"the code could not be compared (recorded at {at})"
    try:  # the working tree against the commit, then the files git does not know yet
        diff = subprocess.run(["git", "diff", "--quiet", at, "--", *CODE], cwd=ROOT, capture_output=True,
                              timeout=30)
        new = subprocess.run(["git", "status", "--porcelain", "--", *CODE], cwd=ROOT, capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None, "the code could not be compared (no git)"
    if diff.returncode not in (0, 1) or new.returncode != 0:
        return None, f"the code could not be compared (git knows no commit {at})"
    changed = diff.returncode == 1 or any(line.startswith("??") for line in new.stdout.splitlines())
    return (True, f"the code changed since {at}") if changed else (False, f"same code as at {at}")


def _last_commit(path: Path) -> str:
    """The short hash of the last commit that changed `path` ("unknown" without git or such a commit)."""
    try:
        found = subprocess.run(["git", "log", "-1", "--format=%h", "--", str(path)], cwd=ROOT, capture_output=True,
                               text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found or "unknown"


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:  # a folder outside the checkout (the tests')
        return str(path)
