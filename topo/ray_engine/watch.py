"""The driver's watch over the actors that can die: their long calls, their deaths and their recoveries.

A source's or the controller's `run`, and the aggregator's `alive`, are long calls the driver keeps open; one that
fails with an actor error is a death. The watch then asks the actor now and then whether Ray has restarted it, and
once it answers restarts its part: a source's `run` (it resumes after what is committed), the controller's loop
(from its checkpointed version), or a rewind of every source after the aggregator restored its checkpoint. Workers
are recovered by their sources. Recoveries never block one another: several actors may be down at once.
"""

from __future__ import annotations

import time

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from topo.chaos import KILL_AGGREGATOR, KILL_CONTROLLER, KILL_SOURCE, label
from topo.errors import RunFailed, first_line
from topo.ray_engine.mortal import until_back

RECOVERY_TIMEOUT_S = 120.0  # an actor that died and does not answer again within this fails the run
POLL_S = 0.2  # the driver looks at progress, chaos, deaths and recoveries this often
STALL_S = 180.0  # a source that holds buffers and hears nothing this long (beyond any recovery's wait) is stuck
STALL_LOOK_S = 5.0  # the driver asks the sources whether they are stuck this often


class Watch:
    """The driver's view of the actors that can die: their long calls, their deaths and their recoveries."""

    def __init__(self, run, t0: float) -> None:
        self.run, self.t0 = run, t0
        self.calls: dict[tuple[str, int | None], ray.ObjectRef] = {
            (KILL_SOURCE, i): s.run.remote(t0) for i, s in enumerate(run.sources)}
        if run.control is not None:
            self.calls[(KILL_CONTROLLER, None)] = run.control.run.remote(t0)
        self.alive = run.aggregator.alive.remote()
        self.starts = 1
        self.restarting: dict[tuple[str, int | None], dict] = {}  # actors down, and the call that asks if they are up
        self.reports: dict[int, dict] = {}  # source -> its report, once it ended
        self.failures: list[dict] = []
        self.control: dict | None = None
        self._stall_look = time.time() + STALL_LOOK_S
        self._unanswered: dict[int, float] = {}  # source -> since when it has not answered whether it is stuck

    def refs(self) -> list:
        alive = [] if self.alive is None else [self.alive]
        return [*self.calls.values(), *alive, *(r["ref"] for r in self.restarting.values())]

    @property
    def sources_done(self) -> bool:
        return len(self.reports) == len(self.run.sources)

    def check(self, ready: list) -> None:
        """Take every long call that ended (a source's report, or a death to recover from), and go on with every
        recovery whose actor answers again. Recoveries never block: several actors may be down at once."""
        ready = set(ready)
        for (action, target), ref in list(self.calls.items()):
            if ref not in ready:
                continue
            try:
                value = ray.get(ref)
            except RayActorError:
                del self.calls[(action, target)]
                self._died(action, target)
                continue
            except RayTaskError as exc:  # it raised: the run cannot end exact, so it ends with the reason
                raise RunFailed(f"the {label(action, target)} failed: {first_line(exc.cause)}") from None
            del self.calls[(action, target)]
            if action == KILL_SOURCE:
                self.reports[target] = value
            else:
                self.control = value
        if self.alive is not None and self.alive in ready:
            try:
                starts = ray.get(self.alive)["starts"]
            except RayActorError:
                starts = None
            if starts != self.starts:  # dead now, or restarted since the last look
                self.alive = None
                self._died(KILL_AGGREGATOR, None)
            else:
                self.alive = self.run.aggregator.alive.remote()
        for key, row in list(self.restarting.items()):
            if row["ref"] in ready or time.time() >= row["retry_at"]:
                self._poke(key, row)

    def check_stalls(self, flush_s: float) -> None:
        """Fail the run, rather than wait forever, if a running source has held buffers (or waited for credit)
        without hearing an ack or a commit, or has not answered, for `STALL_S` (or three flush periods of `flush_s`
        seconds, the longest a commit may take), while no actor is down."""
        now = time.time()
        if now < self._stall_look:
            return
        self._stall_look = now + STALL_LOOK_S
        if self.restarting:  # a recovery under way has its own deadline
            self._unanswered.clear()
            return
        limit_s = max(STALL_S, 3 * flush_s)
        running = [i for i in range(len(self.run.sources)) if (KILL_SOURCE, i) in self.calls]
        refs = {i: self.run.sources[i].stalled.remote() for i in running}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=POLL_S)
        for i, ref in refs.items():
            try:
                info = ray.get(ref) if ref in ready else None
            except RayActorError:
                info = None  # died: its run's call tells the watch
            if info is None:
                since = self._unanswered.setdefault(i, now)
                if now - since > limit_s:
                    raise RunFailed(f"the run is stuck: source {i} has not answered for {now - since:.0f} s (a fault "
                                    "of the engine, not of the grouping)")
                continue
            self._unanswered.pop(i, None)
            if info["idle_s"] > limit_s:
                owed = ", ".join(map(str, info["workers"])) or "none"
                raise RunFailed(f"the run is stuck: source {i} has heard no ack or commit for {info['idle_s']:.0f} s "
                                f"while it holds {info['batches']} buffers (of workers {owed}); a fault of the "
                                "engine, not of the grouping")

    def settle(self) -> None:
        """Once the sources have ended: look once more whether the aggregator died since the last look (a death
        and restart between two looks, or one seen in the same look as the last report), and see every recovery
        under way through, so that every death is on the record with its times."""
        if self.alive is not None and (KILL_AGGREGATOR, None) not in self.restarting:
            try:
                starts = ray.get(self.run.aggregator.alive.remote(), timeout=RECOVERY_TIMEOUT_S)["starts"]
            except (RayActorError, GetTimeoutError):
                starts = None
            if starts != self.starts:
                self.alive = None
                self._died(KILL_AGGREGATOR, None)
        while self.restarting:
            refs = [row["ref"] for row in self.restarting.values()]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=POLL_S)
            for key, row in list(self.restarting.items()):
                if row["ref"] in ready or time.time() >= row["retry_at"]:
                    self._poke(key, row)

    def _died(self, action: str, target: int | None) -> None:
        """An actor died: from now on, ask it now and then whether Ray has restarted it."""
        now = time.time()
        row = {"actor": label(action, target), "detected_s": now - self.t0, "deadline": now + RECOVERY_TIMEOUT_S,
               "retry_at": now, "ref": self.run.actor(action, target).ready.remote()}
        self.restarting[(action, target)] = row

    def _poke(self, key: tuple, row: dict) -> None:
        action, target = key
        handle = self.run.actor(action, target)
        try:
            ray.get(row["ref"], timeout=0)
        except (RayActorError, GetTimeoutError):  # down still (or not yet answering): ask again a little later
            if time.time() > row["deadline"]:
                raise RunFailed(f"the {row['actor']} died {row['detected_s']:.1f} s into the run and did not come "
                                f"back within {RECOVERY_TIMEOUT_S:g} s") from None
            if time.time() >= row["retry_at"]:
                row["ref"], row["retry_at"] = handle.ready.remote(), time.time() + 1.0
            return
        failure = {k: row[k] for k in ("actor", "detected_s")}
        failure["back_s"] = time.time() - self.t0
        run = self.run
        try:
            if action == KILL_SOURCE:
                # the restarted source routes with the controller's version: one that is down too is waited for
                replica = ray.get(run.control.replica.remote(), timeout=POLL_S) if run.control is not None else None
                handle.resize.remote(run.active)  # before its run: the restarted source routes over today's workers
                self.calls[key] = handle.run.remote(self.t0, replica)
            elif action == KILL_CONTROLLER:
                self.calls[key] = handle.run.remote(self.t0)
            else:
                failure.update(self._rewind())
        except (RayActorError, GetTimeoutError):  # an actor it needs died (again) meanwhile: try again a little later
            row["ref"], row["retry_at"] = handle.ready.remote(), time.time() + POLL_S
            return
        del self.restarting[key]
        self.failures.append(failure)

    def _rewind(self) -> dict:
        """The aggregator restarted from its checkpoint: what it had merged since is lost. Every worker flushes
        what it holds, the aggregator checkpoints it, and every source re-sends what was acked before and is
        still not committed."""
        run = self.run
        info = ray.get(run.aggregator.alive.remote(), timeout=RECOVERY_TIMEOUT_S)
        self.starts = info["starts"]
        cut = time.time()
        for ref in [w.flush_now.remote(-1) for w in run.workers]:
            try:
                ray.get(ref, timeout=30.0)
            except (RayActorError, GetTimeoutError):
                pass  # a worker down too: its sources replay what it held
        ray.get(run.aggregator.checkpoint_now.remote(), timeout=RECOVERY_TIMEOUT_S)
        for i, source in enumerate(run.sources):
            if i not in self.reports:
                source.rewind.remote(cut)
        self.alive = run.aggregator.alive.remote()
        return {"restored": info["restored"]}

    def finish(self) -> None:
        """Stop the controller and take its report (a restart of it is recovered like any other)."""
        if self.run.control is None:
            return
        while (KILL_CONTROLLER, None) in self.calls or (KILL_CONTROLLER, None) in self.restarting:
            try:
                ray.get(self.run.control.stop.remote())
            except RayActorError:
                pass
            refs = self.refs()
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=POLL_S)
            self.check(ready)


def final_result(run) -> tuple:
    """The aggregator's result; one that is restarting answers once it has restored its checkpoint (by then every
    batch is committed, so nothing is lost)."""
    return until_back(lambda: ray.get(run.aggregator.result.remote()),
                      lambda: RunFailed(f"the aggregator died at the end of the run and did not come back within "
                                        f"{RECOVERY_TIMEOUT_S:g} s"), RECOVERY_TIMEOUT_S)
