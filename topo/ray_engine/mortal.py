"""What every actor of a run answers so that it can be killed for real and watched: its process, its memory."""

from __future__ import annotations

import os
import resource
import signal

import ray


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
