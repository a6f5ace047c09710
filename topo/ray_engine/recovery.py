"""What a source re-sends after a death, as a part of the source actor (`source.Source` mixes it in).

A worker that died may have lost the buffers it held: once it is up, the source drops what the aggregator
committed meanwhile and re-sends the rest with the same batch ids. After the aggregator restored a checkpoint, the
driver rewinds every source: what was acked before the rewind and is not committed is re-sent. A source that died
itself resumes like a Kafka consumer: it fences and flushes every worker, then routes the input positions not
committed, in order, with their original arrival times. Every re-send is counted by its cause.
"""

from __future__ import annotations

import time

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

from topo.ray_engine.mortal import until_back

PENDING, ACKED, FAILED = "pending", "acked", "failed"
RECOVERY_TIMEOUT_S = 120.0  # how long a source waits for a crashed worker or aggregator to come back


class Recovery:
    """The source's recovery: needs its replay buffer (`_buffer`), `_send`, `_commit`, `_release` and counters."""

    def _recover_suspects(self) -> None:
        while self._suspects:
            self._recover(self._suspects.pop())

    def _recover(self, w: int) -> None:
        """Worker w may have lost batches: once it is up, re-send those neither committed nor held by it now."""
        self.count.recoveries += 1
        mine = [b for b, e in self._buffer.items() if e.worker == w]
        incarnation, held = self._hello(w, mine)
        self._incarnation[w] = max(self._incarnation[w], incarnation)
        # asked after the new incarnation registered: no flush of an older one can commit anything from now on
        self._commit(self._ask("committed", self.index, mine))
        held = set(held)
        replays: dict[str, list] = {"worker": [], "flush": []}
        for b in sorted(mine):
            entry = self._buffer.get(b)  # answers taken while re-sending may commit later ones
            if entry is None or entry.state == PENDING:
                continue  # committed, or its answer will tell
            if b in held:
                if entry.state == FAILED:
                    entry.state, entry.incarnation = ACKED, incarnation  # the answer was lost, not the batch
                    self._release(entry)
                continue
            if entry.incarnation < incarnation:
                replays["worker"].append(entry)  # the incarnation that took it died
            elif entry.state == FAILED:
                replays["flush"].append(entry)  # the same incarnation flushed it, and the flush was lost
        self._replay(replays["worker"], "worker")
        if replays["flush"]:
            # lost with an aggregator that restarted (a source may learn of the ack only after the driver's rewind),
            # else refused or lost with the call
            restarted = self._ask("alive")["starts"] > 1
            self._replay(replays["flush"], "aggregator" if restarted else "worker")

    def _replay(self, entries: list, cause: str) -> None:
        """Send these entries again, with their batch ids, counted under `cause`."""
        if not entries:
            return
        tuples = sum(len(e.tuples) for e in entries)
        self.count.replays += len(entries)
        self.count.replayed_tuples += tuples
        self.count.replayed_by[cause] += tuples
        self._send(entries)

    def _take_rewinds(self) -> None:
        while self._rewinds:
            self._rewind(self._rewinds.pop(0))

    def _rewind(self, cut: float) -> None:
        """The aggregator restarted from a checkpoint: re-send what was acked before `cut` (so it was in a delta
        the workers flushed before the restored aggregator checkpointed) and is not committed."""
        self.count.rewinds += 1
        acked = [b for b, e in self._buffer.items() if e.state == ACKED and e.acked_s < cut]
        self._commit(self._ask("committed", self.index, acked))
        self._replay([self._buffer[b] for b in acked if b in self._buffer], "aggregator")

    def _ask(self, method: str, *args):
        """The aggregator's answer to `method(*args)`, asked again while it is down (restarting from its checkpoint)."""
        return until_back(lambda: ray.get(getattr(self.aggregator, method).remote(*args)),
                          lambda: RuntimeError(f"the aggregator did not come back within {RECOVERY_TIMEOUT_S:g} s"),
                          RECOVERY_TIMEOUT_S)

    def _resume(self) -> None:
        """This incarnation replaces one that died: fence and flush every worker, then route what is not
        committed, in order, from the original input."""
        clock = time.perf_counter()
        newest = -1
        for w in range(len(self.workers)):
            newest = max(newest, self._until_up(w, lambda w=w: self.workers[w].fence.remote(self.index, self.epoch)))
        for w in range(len(self.workers)):
            self._until_up(w, lambda w=w: self.workers[w].flush_now.remote(-1))
        done = self._ask("resume_source", self.index, self.epoch)
        todo, committed = np.flatnonzero(~done), np.flatnonzero(done)
        self._committed_at_resume = done
        self.positions = todo
        self.keys, self.seqs = self.keys[todo], self.seqs[todo]
        self.arrivals = None if self.arrivals is None else self.arrivals[todo]
        self.values = None if self.values is None else self.values[todo]
        self.node = self._node(self.keys, self.arrivals)
        # what the dead incarnation had sent reaches at least the newest position a worker received and the highest
        # one committed (it routed in order); below that, what is not committed is sent again
        sent_before = max((newest - self.index) // self.spec.sources, int(committed[-1]) if committed.size else -1)
        replayed = int(np.count_nonzero(todo <= sent_before))
        self.count.replayed_tuples += replayed
        self.count.replayed_by["source"] += replayed
        self.resumed = {"epoch": self.epoch, "committed": int(committed.size), "replayed_tuples": replayed,
                        "resume_s": time.perf_counter() - clock, "grouping_state": "rebuilt",
                        "first_position": int(todo[0]) if todo.size else None}

    def _until_up(self, w: int, call):
        """`ray.get(call())` on worker w, again while its process is down."""
        return until_back(lambda: ray.get(call(), timeout=10.0),
                          lambda: RuntimeError(f"worker {w} did not come back within {RECOVERY_TIMEOUT_S:g} s"),
                          RECOVERY_TIMEOUT_S, (RayActorError, GetTimeoutError))

    def _hello(self, w: int, batch_ids: list[int]) -> tuple[int, list[int]]:
        return self._until_up(w, lambda: self.workers[w].hello.remote(self.index, batch_ids))
