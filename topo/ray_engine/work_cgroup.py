"""A real kernel CPU quota for a worker process, like the paper's cpulimit caps: its own cgroup with a CPU limit.

Where the machine allows it (Linux, root, a writable cgroup hierarchy with the cpu controller), a worker process
can be put into a cgroup of its own whose quota is `share` of one core per period: `cpu.max` under cgroup v2,
`cpu.cfs_quota_us` under the older v1 hierarchy that some hosts still mount for cpu. Anywhere else the calls
return False and change nothing, so callers can fall back to the emulator's own duty-cycle cap.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# the kernel's default scheduling period; the quota is a share of it
PERIOD_US = 100_000
# the kernel refuses quotas below 1 ms per period
MIN_QUOTA_US = 1_000
GROUP_PREFIX = "stream-groupings-"
# a worker actor's process also runs Ray's threads (calls, acks, serialization): its quota adds this share of its
# burn and this many cores, as those threads cost about the same in a slow worker as in a fast one
QUOTA_HEADROOM = 0.25
QUOTA_BASE_CORES = 0.1


def worker_quota(share: float) -> float:
    """The cgroup quota (cores) of a worker process that burns `share` of a core serving tuples."""
    return share * (1 + QUOTA_HEADROOM) + QUOTA_BASE_CORES

# pid -> (its own group, the cgroup.procs file of the group it came from), to undo the move
_moved: dict[int, tuple[Path, Path]] = {}


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _v2_root() -> Path | None:
    """The cgroup v2 mount if it offers the cpu controller, else None."""
    controllers = CGROUP_ROOT / "cgroup.controllers"
    try:
        return CGROUP_ROOT if "cpu" in _read(controllers).split() else None
    except OSError:
        return None


def _v1_cpu_root() -> Path | None:
    """Where a cgroup v1 hierarchy with the cpu controller is mounted, else None."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup" and "cpu" in fields[3].split(","):
            return Path(fields[1])
    return None


def _own_group_v1(pid: int) -> str | None:
    """The pid's group in the v1 cpu hierarchy (a path below the mount), or None if it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpu" in controllers.split(","):
                return path
    except (OSError, ValueError):
        return None
    return None


def _own_group_v2(pid: int) -> str | None:
    """The pid's group in the v2 hierarchy (a path below the mount), or None if it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    except OSError:
        return None
    return None


def cgroup_quota_possible() -> bool:
    """Whether this process may give other processes a CPU quota here (Linux, root, a writable cpu hierarchy)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    root = _v2_root() or _v1_cpu_root()
    return root is not None and os.access(root, os.W_OK)


def _quota_us(share: float) -> int:
    return max(MIN_QUOTA_US, round(share * PERIOD_US))


def _set_quota(group: Path, share: float, v2: bool) -> bool:
    """Write the quota of an existing group; False if the kernel refuses it."""
    try:
        if v2:
            _write(group / "cpu.max", f"{_quota_us(share)} {PERIOD_US}")
        else:
            _write(group / "cpu.cfs_period_us", str(PERIOD_US))
            _write(group / "cpu.cfs_quota_us", str(_quota_us(share)))
    except OSError:
        return False
    return True


def apply_cgroup_quota(pid: int, share: float) -> bool:
    """Move process `pid` into its own cgroup limited to `share` of one core; False (nothing changed) if impossible."""
    if not (share > 0 and share != float("inf")):
        raise ValueError(f"cgroup quota share must be a positive number of cores, got {share!r}")
    if pid <= 0 or not Path(f"/proc/{pid}").exists() or not cgroup_quota_possible():
        return False
    v2 = _v2_root()
    if pid in _moved:
        return _set_quota(_moved[pid][0], share, v2 is not None)
    root = v2 if v2 is not None else _v1_cpu_root()
    origin = (_own_group_v2 if v2 is not None else _own_group_v1)(pid)
    if root is None or origin is None:
        return False
    undo: list[tuple[str, Path, str]] = []
    group = root / f"{GROUP_PREFIX}{pid}"
    try:
        if v2 is not None:
            subtree = root / "cgroup.subtree_control"
            if "cpu" not in _read(subtree).split():
                _write(subtree, "+cpu")
                undo.append(("write", subtree, "-cpu"))
        group.mkdir(exist_ok=False)
        undo.append(("rmdir", group, ""))
        if not _set_quota(group, share, v2 is not None):
            raise OSError("quota refused")
        _write(group / "cgroup.procs", str(pid))
    except OSError:
        # roll back in reverse order so a half-made group never stays behind
        for action, path, text in reversed(undo):
            try:
                if action == "write":
                    _write(path, text)
                else:
                    path.rmdir()
            except OSError:
                pass
        return False
    _moved[pid] = (group, root / origin.lstrip("/") / "cgroup.procs")
    return True


def release_cgroup_quota(pid: int) -> bool:
    """Undo `apply_cgroup_quota(pid, ...)`: move the process back (if alive) and remove its group; False if none."""
    if pid not in _moved:
        return False
    group, origin_procs = _moved.pop(pid)
    try:
        if Path(f"/proc/{pid}").exists():
            _write(origin_procs, str(pid))
    except OSError:
        pass
    # an exiting process may hold its group a few milliseconds after it is reaped
    for _ in range(50):
        try:
            group.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.01)
    return False
