"""Keep the leases of running jobs fresh, so long jobs are not rescued from under us."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from time import monotonic

from .errors import TickqError
from .job import Job
from .store import SqlStore

log = logging.getLogger("tickq")


class LeaseKeeper:
    """A daemon thread renewing every held job's lease each ``lease_seconds / 3``.

    A job whose lease could not be renewed (rescued, cancelled, or the database unreachable
    until the lease ran out) is reported by ``lost()``: its outcome will not be recorded.
    """

    def __init__(self, store: SqlStore, owner: str, lease_seconds: float) -> None:
        self.store, self.owner, self.lease_seconds = store, owner, lease_seconds
        self._held: dict[int, float] = {}  # job id -> monotonic time its lease runs out
        self._lost: set[int] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def hold(self, jobs: Iterable[Job]) -> None:
        deadline = monotonic() + self.lease_seconds
        with self._lock:
            for job in jobs:
                self._held[job.id] = deadline
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="tickq-lease", daemon=True)
                self._thread.start()

    def drop(self, jobs: Iterable[Job]) -> None:
        with self._lock:
            for job in jobs:
                self._held.pop(job.id, None)
                self._lost.discard(job.id)

    def lost(self) -> set[int]:
        with self._lock:
            return set(self._lost)

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def renew(self) -> None:
        """One renewal pass (the loop's body; tests call it directly)."""
        with self._lock:
            ids = [i for i in self._held if i not in self._lost]
        if not ids:
            return
        started = monotonic()
        try:
            owned = self.store.extend_leases(self.owner, ids, self.lease_seconds)
        except TickqError as exc:
            log.warning("tickq could not renew %d job lease(s): %s", len(ids), exc)
            self._expire_overdue()
            return
        with self._lock:
            for job_id in ids:
                if job_id in owned and job_id in self._held:
                    self._held[job_id] = started + self.lease_seconds
                elif job_id in self._held:
                    self._lost.add(job_id)
                    log.warning("tickq job %s is no longer ours (rescued or cancelled)", job_id)

    def _expire_overdue(self) -> None:
        now = monotonic()
        with self._lock:
            self._lost.update(i for i, deadline in self._held.items() if deadline <= now)

    def _loop(self) -> None:
        while not self._stopped:
            self._wake.wait(self.lease_seconds / 3)
            if self._stopped:
                return
            try:
                self.renew()
            except Exception:  # never let the keeper die silently
                log.exception("tickq lease renewal failed unexpectedly")
