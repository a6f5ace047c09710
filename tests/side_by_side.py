"""Command lines run a few at a time, for test files with many cases that each start a script: every case is a
second of interpreter start-up and imports, mostly waiting on one core, so running them side by side on two
cores about halves the file's time. A module fixture runs the cases its selected tests need, and each test then
checks its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def chosen(request, param: str) -> list:
    """The values of `param` among the tests of the requesting module that this session runs."""
    values = {item.callspec.params[param] for item in request.session.items
              if item.module is request.module and param in getattr(getattr(item, "callspec", None), "params", {})}
    return sorted(values)


def script(name: str, *args: str) -> list[str]:
    """The command line of scripts/`name`.py with these arguments."""
    return [sys.executable, str(ROOT / "scripts" / f"{name}.py"), *args]


def run_all(jobs: dict[Hashable, tuple[list[str], Path]], timeout_s: float = 120.0
            ) -> dict[Hashable, subprocess.CompletedProcess]:
    """Run each (command, working directory), a few at a time; a case that hangs fails alone (return code
    "timeout"), not the others."""

    def one(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(command, "timeout", "", str(exc))

    with ThreadPoolExecutor(max_workers=(os.cpu_count() or 2) + 1) as pool:
        futures = {key: pool.submit(one, command, cwd) for key, (command, cwd) in jobs.items()}
        return {key: future.result() for key, future in futures.items()}
