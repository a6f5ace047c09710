"""A worker's flushes, as a part of the worker (`worker.Worker` mixes it in): every period the process's flusher
ships each worker's state delta since the last flush, with the batches it covers and their tuple log, to the
aggregator; the aggregator's answer says which batches are now durable, and the next ack to each source lists its
own, so the source can forget them. The operator's update and the log are built here, for every batch of the
period at once, not on the serving path.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import ray

from topo.ray_engine.protocol import Flush, concat_records, served_log
from topo.ray_engine.served import Served


def wait_ref(ref: ray.ObjectRef) -> Any:
    """The value of `ref`, blocking this thread only (never the actor's event loop, which stays free)."""
    return ref.future().result()


class Flushes:
    """Needs the worker's `index`, `incarnation`, `op`, `aggregator`, `_lock`, `_flushing`, `_registered`, `_served`,
    `_accepted_ids`, `_committed`, `flushes` and `state_peak`."""

    def _flush(self) -> bool:
        """Ship the state delta with the batches it covers and their tuple log; True if the aggregator took it."""
        with self._flushing:
            flush = self.delta()
            if flush is None:
                return True
            answer = None
            try:
                answer = wait_ref(self.aggregator.flush.remote(flush))
            finally:
                self.flushed(flush, answer)
            return bool(answer[0])

    def begin_flush(self) -> None:
        """Hold this worker's flushes (one at a time, each naming a registered incarnation) for `delta`."""
        self._registered.wait()
        self._flushing.acquire()

    def end_flush(self) -> None:
        self._flushing.release()

    def delta(self) -> Flush | None:
        """The state delta since the last flush, with the batches it covers and their log (None: nothing new). The
        caller holds `_flushing` and hands the aggregator's answer to `flushed`."""
        with self._lock:
            if not self._served:
                return None
            served, self._served = self._served, Served()
        state, log = self._fold(served)
        keys = self.op.distinct_keys(state)
        if keys > self.state_peak["keys"]:
            self.state_peak = {"keys": keys, "bytes": self.op.state_size_bytes(state)}
        sources = np.array(served.sources, np.int32)
        batch_ids = np.array(served.batch_ids, np.int64)
        return Flush(self.index, self.incarnation, sources, batch_ids, state, log)

    def _fold(self, served: Served) -> tuple[Any, dict[str, np.ndarray]]:
        """The operator's state over these batches, updated in service order, and their tuple log."""
        records = concat_records(served.tuples)  # one copy of every record, then its columns
        values = None if all(v is None for v in served.values) else np.concatenate(served.values)
        state = self.op.update(self.op.empty(), records["key"], values)
        log = served_log(records["seq"], records["arrival"], served.sizes(), served.sources, served.enqueued,
                         served.begins, served.finish_times())
        return state, log

    def flushed(self, flush: Flush, answer: tuple[bool, np.ndarray] | None) -> None:
        """The aggregator's answer to `flush`, (accepted, pairs now durable), or None if the call failed."""
        if self.metrics is not None:
            self.metrics.publish()  # the metrics go out per flush too, never per buffer
        self._forget(flush.sources, flush.batch_ids)
        if answer is None:
            return  # the delta is lost with the call: its batches stay uncommitted and their sources replay them
        accepted, durable = answer
        with self._lock:
            self.flushes["sent"] += 1
            # committed = durable in a checkpoint (maybe this flush's, maybe earlier ones'): sources may forget
            for source, batch_id in durable.tolist():
                self._committed[source].append(batch_id)
            if not accepted:
                self.flushes["rejected"] += 1  # the sources find those batches uncommitted and replay them

    def _forget(self, sources: np.ndarray, batch_ids: np.ndarray) -> None:
        """These batches left with a flush: from now on the aggregator, not this worker, knows whether they are
        merged. A re-send is served again (the aggregator restarted and lost them, or refused the flush), and
        `hello` no longer says this worker holds them, so their source re-sends them if they are not committed."""
        with self._lock:
            for source in np.unique(sources).tolist():
                self._accepted_ids[source].difference_update(batch_ids[sources == source].tolist())

    async def flush_now(self, source: int) -> np.ndarray:
        """Flush at once; the batch ids of `source` committed since its last ack (none for source -1)."""
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._flush)
        except ray.exceptions.RayActorError:
            pass  # the aggregator died with the flush: the batches stay uncommitted and are replayed
        with self._lock:
            return np.asarray(self._committed.pop(source, ()), np.int64)
