"""What decided a run's numbers besides the code: the Python and package versions, and the machine.

`environment()` is recorded with every result (a run directory's `spec.json`, an experiment's `COMMAND`, the committed
quick numbers), so that a number that moved can be told apart as the code's doing, an upgrade's or another machine's;
`compare()` names what differs between a recorded environment and this one.
"""

from __future__ import annotations

import functools
import json
import platform
from importlib import metadata
from pathlib import Path

# the packages whose versions can move a number: numerics, the JIT, the MILP solver, the engines and the tables
PACKAGES = ("numpy", "numba", "llvmlite", "scipy", "ray", "pyarrow", "pyspark", "pandas")
MACHINE = ("cpu", "arch", "blas")  # the machine's part of the environment, in the order it is shown


def environment() -> dict:
    """This process's Python and package versions and its machine, as JSON-able values: `{"python": ..., "packages":
    {name: version or None}, "machine": {"cpu", "arch", "blas"}}` (a machine value is None where it is not known)."""
    return json.loads(_measured())  # a fresh copy: a caller may change its dict


@functools.cache  # the versions and the CPU do not change within a process
def _measured() -> str:
    return json.dumps({"python": platform.python_version(),
                       "packages": {name: _version(name) for name in PACKAGES},
                       "machine": {"cpu": _cpu(), "arch": platform.machine() or None, "blas": _blas()}})


def _version(name: str) -> str | None:
    """The installed version of a distribution, None if it is not installed; its metadata only, so that asking
    never imports (and starts) Ray or Spark."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu() -> str | None:
    """The CPU's model name (the first "model name" of /proc/cpuinfo; `platform.processor()` where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass  # not Linux
    return platform.processor() or None


def _blas() -> str | None:
    """numpy's BLAS and the kernel it chose for this CPU, e.g. "openblas Haswell" (a sum's last bits may depend on
    it); None without threadpoolctl, which alone can ask the loaded library."""
    try:
        import numpy  # noqa: F401 - its BLAS is loaded, and so seen, only once numpy is imported
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    found = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    # scipy may load a BLAS of its own: numpy's is the one its file path names
    found = [i for i in found if "numpy" in str(i.get("filepath", ""))] or found
    if not found:
        return None
    words = [str(found[0][k]) for k in ("internal_api", "architecture") if found[0].get(k)]
    return " ".join(words) or None


def describe(env: dict) -> str:
    """One line for a reader: "python 3.11.7, numpy 2.4.6, ...; machine: AMD EPYC (x86_64), blas openblas Haswell"
    (packages not installed and machine values not known are left out)."""
    packages = [f"{name} {v}" for name, v in env.get("packages", {}).items() if v]
    machine = env.get("machine", {})
    text = ", ".join([f"python {env.get('python')}", *packages]) + f"; machine: {machine.get('cpu') or 'unknown CPU'}"
    text += f" ({machine['arch']})" if machine.get("arch") else ""
    return text + (f", blas {machine['blas']}" if machine.get("blas") else "")


def compare(recorded: dict | None, now: dict) -> list[str]:
    """What differs from the `recorded` environment to `now`, one line each ([] when nothing does): the versions
    first ("scipy 1.16.3 -> 1.17.1", "python 3.11.7 -> 3.12.1"), then the machine, each line starting with
    "machine: " ("machine: cpu 'Intel Xeon' -> 'AMD EPYC'")."""
    if recorded is None:
        return ["recorded nothing of its versions or machine"]
    lines = []
    if recorded.get("python") != now.get("python"):
        lines.append(f"python {recorded.get('python')} -> {now.get('python')}")
    before, after = recorded.get("packages", {}), now.get("packages", {})
    for name in dict.fromkeys([*before, *after]):  # the order of both, each name once
        if before.get(name) != after.get(name):
            lines.append(f"{name} {before.get(name) or 'not installed'} -> {after.get(name) or 'not installed'}")
    before, after = recorded.get("machine", {}), now.get("machine", {})
    for key in MACHINE:
        # a value not known on either side (threadpoolctl missing there, say) cannot be said to differ
        if before.get(key) is not None and after.get(key) is not None and before[key] != after[key]:
            lines.append(f"machine: {key} {before[key]!r} -> {after[key]!r}")
    return lines
