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

PROCESS_START = time.time()  # when this process first loaded the module: a restarted actor's process is new


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


class Named:
    """An actor addressed by its name, looked up on first use: what a restartable actor's constructor takes instead
    of a handle. Ray re-runs that constructor with the same arguments on a restart, and prints an error on every run
    when they hold object refs (actor handles included); a name holds none, and finds the actor after its restarts."""

    def __init__(self, name: str, handle: Any = None) -> None:
        self.name = name
        self._handle = handle

    @property
    def handle(self) -> Any:
        if self._handle is None:
            try:
                self._handle = ray.get_actor(self.name)
            except ValueError:  # no actor of that name: it died for good, which its callers take as any death
                raise RayActorError(error_msg=f"the actor {self.name} is gone for good") from None
        return self._handle

    def __getstate__(self) -> dict:
        return {"name": self.name, "_handle": None}  # found again by name where it is unpickled

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") or attribute in ("name", "_handle"):
            raise AttributeError(attribute)  # unpickling and copying look for these before the fields exist
        return getattr(self.handle, attribute)
