"""Results that cannot drift from the code: what ran each result, and the quick numbers a fresh run must equal.

Every experiment's folder gets a `COMMAND` file when it is written: the command, the commit it ran at (marked when
the checkout had uncommitted changes), the date and the wall time. The quick numbers of every deterministic
experiment (no Ray, no wall clock in them) are committed under `results/quick/`; `reproduce.py --check` and the
test suite run each experiment in quick mode and compare. Floats compare to within a relative 1e-9 (the last bits
of a sum may depend on the CPU's vector width), everything else exactly. Values an experiment declares
`volatile` (wall-clock measurements, by key suffix) are left out of the comparison.
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

ROOT = Path(__file__).resolve().parents[1]
QUICK_DIR = ROOT / "results" / "quick"
REL_TOL = 1e-9
SHOWN = 5  # differences listed per experiment at most


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
    edited while it runs), the UTC date and the wall time of its run."""
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{shlex.join(argv)}\n# at commit {at or commit()} on {when}; took {seconds:.0f} s wall on a "
            f"{os.cpu_count()}-core machine\n")


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


def record(name: str, numbers: dict) -> Path:
    """Commit-to-be: these quick numbers become what `name` must give."""
    QUICK_DIR.mkdir(parents=True, exist_ok=True)
    path = committed_path(name)
    path.write_text(json.dumps(normalized(numbers), indent=2) + "\n")
    return path


def check(name: str, numbers: dict, volatile: tuple[str, ...] = ()) -> list[str]:
    """How a fresh quick run's numbers differ from the committed ones ([] when they are the same)."""
    path = committed_path(name)
    if not path.exists():
        return [f"no committed quick numbers ({path.relative_to(ROOT)})"]
    expected = json.loads(path.read_text())
    return differences(without(expected, volatile), without(normalized(numbers), volatile))
