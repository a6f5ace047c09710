"""The run's input, as a topic the sources consume: each source's share stays in Ray's object store, held by this
actor, and a source (a restarted one too) reads its share through it by name.

A restartable actor cannot take its input as a constructor argument: Ray re-runs the constructor with the same
object refs on a restart, and warns on every run that they may be gone by then. The topic never restarts (it holds
no state of the run, only the refs the driver also holds), so its own constructor may take them.
"""

from __future__ import annotations

from typing import Any

import ray


class InputTopic:
    """Each source's share of the stream, (keys, arrivals, values), by source index."""

    def __init__(self, shares: list) -> None:
        self.shares = shares  # object refs, nested so that Ray leaves them unresolved

    def ref(self, source: int) -> list:
        """[the object ref of source `source`'s share] (nested: the caller resolves it)."""
        return [self.shares[source]]


def read_share(topic: str, source: int) -> tuple[Any, Any, Any]:
    """Source `source`'s share, (keys, arrivals or None, values or None), from the run's topic named `topic`."""
    ref = ray.get(ray.get_actor(topic).ref.remote(source))[0]
    return ray.get(ref)
