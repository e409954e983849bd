"""Internal: the ``Runtime``, everything the drivers need of a ``Queue`` and no more.

The ``Queue`` facade builds one and hands it (or a narrower part of it) to the cycle, the
tick, the worker and the pool; none of them imports the facade.
"""

from __future__ import annotations

import os
import sys
import threading

from .clock import monotonic_of
from .logger import log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    from .clock import Clock
    from .enqueue import JobKind
    from .job import Job, NewJob
    from .job_options import EnqueueOptions
    from .lease import LeaseKeeper
    from .observe import Watcher
    from .outbox import Outbox
    from .registry import JobDefinition, Registry
    from .retention import Retention
    from .schedule import ScheduleDefinition
    from .store import SqlStore
    from .webhooks.definition import WebhookDefinition
    from .workflow.definition import WorkflowDefinition

    Hook = Callable[[Job], Any]


class Runtime:
    """Store, job registry, schedules, webhooks, lease settings and owner, failure/retry hooks."""

    def __init__(
        self,
        store: SqlStore,
        registry: Registry,
        lease_seconds: float,
        strict: bool,
    ) -> None:
        self.store, self.registry = store, registry
        self.lease_seconds, self.strict = lease_seconds, strict
        self.schedules: dict[str, ScheduleDefinition] = {}
        self.webhooks: dict[str, WebhookDefinition] = {}  # by path
        self.workflows: dict[str, WorkflowDefinition] = {}  # by name
        self.failure_hooks: list[Hook] = []
        self.retry_hooks: list[Hook] = []
        self.finish_hooks: list[Hook] = []  # a job ended: done, failed or cancelled
        self._owner: tuple[int, str] | None = None
        self._keeper: tuple[int, LeaseKeeper] | None = None
        self._outbox: tuple[int, Outbox] | None = None
        # One owner, keeper and outbox per process, whichever thread asks first: threads
        # that raced here each made their own owner, and claimed under one, finished under
        # the other (the outcome then stale, the job stuck running until its lease ran out).
        self._making = threading.RLock()
        self._declared: tuple[int, int] | None = None
        from .retention import DEFAULT_RETENTION

        self.retention: Retention | None = DEFAULT_RETENTION
        self.prune_not_before = 0.0  # monotonic: no look at the pruning pass before
        self.horizon_every = 60.0  # seconds between looks for a held horizon (tickq.horizon)
        self.horizon_not_before = 0.0  # monotonic: no look for a held horizon before

    @property
    def clock(self) -> Clock:
        return self.store.clock

    def monotonic(self) -> float:
        """The clock's monotonic reading: time budgets and the worker's pacing use it."""
        return monotonic_of(self.store.clock)()

    @property
    def owner(self) -> str:
        """Who holds the leases this process takes: host, pid and a random tag."""
        pid, made = os.getpid(), self._owner
        if made is not None and made[0] == pid:
            return made[1]
        with self._making:
            if self._owner is None or self._owner[0] != pid:
                self._owner = (pid, f"{_hostname()}:{pid}:{os.urandom(4).hex()}")
            return self._owner[1]

    @property
    def lease_keeper(self) -> LeaseKeeper:
        """This process's keeper of the leases ``process_jobs`` and ``tick`` hold."""
        pid, made = os.getpid(), self._keeper
        if made is not None and made[0] == pid:
            return made[1]
        with self._making:
            if self._keeper is None or self._keeper[0] != pid:
                from .lease import LeaseKeeper

                self._keeper = (pid, LeaseKeeper(self.store, self.owner, self.lease_seconds))
            return self._keeper[1]

    def outbox(self, make: Callable[[], Outbox]) -> Outbox:
        """This process's keeper of finished outcomes a tick or ``process_jobs`` had to
        return without recording (the database was away): sent again until it answers.
        ``make`` builds it on first need in this process (the cycle knows how)."""
        pid = os.getpid()
        with self._making:
            if self._outbox is None or self._outbox[0] != pid:
                self._outbox = (pid, make())
            return self._outbox[1]

    def flush_outbox(self) -> None:
        """First thing in a tick or cycle: record the outcomes held from earlier calls,
        before any rescue. A database error is raised (they stay held)."""
        outbox = self._outbox
        if outbox is not None and outbox[0] == os.getpid() and outbox[1].count():
            outbox[1].flush()

    def held_outcomes(self) -> int:
        """How many finished outcomes this process holds for the database."""
        outbox = self._outbox
        return outbox[1].count() if outbox is not None and outbox[0] == os.getpid() else 0

    def declare_limits(self) -> None:
        """Before this process claims: the limits its job types declare (or their absence)
        go to the database with its next claim, once per process and registry change. The
        last process to declare a type's limits sets them; every process obeys them."""
        mark = (os.getpid(), self.registry.version)
        if self._declared != mark:
            self._declared = mark
            self.store.declare_limits(self.registry.limits())

    def idle(self) -> None:
        """Let the lease keeper's thread end if it holds nothing (``Queue.close``), after
        one more try to record the outcomes held for the database (those it can't are
        dropped with a WARNING naming their jobs)."""
        if self._outbox is not None and self._outbox[0] == os.getpid():
            self._outbox[1].close()
        if self._keeper is not None:
            self._keeper[1].idle()

    def definition(self, job_type: str) -> JobDefinition | None:
        return self.registry.definition(job_type)

    def job_names(self) -> list[str]:
        return self.registry.job_names()

    def notify_failed(self, job: Job) -> None:
        """Run failure hooks; a hook that raises is logged and never stops the caller."""
        log.error("job %s %s failed after %s attempt(s): %s", job.id, job.type, job.attempts,
                  (job.last_error or "").split("\n", 1)[0],
                  extra={"event": "job_failed", "job_id": job.id, "job_type": job.type,
                         "attempt": job.attempts, "queue": job.queue})  # fmt: skip
        run_hooks(self.failure_hooks, job)

    def notify_retried(self, job: Job) -> None:
        """Run retry hooks (a failed attempt, retried later); a hook that raises is logged."""
        run_hooks(self.retry_hooks, job)

    def notify_finished(self, jobs: Iterable[Job]) -> None:
        """Run finish hooks for jobs whose end (done, failed, cancelled) was just recorded
        (integrations such as Django's ``task_finished`` signal); cheap when there are none."""
        if self.finish_hooks:
            for job in jobs:
                run_hooks(self.finish_hooks, job)

    def new_job(
        self,
        job_type: str,
        payload: Mapping[str, Any] | None = None,
        options: EnqueueOptions | None = None,
        meta: Mapping[str, Any] | None = None,
        external: bool = False,
    ) -> NewJob:
        """Validate one job and return the row to insert (no I/O). ``meta`` is tickq's
        own record on the job (a schedule's slot, a webhook's delivery), never a caller's;
        ``external``: the payload is JSON from outside, its typed values in JSON form."""
        return self.job_kind(job_type).new_job(self.clock, payload, options, meta, external)

    def job_kind(self, job_type: str) -> JobKind:
        """What ``new_job`` looks up about ``job_type``, for many jobs of it; raises for a
        type that can't be enqueued (unknown to a strict queue, or not a name)."""
        from .enqueue import job_kind

        return job_kind(self.registry, self.strict, job_type)

    def insert(self, jobs: Sequence[NewJob], conn: Any = None) -> list[int]:
        """Store ``jobs``; with ``conn`` in the caller's open transaction."""
        watchers = watching()
        if watchers:
            from .observe import sent

            return sent(watchers, jobs, lambda rows: self._insert(rows, conn))
        return self._insert(jobs, conn)

    def _insert(self, jobs: Sequence[NewJob], conn: Any) -> list[int]:
        if conn is None:
            return self.store.insert(jobs)
        from .store.foreign import insert_on

        return insert_on(self.store, conn, jobs)


def watching() -> list[Watcher]:
    """The watchers of enqueues, attempts and ticks (``tickq.observe``); empty, at the
    cost of two dict lookups, until the app imports OpenTelemetry or an integration
    registers one: until then not even ``tickq.observe`` is imported."""
    if "tickq.observe" not in sys.modules and "opentelemetry.trace" not in sys.modules:
        return NO_WATCHERS
    from .observe import watchers

    return watchers()


NO_WATCHERS: list[Watcher] = []  # never added to: the registry is tickq.observe.WATCHERS


def run_hooks(hooks: Sequence[Hook], job: Job) -> None:
    for hook in hooks:
        try:
            hook(job)
        except Exception:
            log.exception("tickq hook %r raised for job %s", hook, job.id)


def _hostname() -> str:
    try:
        return os.uname().nodename
    except AttributeError:  # Windows
        import platform

        return platform.node()
