"""Internal: keep the leases of running jobs fresh, so long jobs are not rescued from under us."""

from __future__ import annotations

import threading
from time import monotonic

from .context import forget_stop, request_stop
from .held import Holdings
from .logger import log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .held import Held
    from .job import Job
    from .store import SqlStore

CANCEL_CHECK = 1.0
"""Seconds between looks for cancel requests on jobs held that long (a read; a renewal,
every ``lease_seconds / 3``, reports them too): how soon a running job hears ``q.cancel``."""
LOOK_GAP = 0.1
"""Seconds at least between looks prompted by ``look_soon`` (a hint that anything changed)."""
RETRY = 0.5
"""Seconds between renewals while the database can't be reached: once it is back, the
holder renews within this, before any rescuer's grace after an outage runs out."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def leave_signals_to_main_thread() -> None:
    """Block SIGTERM and SIGINT in the calling (helper) thread. The kernel may hand a signal
    sent to the process to any thread that doesn't block it, and Python runs the handler
    only when the main thread next wakes: a worker draining for its grace period would not
    hear a second signal until then."""
    import signal

    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


class LeaseKeeper:
    """A daemon thread renewing every held job's lease each ``lease_seconds / 3``, and
    looking for cancel requests every ``CANCEL_CHECK`` seconds on jobs held that long.

    A job the database says is no longer ours (a renewal that went through without it:
    rescued, or finished elsewhere) is reported by ``lost()`` and to ``on_lost(ids)``: its
    outcome will not be recorded. A lease that ran out while the database could not be
    reached is not lost by itself: renewals go on every ``RETRY`` seconds until one goes
    through, and the database's answer then decides (the job still ``running`` under this
    owner and attempt: nobody took it over, and its lease and outcome are still ours).
    A job asked to stop (``q.cancel``) is told so (``context.request_stop``:
    ``JobContext.cancel_requested``, and an async job's task is cancelled). A renewal also
    confirms the start of the jobs said to have ``started`` since the last one: a long
    job's attempt then counts if its process dies.

    What it knows of each job is that job's ``Held`` record in ``holdings`` (its own, or
    the worker's, shared with the pool).
    """

    def __init__(
        self,
        store: SqlStore,
        owner: str,
        lease_seconds: float,
        on_lost: Callable[[set[int]], None] | None = None,
        holdings: Holdings | None = None,
    ) -> None:
        self.store, self.owner, self.lease_seconds = store, owner, lease_seconds
        self.on_lost = on_lost
        self.holdings = Holdings() if holdings is None else holdings
        self._renew_at = 0.0
        self._look_all = False  # look_now() was called: look at every held job at once
        self._looked = 0.0  # when look_soon() last prompted a look
        self._lock = threading.Lock()  # guards the thread's life (the records have their own)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.failing_since: float | None = None  # monotonic: renewals fail since then
        self.last_outage = 0.0  # seconds the last run of failed renewals lasted

    def hold(self, jobs: Iterable[Job], started: bool = False) -> None:
        """Renew the leases of ``jobs`` until dropped (``started``: they start now)."""
        self.holdings.add(jobs, self.lease_seconds, started)
        with self._lock:
            self._stopped = False  # a keeper stopped by close() comes back whole
            if self._thread is None:
                self._renew_at = monotonic() + self.lease_seconds / 3
                self._thread = threading.Thread(target=self._loop, name="tickq-lease", daemon=True)
                self._thread.start()

    def started(self, job: Job) -> None:
        """``job`` (held) started: the next renewal records it, unless a round trip does."""
        self.holdings.start(job)

    def finished(self, jobs: Iterable[Job]) -> set[int]:
        """``jobs`` ran and their outcomes are about to be recorded: keep renewing them until
        dropped, but a lease found gone meanwhile is the record's to judge (it is fenced), not
        a loss to warn about (the record itself may have just ended it). Returns the ids of
        those already known lost (``is_lost``)."""
        return self.holdings.recording(jobs)

    def drop(self, jobs: Iterable[Job]) -> None:
        """Stop renewing ``jobs`` (only the attempts held: a newer claim of the same job
        by this process keeps its lease)."""
        for job in self.holdings.drop(jobs):  # a newer claim's stop request stays
            forget_stop((job.id, job.attempts, self.owner))

    def lost(self) -> set[int]:
        """The ids of held jobs whose lease is gone."""
        return self.holdings.lost_ids()

    def is_lost(self, job: Job) -> bool:
        """True once ``job``'s lease is known to be gone (cheap: no lock, no copy)."""
        return self.holdings.is_lost(job)

    def holding(self) -> bool:
        """True while some job's lease is being renewed."""
        return bool(self.holdings)

    def stop(self) -> None:
        """Stop renewing now; the next ``hold`` starts again."""
        with self._lock:
            self._stopped = True
        self._wake.set()

    def idle(self) -> None:
        """Let the thread end if it holds nothing (it starts again on the next ``hold``);
        leases still held keep being renewed (a ``close()`` from another thread mid-job)."""
        self._wake.set()

    def look_now(self) -> None:
        """A job may have been asked to stop (Postgres NOTIFY): look at every held job now."""
        self._look_all = True
        self._wake.set()

    def look_soon(self) -> None:
        """Something changed in the database (SQLite's file watch): look at every held
        job, unless a look was prompted less than ``LOOK_GAP`` ago."""
        now = monotonic()
        if now - self._looked >= LOOK_GAP and self.holdings:
            self._looked = now
            self.look_now()

    def tend(self) -> None:
        """The loop's body: renew the leases when due, else look for cancel requests."""
        if monotonic() >= self._renew_at - 0.01:
            self.renew()
        else:
            everything, self._look_all = self._look_all, False
            self.check_cancels(everything)

    def check_cancels(self, everything: bool = False) -> None:
        """Look for cancel requests on the jobs held for ``CANCEL_CHECK`` seconds or more
        (a short job never costs a look; ``everything``: on every held job) and tell them
        to stop."""
        settled = float("inf") if everything else monotonic() - CANCEL_CHECK
        looked = self.holdings.to_look_at(settled)
        if not looked:
            return
        try:
            asked = self.store.cancel_requests(self.owner, list(looked))
        except Exception:  # the next renewal says what is wrong
            return
        self._ask_to_stop(looked, asked)

    def _ask_to_stop(self, looked: dict[int, Held], ids: Iterable[int]) -> None:
        asked = self.holdings.ask(looked[i] for i in ids if i in looked)
        for job in sorted(asked, key=lambda j: j.id):
            log.info("tickq job %s: cancel requested; asking attempt %s to stop", job.id,
                     job.attempts, extra={"event": "cancel_requested", "job_id": job.id,
                                          "attempt": job.attempts})  # fmt: skip
            request_stop((job.id, job.attempts, self.owner))

    def renew(self) -> None:
        """One renewal pass (tests call it directly); it also hears cancel requests."""
        self._renew_at = monotonic() + self.lease_seconds / 3
        renew, began = self.holdings.to_renew()
        if not renew:
            return
        started = monotonic()
        try:
            owned = self.store.extend_leases(self.owner, list(renew), self.lease_seconds, began)
        except Exception as exc:  # a raw driver error too: the database's, not the keeper's
            self._renewal_failed(len(renew), exc)
            return
        self._renewed()
        gone = self.holdings.renewed(renew, owned, began, started + self.lease_seconds)
        lost = {held.job.id for held in gone}
        for job_id in sorted(lost):
            log.warning("tickq job %s is no longer ours (rescued, or finished elsewhere)",
                        job_id, extra={"event": "lease_lost", "job_id": job_id})  # fmt: skip
        self._report(lost)
        self._ask_to_stop(renew, owned.cancel_requested)

    def _renewal_failed(self, count: int, exc: Exception) -> None:
        """Try again soon; say so once per outage. No lease is given up here: whether a job
        is still ours is the database's to say once it answers again."""
        now = monotonic()
        self._renew_at = now + min(RETRY, self.lease_seconds / 3)
        if self.failing_since is not None:
            return
        self.failing_since = now
        # INFO: whoever runs the jobs (worker, tick) says WARNING once for the outage.
        log.info("tickq could not renew %d job lease(s) (%s); trying again every %gs; a lease "
                 "that runs out meanwhile stays ours unless the job was taken over", count,
                 _first_line(exc), min(RETRY, self.lease_seconds / 3),
                 extra={"event": "lease_renewal_failed"})  # fmt: skip

    def _renewed(self) -> None:
        if self.failing_since is None:
            return
        self.last_outage = monotonic() - self.failing_since
        self.failing_since = None
        log.info("tickq lease renewals go through again after %.1fs", self.last_outage,
                 extra={"event": "lease_renewed"})  # fmt: skip

    def renew_now(self) -> None:
        """The database is back (the caller just reached it): renew at once, before any
        rescue, instead of at the next ``RETRY``."""
        if self.failing_since is not None or self.holdings:
            self._renew_at = 0.0
            self._wake.set()

    def _report(self, lost: set[int]) -> None:
        if lost and self.on_lost is not None:
            self.on_lost(lost)

    def _loop(self) -> None:
        leave_signals_to_main_thread()
        try:
            while self._carry_on():
                try:
                    self.tend()
                except Exception:  # never let the keeper die silently
                    log.exception("tickq lease renewal failed unexpectedly")
        finally:
            self.store.drop_connection()  # this thread's own connection

    def _carry_on(self) -> bool:
        """Wait for the next renewal or look; False (and the thread forgotten, so ``hold``
        starts a new one) once stopped or holding nothing."""
        self._wake.wait(max(0.0, min(CANCEL_CHECK, self._renew_at - monotonic())))
        with self._lock:
            self._wake.clear()
            if self._stopped or not self.holdings:
                self._thread = None
                return False
        return True
