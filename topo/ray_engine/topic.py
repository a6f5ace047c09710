"""The runs' input, as a topic the sources consume: each source's share stays in Ray's object store, referenced by
this actor, and a source (a restarted one too) reads its share through it by name.

A restartable actor cannot take its input as a constructor argument: Ray re-runs the constructor with the same
object refs on a restart, and warns on every run that they may be gone by then. The topic never restarts (it holds
no state of a run, only refs the driver holds too), and one serves every run of a driver: an actor is a process,
and starting one per run cost about 0.4 s on 2 cores.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray

TOPIC = "topo-input-topic"  # one per driver (Ray namespaces keep drivers apart)
PUT_TIMEOUT_S = 60.0  # a source waits this long for its run's input to be put


class InputTopic:
    """Each run's shares of its stream, (keys, arrivals, values) by source index, under the run's name. An actor
    that asks before the driver's `put` arrived waits for it: the driver starts the run's processes first, and
    loads the stream and puts it while they start."""

    def __init__(self) -> None:
        self.shares: dict[str, list] = {}
        self.lengths: dict[str, list[int]] = {}
        self._put: dict[str, asyncio.Event] = {}

    def _arrived(self, run: str) -> asyncio.Event:
        return self._put.setdefault(run, asyncio.Event())

    async def put(self, run: str, shares: list, lengths: list[int]) -> None:
        """Hold the refs of `run`'s shares (nested in a list, so that Ray leaves them unresolved), and how many
        messages each holds."""
        self.shares[run] = shares
        self.lengths[run] = lengths
        self._arrived(run).set()

    async def drop(self, run: str) -> None:
        """The run is over: let its shares go."""
        self.shares.pop(run, None)
        self.lengths.pop(run, None)
        self._put.pop(run, None)

    async def ref(self, run: str, source: int) -> list:
        """[the object ref of the share of `source` in `run`] (nested: the caller resolves it), once put."""
        await asyncio.wait_for(self._arrived(run).wait(), PUT_TIMEOUT_S)
        return [self.shares[run][source]]

    async def share_lengths(self, run: str) -> list[int]:
        """Messages in each source's share of `run`, once put."""
        await asyncio.wait_for(self._arrived(run).wait(), PUT_TIMEOUT_S)
        return self.lengths[run]


_OPEN: dict[str, Any] = {}  # session -> the handle that keeps the topic alive (Ray ends an actor with its last handle)


def open_topic() -> Any:
    """The driver's topic, started on first use in this Ray session."""
    context = ray.get_runtime_context()
    job = f"{context.get_node_id()}/{context.get_job_id()}"  # job ids start again in a new local Ray; node ids do not
    if job not in _OPEN:
        _OPEN.clear()  # a handle of an earlier session is of no use
        remote = ray.remote(InputTopic).options(name=TOPIC, get_if_exists=True, max_restarts=0, num_cpus=0)
        _OPEN[job] = remote.remote()
    return _OPEN[job]


def read_share(run: str, source: int) -> tuple[Any, Any, Any]:
    """Source `source`'s share of `run`'s stream: (keys, arrivals or None, values or None)."""
    ref = ray.get(ray.get_actor(TOPIC).ref.remote(run, source))[0]
    return ray.get(ref)


def read_lengths(run: str) -> list[int]:
    """Messages in each source's share of `run`'s stream (the aggregator sizes its commit table by them)."""
    return ray.get(ray.get_actor(TOPIC).share_lengths.remote(run))
