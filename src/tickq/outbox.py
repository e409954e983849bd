"""Internal: the ``Outbox``, where a process keeps finished jobs' outcomes the database
could not take before the call that ran them had to return (an HTTP tick must end).

One per process and ``Runtime``. The jobs stay held by the lease keeper, so their leases
are renewed as soon as the database answers; a daemon thread sends the outcomes again with
capped backoff, and every tick, ``process_jobs`` and cycle of the process sends them first
thing, before any rescue (a host that froze the process between requests records them on
its next request). Each outcome is fenced by owner and attempt: one whose job was taken
over meanwhile changes nothing, and its run's history row says it came late.
"""

from __future__ import annotations

import os
import threading
from time import monotonic

from .logger import log
from .trouble import Trouble, worth_retrying

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .job import Job
    from .lease import LeaseKeeper
    from .store import Outcome, Recorded, SqlStore

    Settle = Callable[[list[Outcome], Recorded, float], None]


class Kept:
    """Outcomes kept together: the owner they were reached under, the jobs whose start to
    record with them, and how long they had already waited when handed over."""

    __slots__ = ("kept_at", "outcomes", "owner", "started", "waited")

    def __init__(
        self, owner: str, outcomes: list[Outcome], started: list[Job], waited: float, at: float
    ) -> None:
        self.owner, self.outcomes, self.started = owner, outcomes, started
        self.waited, self.kept_at = waited, at


class Outbox:
    """Finished outcomes waiting for the database, for as long as the process lives."""

    def __init__(
        self,
        store: SqlStore,
        owner: Callable[[], str],
        keeper: LeaseKeeper,
        settle: Settle,
        clock: Callable[[], float] = monotonic,
        background: bool = True,
    ) -> None:
        """``settle(outcomes, recorded, waited)``: what the cycle does with outcomes the
        store just took (log, hooks, a late note on those found taken over)."""
        self.store, self.owner, self.keeper, self.settle = store, owner, keeper, settle
        self.clock = clock
        self.background = background  # False: only flush() sends (tests drive it)
        self._held: list[Kept] = []
        self._lock = threading.Lock()  # guards _held and _thread
        self._sending = threading.Lock()  # one send at a time: never the same outcome twice
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._trouble = Trouble("database (held outcomes)", quiet_first=True)
        self._pid = os.getpid()  # a forked child's copy is not the one holding them
        self._at_exit = False

    def keep(
        self, outcomes: Sequence[Outcome], started: Sequence[Job] = (), waited: float = 0.0
    ) -> None:
        """Hold ``outcomes`` (their jobs stay held by the lease keeper) until recorded."""
        if not outcomes:
            return
        held = Kept(self.owner(), list(outcomes), list(started), waited, self.clock())
        with self._lock:
            self._held.append(held)
            if not self._at_exit:  # a script that ends without close(): not silently
                import atexit

                atexit.register(self.close)
                self._at_exit = True
            if self.background and self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="tickq-outbox",
                                                daemon=True)  # fmt: skip
                self._thread.start()
        log.warning("tickq keeps %d finished job outcome(s) (jobs %s) the database could not "
                    "take yet; their leases are renewed and they are recorded once it answers",
                    len(held.outcomes), _ids(held.outcomes),
                    extra={"event": "outcomes_held", "jobs": _ids(held.outcomes)})  # fmt: skip

    def count(self) -> int:
        """How many outcomes are held for later."""
        with self._lock:
            return sum(len(h.outcomes) for h in self._held)

    def holds(self, job: Job) -> bool:
        with self._lock:
            return any(o.job.id == job.id and o.job.attempts == job.attempts
                       for h in self._held for o in h.outcomes)  # fmt: skip

    def flush(self) -> int:
        """Send every held outcome now (waiting for a send in flight); return how many the
        database took. A database error keeps them held and is raised; any other error
        drops them (logged: they run again after their lease)."""
        with self._sending:
            with self._lock:
                batch, self._held = self._held, []
            done = 0
            for i, held in enumerate(batch):
                try:
                    done += self._send(held)
                except Exception as exc:
                    if worth_retrying(exc):
                        with self._lock:
                            self._held[:0] = batch[i:]
                        raise
                    self._give_up(held, exc)
            return done

    def _send(self, held: Kept) -> int:
        recorded = self.store.record_and_claim(held.owner, held.outcomes, 0, 0.0,
                                               started=held.started)[0]  # fmt: skip
        self.keeper.drop(o.job for o in held.outcomes)
        waited = held.waited + max(0.0, self.clock() - held.kept_at)
        self.settle(held.outcomes, recorded, waited)
        log.info("tickq recorded %d held outcome(s) (jobs %s) after %.1fs", len(held.outcomes),
                 _ids(held.outcomes), waited,
                 extra={"event": "held_outcomes_recorded"})  # fmt: skip
        return len(held.outcomes) - len(recorded.stale)

    def _give_up(self, held: Kept, exc: Exception) -> None:
        self.keeper.drop(o.job for o in held.outcomes)
        log.error("tickq could not record the outcomes of jobs %s (%s: %s): they run again "
                  "after their lease", _ids(held.outcomes), type(exc).__name__, exc,
                  extra={"event": "held_outcomes_lost", "jobs": _ids(held.outcomes)})  # fmt: skip

    def close(self) -> None:
        """Try once more; outcomes still unrecorded are dropped with a WARNING naming their
        jobs (they run again after their lease: the process gives them up). Also run at
        the interpreter's exit while outcomes are held."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            self._thread, thread = None, self._thread
            if not self._held and thread is None:
                return
        self._wake.set()  # the thread sees it is no longer the outbox's and ends
        try:
            self.flush()
        except Exception as exc:
            with self._sending, self._lock:
                left, self._held = self._held, []
            outcomes = [o for h in left for o in h.outcomes]
            self.keeper.drop(o.job for o in outcomes)
            ids = _ids(outcomes)
            log.warning("tickq closing with %d finished job outcome(s) the database did not "
                        "take (%s): jobs %s stay running until their lease runs out, then run "
                        "again", len(outcomes), exc, ids,
                        extra={"event": "held_outcomes_dropped", "jobs": ids})  # fmt: skip

    def _loop(self) -> None:
        me = threading.current_thread()
        delay = Trouble.FIRST
        try:
            while True:
                self._wake.wait(delay)
                with self._lock:
                    self._wake.clear()
                    if self._thread is not me:
                        return
                    if not self._held:
                        self._thread = None
                        return
                try:
                    self.flush()
                except Exception as exc:
                    delay = self._trouble.happened(exc)
                else:
                    self._trouble.over()
                    delay = Trouble.FIRST
        finally:
            self.store.drop_connection()  # this thread's own connection


def _ids(outcomes: Sequence[Outcome]) -> list[int]:
    return sorted(o.job.id for o in outcomes)
