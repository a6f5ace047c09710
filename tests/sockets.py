"""The TCP sockets a process tree listens on, read from Linux's /proc (no `ss` or `lsof` needed): the test of a
local run's exposure watches them while the run lasts."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"  # the state column of /proc/net/tcp{,6} for a listening socket
READABLE = (PROC / "net" / "tcp").exists()  # Linux only


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


def tree(root: int) -> set[int]:
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
