"""Nothing open beyond loopback: a local Ray run with `--metrics-port` listens on 127.0.0.1 only, Ray's own ports
included (GCS, raylet, object manager, agents, workers), while the run lasts."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROC = Path("/proc")
LISTEN = "0A"  # the state column of /proc/net/tcp{,6} for a listening socket

pytestmark = pytest.mark.skipif(not (PROC / "net" / "tcp").exists(), reason="reads sockets from Linux's /proc")


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process now alive."""
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the command name may hold spaces and parentheses
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _tree(root: int) -> set[int]:
    """`root` and all its descendants (Ray's GCS, raylet, agents and workers descend from the driver)."""
    tree, found, todo = _children(), {root}, [root]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _socket_inodes(pids: set[int]) -> set[str]:
    """The inodes of the sockets these processes hold open."""
    inodes = set()
    for pid in pids:
        try:
            fds = list((PROC / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def _address(hex_ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it: 32-bit words in host (little-endian) byte order."""
    raw = bytes.fromhex(hex_ip)
    swapped = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(swapped)


def listening(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket these processes listen on."""
    inodes = _socket_inodes(pids)
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                ip, port = fields[1].split(":")
                found.add((str(_address(ip)), int(port, 16)))
    return found


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1, how a dual-stack gRPC server binds loopback
    return (mapped or addr).is_loopback


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_local_ray_run_listens_on_loopback_only(tmp_path):
    # a real Ray starts and stops here (10-20 s, most of it Ray starting): its sockets can be seen no other way
    port = free_port()
    run = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", "ray", "--stream",
         "zipf:z=1.0,keys=1000,messages=3000,seed=1", "--workers", "2", "--sources", "1", "--rate", "max",
         "--metrics-port", str(port), "--out", str(tmp_path / "run"), "--quiet", "--no-plots", "--json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 120
    while run.poll() is None and time.monotonic() < deadline:
        seen |= listening(_tree(run.pid))
        time.sleep(0.2)
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr[-3000:]
    assert '"exact":true' in stdout.splitlines()[-1]
    assert ("127.0.0.1", port) in seen, sorted(seen)  # the metrics endpoint was up, on loopback
    assert {ip for ip, p in seen if p == port} == {"127.0.0.1"}
    assert len(seen) >= 5, sorted(seen)  # GCS, raylet, agents and workers were seen, not just the exporter
    exposed = sorted((ip, p) for ip, p in seen if not is_loopback(ip))
    assert not exposed, f"listening beyond loopback: {exposed}"
