"""What every actor of a run answers so that it can be killed for real and watched (its process, its memory), and
the one way to ask an actor that may be down while Ray restarts it."""

from __future__ import annotations

import os
import resource
import signal
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import RayActorError


class Mortal:
    """Mixed into the actor classes: chaos kills their process, and the summary reports their peak memory."""

    def pid(self) -> int:
        """The actor's process id (chaos kills it)."""
        return os.getpid()

    def where(self) -> tuple[int, str]:
        """(process id, node IP): the driver kills a local actor itself, and asks a remote one to die."""
        return os.getpid(), ray.util.get_node_ip_address()

    def kill_self(self) -> None:
        """Die at once, as a crashed machine would (chaos on another node)."""
        os.kill(os.getpid(), signal.SIGKILL)

    def ready(self) -> bool:
        """True once the actor is up (after a restart: once it has recovered)."""
        return True

    @staticmethod
    def peak_rss_mb() -> float:
        """The most resident memory this process has used so far, in MiB (Linux reports KiB)."""
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def until_back(call: Callable[[], Any], gone: Callable[[], Exception] | None, timeout_s: float,
               errors: tuple = (RayActorError,)) -> Any:
    """`call()`, again every 50 ms while the actor it asks is down (Ray restarting it); after `timeout_s`, raise
    `gone()` (None: the last error)."""
    deadline = time.time() + timeout_s
    while True:
        try:
            return call()
        except errors:
            if time.time() > deadline:
                if gone is None:
                    raise
                raise gone() from None
            time.sleep(0.05)
