"""A Ray cluster of several nodes on this machine: one raylet per node (`ray start`), the first the head, each in its
own process group, with token authentication (a fresh token in a temporary file, so ~/.ray is not touched), in a
temp dir of its own and on free ports, so it collides neither with a local Ray nor with anyone else's. The
multi-node tests and benchmarks run a topology across its nodes, with `--address` set to it.

Stopping sends SIGTERM, then SIGKILL, to the process groups it started and to what names its temp dir: never
`ray stop`, which stops every Ray on the machine.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")
START_TIMEOUT_S = 120.0  # one `ray start`


@dataclass(frozen=True)
class LocalCluster:
    """A running cluster: the head's address, the environment a client needs (its token), its directory."""

    address: str
    env: dict
    base: str

    def nodes(self) -> list[dict]:
        """The alive nodes: [{"id", "ip", "resources"}], head first, as a client of the cluster lists them."""
        done = subprocess.run([sys.executable, "-c", NODES_SCRIPT, self.address], env=self.env, capture_output=True,
                              text=True, timeout=90)
        if done.returncode:
            raise RuntimeError(f"listing the cluster's nodes failed: {done.stderr.strip()[-500:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


NODES_SCRIPT = """
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR")
nodes = [n for n in ray.nodes() if n["Alive"]]
nodes.sort(key=lambda n: ("node:__internal_head__" not in n["Resources"], n["NodeID"]))
print(json.dumps([{"id": n["NodeID"], "ip": n["NodeManagerAddress"], "resources": n["Resources"]} for n in nodes]))
"""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a process, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[2])


def cmdline(pid: int) -> str:
    """A process's command line, or "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def ours(groups: set[int], temp_dir: str) -> list[int]:
    """Live (not zombie) processes of the cluster: in its process groups, or naming its Ray temp dir."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat and stat[0] not in "ZX" and (stat[1] in groups or temp_dir in cmdline(pid)):
            found.append(pid)
    return found


def stop(groups: set[int], temp_dir: str, grace_s: float = 10.0) -> None:
    """SIGTERM the cluster's processes, then SIGKILL what is left of them after `grace_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in ours(groups, temp_dir):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while ours(groups, temp_dir) and time.monotonic() < deadline:
            time.sleep(0.2)


@contextmanager
def local_cluster(resources: list[dict[str, float]], cpus: int = 1,
                  object_store_bytes: int = 150_000_000) -> Iterator[LocalCluster]:
    """A cluster of one node per entry of `resources` (each node's custom resources; the first node is the head),
    each offering `cpus` CPUs; stopped on leaving, and RuntimeError if any of its processes outlived that."""
    base = tempfile.mkdtemp(prefix="topo-rc-", dir="/tmp")  # short: Ray's unix socket paths must stay < 108 bytes
    temp_dir = os.path.join(base, "ray")
    token = Path(base, "auth_token")
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token), RAY_USAGE_STATS_ENABLED="0")
    port = free_port()
    common = [f"--num-cpus={cpus}", f"--object-store-memory={object_store_bytes}", f"--temp-dir={temp_dir}",
              "--disable-usage-stats", "--include-log-monitor=false"]
    head = ["--head", f"--port={port}", "--dashboard-host=127.0.0.1", f"--dashboard-port={free_port()}",
            f"--ray-client-server-port={free_port()}"]
    groups: set[int] = set()
    try:
        for i, offered in enumerate(resources):
            where = head if i == 0 else [f"--address=127.0.0.1:{port}"]
            proc = subprocess.Popen([str(RAY), "start", *where, f"--resources={json.dumps(offered)}", *common,
                                     f"--dashboard-agent-listen-port={free_port()}"],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)  # the daemons it leaves stay in this process group
            groups.add(proc.pid)
            out, _ = proc.communicate(timeout=START_TIMEOUT_S)
            if proc.returncode:
                raise RuntimeError(f"ray start of node {i} failed: {out.strip()[-1500:]}")
        yield LocalCluster(f"127.0.0.1:{port}", env, base)
    finally:
        stop(groups, temp_dir)
        left = ours(groups, temp_dir)
        shutil.rmtree(base, ignore_errors=True)
        if left:
            raise RuntimeError(f"Ray processes left running: {[cmdline(p)[:120] for p in left]}")
