"""What a source re-sends after a death, as a part of the source actor (`source.Source` mixes it in).

A worker that died may have lost the buffers it held: once it is up, the source drops what the aggregator
committed meanwhile and re-sends the rest with the same batch ids. After the aggregator restored a checkpoint, the
driver rewinds every source: what was acked before the rewind and is not committed is re-sent. A source that died
itself resumes like a Kafka consumer: it fences and flushes every worker, then routes the input positions not
committed, in order, with their original arrival times. Every re-send is counted by its cause. At the end, the
source drains: it waits for every answer and flushes the workers until every batch it sent is committed. A source
that owes acks and hears nothing asks its workers whether they restarted unseen (`_probe`), and tells the driver
how long it has been silent (`stalled`), which fails a run stuck for good rather than wait forever.
"""

from __future__ import annotations

import time

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

from topo.ray_engine.mortal import until_back

PENDING, ACKED, FAILED = "pending", "acked", "failed"
RECOVERY_TIMEOUT_S = 120.0  # how long a source waits for a crashed worker or aggregator to come back
PROBE_S = 2.0  # a source that owes acks and has heard nothing this long asks its workers whether they restarted


class Recovery:
    """The source's recovery: needs its replay buffer (`_buffer`), `_send`, `_commit`, `_release` and counters."""

    def _silent(self) -> bool:
        """Whether the source waits for acks, has heard nothing for `PROBE_S`, and has not asked since."""
        now = time.time()
        return now >= self._probe_at and now - self.news_at >= PROBE_S and any(self._pending.values())

    def _probe(self) -> None:
        """A worker process that died while this source's poll was on its way to it answers that poll from its
        next incarnation, which never got the buffers the dead one lost, and no error tells the source. So a
        silent source asks each worker it waits on for its incarnation: what a newer one than the source last
        heard from has not accepted is lost with the old one, and is recovered like the buffers of a failed poll."""
        self._probe_at = time.time() + PROBE_S
        owed: dict[int, list[int]] = {}
        for waiting in self._pending.values():
            for w, b in waiting:
                owed.setdefault(w, []).append(b)
        asked = {w: self.workers[w].hello.remote(self.index, ids) for w, ids in owed.items()}
        for w, ref in asked.items():
            try:
                incarnation, held = ray.get(ref, timeout=PROBE_S)
            except (RayActorError, GetTimeoutError):
                continue  # down now: the poll fails, or the next probe asks again
            if incarnation <= max(self._incarnation[w], 0):
                continue  # the incarnation the buffers went to: they are queued, their acks will come
            waiting = self._pending[self.workers[w].host_index]
            held = set(held)
            for b in owed[w]:
                entry = None if b in held else waiting.pop((w, b), None)
                if entry is not None:
                    self._lost(entry)
            self._suspects.add(w)  # (also when it holds them all: its recovery notes the new incarnation)

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

    # --- the end, and a source that hears nothing

    def _drain(self) -> None:
        """Wait for every answer, then flush the workers until the aggregator has merged every batch sent."""
        while self._buffer:
            while refs := self._all_inflight():
                self._wait(refs, PROBE_S)
                if self._silent():
                    self._probe()
                self._recover_suspects()
                self._take_rewinds()
            owed = sorted({e.worker for e in self._buffer.values()})
            for w in owed:
                try:
                    self._commit(ray.get(self.workers[w].flush_now.remote(self.index)))
                except RayActorError:
                    self._suspects.add(w)
            self._recover_suspects()
            self._take_rewinds()
            if self._all_inflight():
                continue
            left = list(self._buffer)
            self._commit(self._ask("committed", self.index, left))
            for entry in list(self._buffer.values()):
                if entry.state == ACKED:  # acked, then flushed, yet not merged: the flush was refused
                    self.count.lost_flushes += 1
                    entry.state = FAILED
                    self._suspects.add(entry.worker)
            self._recover_suspects()

    def stalled(self) -> dict:
        """Seconds since this source last heard an ack or a commit or routed a tuple, while it holds buffers or
        waits for credit (0 while it waits only for its input), and the workers its buffers wait on."""
        entries = list(self._buffer.values())
        with self._lock:
            waiting = bool(entries) or self.node.waits_for_acks()
        return {"idle_s": time.time() - self.news_at if waiting else 0.0, "batches": len(entries),
                "workers": sorted({e.worker for e in entries})}
