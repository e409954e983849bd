"""The ``Queue``: declare jobs, enqueue them (in your transaction), and process them."""

from __future__ import annotations

import os
from datetime import timedelta

from .clock import SystemClock
from .database import DATABASE_ENV as DATABASE_ENV
from .database import DEFAULT_URL as DEFAULT_URL
from .database import database_url
from .enqueueing import Enqueueing
from .errors import ConfigurationError
from .inspection import Inspection
from .job_options import DEFAULT_MAX_SNOOZE, JobOptions
from .redact import redact_url
from .registry import JobDefinition, JobFunction, Registry, check_no_arguments_needed, define
from .retention import DEFAULT_RETENTION, Retention, as_retention
from .runtime import Runtime
from .store import open_store
from .web_apps import WebFactories
from .workflow.facade import Workflows

# typing, dataclasses and schedule (cronsim) cost a waking host milliseconds of import:
# imported for type checkers only, or when first needed.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, ParamSpec, TypeVar, overload

    from .alerts import Alerts, Sink
    from .clock import Clock
    from .job import Job
    from .retry import Backoff
    from .schedule import ScheduleDefinition
    from .store import SqlStore

    P = ParamSpec("P")
    R = TypeVar("R")
    FailureHook = Callable[[Job], Any]

# Set either and alerts are configured from the environment (tickq.alerts.sinks_from_env);
# otherwise tickq.alerts isn't imported at all, which a waking host would pay for.
ALERT_ENV = ("TICKQ_ALERT_WEBHOOK_URL", "TICKQ_ALERT_EMAIL_TO")
DEFAULT_MAX_CATCH_UP = 100  # tickq.schedule.DEFAULT_MAX_CATCH_UP (a test keeps them equal)


class Queue(Enqueueing, Inspection, WebFactories, Workflows):
    """Durable jobs in your app's own database.

    >>> q = Queue("sqlite:///app.db")   # or postgresql://user@host:5432/db
    >>> q.migrate()
    >>> @q.job()
    ... def send_welcome_email(user_id: int) -> None: ...
    >>> job_id = send_welcome_email.enqueue(user_id=42)
    >>> q.process_jobs(limit=100)["succeeded"]
    1

    ``Queue()`` reads ``TICKQ_DATABASE_URL``, else uses ``sqlite:///tickq.db`` (the file
    ``tickq.db`` in the current folder) and logs at INFO which one it chose. An empty URL,
    or an empty ``TICKQ_DATABASE_URL``, is an error, never a quiet fallback.

    ``retention``: how long finished jobs stay before workers and ticks prune them
    (``tickq.retention.Retention``; default 7 days done or cancelled, 30 days failed;
    None keeps every job forever). See "Retention" in docs/jobs.md.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        lease_seconds: float = 60.0,
        strict: bool = True,
        on_failure: FailureHook | Iterable[FailureHook] | None = None,
        alerts: Alerts | Sequence[Sink] | None = None,
        retention: Retention | None = DEFAULT_RETENTION,
    ) -> None:
        if lease_seconds < 3:
            raise ConfigurationError(f"lease_seconds must be >= 3, got {lease_seconds}")
        self.url = database_url(url)
        """The database URL this queue uses (``repr(q)`` shows it without the password)."""
        self._runtime = Runtime(open_store(self.url, clock or SystemClock()), Registry(),
                                float(lease_seconds), strict)  # fmt: skip
        self._runtime.retention = as_retention(retention)
        if callable(on_failure):
            self._runtime.failure_hooks.append(on_failure)
        elif on_failure is not None:
            self._runtime.failure_hooks.extend(on_failure)
        self._alerts: Alerts | None = None
        if alerts is not None or any(os.environ.get(name) for name in ALERT_ENV):
            from .alerts import configure_alerts

            self._alerts = configure_alerts(self, alerts)

    @property
    def alerts(self) -> Alerts:
        """Alert sinks and rules (``tickq.alerts``); only the log sink when none is set."""
        if self._alerts is None:
            from .alerts import Alerts

            self._alerts = Alerts(from_env=False).bind(self)
        return self._alerts

    def __repr__(self) -> str:
        shown = redact_url(self.url)
        return f"<tickq.Queue {self._store.dialect} {shown!r} jobs={sorted(self.job_names())}>"

    @property
    def _store(self) -> SqlStore:
        """The database seam: every read and transition goes through it."""
        return self._runtime.store

    @property
    def lease_seconds(self) -> float:
        """How long a claimed job's lease lasts before another process may rescue it."""
        return self._runtime.lease_seconds

    @property
    def strict(self) -> bool:
        """Refuse to enqueue job types this process has not registered."""
        return self._runtime.strict

    @strict.setter
    def strict(self, strict: bool) -> None:
        self._runtime.strict = strict

    @property
    def _schedules(self) -> dict[str, ScheduleDefinition]:
        """The registered schedules, by name."""
        return self._runtime.schedules

    @property
    def clock(self) -> Clock:
        """The clock deciding what is due. Replace it in tests: ``q.clock = FrozenClock()``."""
        return self._store.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._store.clock = clock

    # -- declaring jobs -----------------------------------------------------------------
    if TYPE_CHECKING:

        @overload
        def job(self, fn: Callable[P, R], /) -> JobFunction[P, R]: ...
        @overload
        def job(
            self,
            fn: None = None,
            /,
            *,
            name: str | None = None,
            max_attempts: int = 4,
            backoff: Sequence[float] | Backoff | None = None,
            queue: str = "default",
            priority: int = 0,
            timeout: float | None = None,
            max_delay: timedelta | None = None,
            max_snooze: timedelta | None = DEFAULT_MAX_SNOOZE,
            concurrency: int | None = None,
            rate_limit: str | None = None,
            concurrency_key: str | Callable[[dict[str, Any]], str] | None = None,
        ) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...

    def job(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        max_attempts: int = 4,
        backoff: Sequence[float] | Backoff | None = None,
        queue: str = "default",
        priority: int = 0,
        timeout: float | None = None,
        max_delay: timedelta | None = None,
        max_snooze: timedelta | None = DEFAULT_MAX_SNOOZE,
        concurrency: int | None = None,
        rate_limit: str | None = None,
        concurrency_key: str | Callable[[dict[str, Any]], str] | None = None,
    ) -> Any:
        """Register a job function. ``backoff`` is seconds per retry, default (60, 300, 1800).

        ``max_attempts`` counts every attempt, the first included; after the last one fails
        the job is ``failed`` and failure hooks (alerts) run. ``timeout`` is in seconds.
        ``max_delay`` is how late an enqueued job may start (default 15 minutes); on a host
        that sleeps, ``tickq plan`` picks the tick interval from it.

        A job that waits for something outside it raises ``Snooze(seconds)`` to run again
        later without using up an attempt; ``max_snooze`` bounds how long it may keep
        snoozing, from its first snooze (default 24 hours; None: without bound). Past it the
        job fails, and failure hooks run.

        ``concurrency``: at most this many jobs of the type run at once, across every
        worker and tick on every machine. ``rate_limit``: at most so many start per second,
        minute or hour (``"10/s"``, ``"100/m"``, ``"1000/h"``). Jobs over a limit wait,
        pending, without spending an attempt; the database enforces both (docs/controls.md).
        ``concurrency_key``: apply both per distinct key instead of to the whole type: the
        name of a payload field (``"account_id"``; a str or int value) or a function of the
        payload returning a str, computed at enqueue. A key at its limit never holds up
        the other keys' jobs.
        """
        options = JobOptions(
            name=name, max_attempts=max_attempts, backoff=backoff, queue=queue,
            priority=priority, timeout=timeout, max_delay=max_delay, max_snooze=max_snooze,
            concurrency=concurrency, rate_limit=rate_limit, concurrency_key=concurrency_key,
        )  # fmt: skip
        return self._job(options)(fn) if fn is not None else self._job(options)

    def _job(self, options: JobOptions) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
        """``@q.job`` with its options checked: registers the decorated function."""

        def register(f: Callable[P, R]) -> JobFunction[P, R]:
            self._runtime.registry.check_new(options.name or f.__name__)
            return self._add_job(define(f, options))

        return register

    def _add_job(self, definition: JobDefinition) -> JobFunction[Any, Any]:
        """Register ``definition`` (``@q.job``, ``@q.webhook``, a Django task)."""
        self._runtime.registry.add(definition)
        return JobFunction(self, definition)

    def _definition(self, job_type: str) -> JobDefinition | None:
        """How this process runs ``job_type``, or None."""
        return self._runtime.registry.definition(job_type)

    def job_names(self) -> list[str]:
        """The registered job types."""
        return self._runtime.registry.job_names()

    def on_failure(self, hook: FailureHook) -> FailureHook:
        """Register ``hook(job)`` to run when a job reaches ``failed``; usable as decorator."""
        self._runtime.failure_hooks.append(hook)
        return hook

    def on_retry(self, hook: FailureHook) -> FailureHook:
        """Register ``hook(job)`` to run after a failed attempt that will be retried."""
        self._runtime.retry_hooks.append(hook)
        return hook

    # -- schema -------------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Create or upgrade tickq's tables. Idempotent and safe to run concurrently."""
        return self._store.migrate()

    def schema_sql(self) -> str:
        """The schema as SQL, for Alembic / Django migrations or a DBA."""
        return self._store.schema_sql()

    # -- processing ---------------------------------------------------------------------
    def process_jobs(
        self,
        limit: int = 100,
        time_budget: float | None = None,
        *,
        queues: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Claim up to ``limit`` due jobs, run them here, record each outcome.

        Returns a JSON-serialisable report: ``claimed``, ``succeeded``, ``retried``,
        ``snoozed`` (raised ``Snooze``: pending again, no attempt used), ``suspended``
        (workflow drivers now waiting for a step, a timer or an event), ``failed``,
        ``cancelled``, ``rescued`` (jobs recovered from dead workers),
        ``stale`` (finished after losing their lease; not recorded), ``released``,
        ``refunded`` (jobs a dead worker had claimed ahead and never started: back to
        pending, the attempt given back), ``held`` (finished outcomes the database could
        not take in time, kept by this process and recorded once it answers) and
        ``duration_ms``. With ``time_budget`` (seconds) no job is started once it is spent.
        """
        from .cycle import run_cycle

        return run_cycle(self._runtime, limit, time_budget, queues)

    def run_worker(
        self,
        *,
        queues: Sequence[str] | str | None = None,
        concurrency: int = 10,
        poll_interval: float | None = None,
        grace: float = 25.0,
        log_format: str | None = None,
        stop: threading.Event | None = None,
        listen_url: str | None = None,
        idle_check: float = 300.0,
    ) -> dict[str, Any]:
        """Run jobs in this process until SIGTERM/SIGINT (or ``stop.set()``); ``tickq worker``.

        Sync job functions run on up to ``concurrency`` threads and ``async def`` ones on one
        event loop, together at most ``concurrency`` jobs at a time. Idle, the worker sleeps
        until a job is enqueued (Postgres LISTEN/NOTIFY; on SQLite another process's commit
        to the file), the next job comes due, or ``poll_interval`` seconds pass (default
        5 on Postgres, 1 on SQLite). On stop it claims nothing more, waits up to ``grace``
        seconds for running jobs, then puts the rest back to pending without counting the
        attempt. ``log_format`` ("text" or "json") sends tickq's log lines to stderr; left
        None, logging is yours to configure. Returns the totals (``claimed``,
        ``succeeded``, ...). Behind a transaction pooler (``?pooler=transaction``) LISTEN
        hears nothing: give ``listen_url`` (or ``TICKQ_LISTEN_URL``), a direct connection
        to the same database, or the worker polls every ``poll_interval`` (default 1).
        With nothing running and nothing known to come due, the worker sends no query for
        ``idle_check`` seconds (default 300, so a serverless database that suspends after
        5 minutes without queries can sleep): LISTEN (or the SQLite file watch) still
        starts a new job at once, and it wakes when a known ``run_after``, retry, snooze,
        schedule slot or another worker's lease comes due.
        """
        from .worker import Worker

        handler = None
        if log_format is not None:
            from .logfmt import log_to_stderr

            handler = log_to_stderr(log_format)
        try:
            return Worker(
                self._runtime, queues=queues, concurrency=concurrency, poll_interval=poll_interval,
                grace=grace, stop=stop, listen_url=listen_url, idle_check=idle_check,
            ).run()  # fmt: skip
        finally:
            if handler is not None:
                from .logfmt import stop_logging

                stop_logging(handler)

    def close(self) -> None:
        """Close this thread's database connection. The Queue stays usable: the next call
        connects again, and leases of jobs still running elsewhere keep being renewed.
        Finished outcomes held for the database (see ``process_jobs``'s ``held``) get one
        more try; those it can't record are dropped, with a WARNING naming their jobs."""
        self._runtime.idle()
        self._store.close()

    # -- schedules and the tick (hosts that sleep) --------------------------------------
    def schedule(
        self,
        cron: str | None = None,
        /,
        *,
        every: timedelta | None = None,
        tz: str = "UTC",
        name: str | None = None,
        catch_up: str = "latest",
        max_catch_up: int = DEFAULT_MAX_CATCH_UP,
        max_delay: timedelta | None = None,
    ) -> Callable[[Callable[..., Any]], JobFunction[Any, Any]]:
        """Run the decorated function on a schedule; its runs are ordinary jobs (retries).

        >>> @q.schedule("0 9 * * 1-5", tz="Europe/Berlin")   # 09:00 Berlin time, Mon-Fri
        ... def send_daily_digest() -> None: ...
        >>> @q.schedule(every=timedelta(minutes=15))
        ... @q.job(max_attempts=2, timeout=60)             # stack on @q.job for job options
        ... def sync_calendar() -> None: ...

        ``cron`` has 5 fields (or ``@hourly``, ``@daily``...), evaluated in ``tz``; ``every``
        is a fixed interval counted from 1970-01-01 UTC. Nothing fires by itself: each
        ``q.tick()`` or ``q.enqueue_schedules()`` enqueues the slots that have come due (a
        running worker does so as each comes due), each one once ever. After a sleep,
        ``catch_up="latest"`` runs only the latest missed slot and ``"all"`` every one (the
        latest ``max_catch_up``); the job reads ``ctx.meta["slot"]`` and
        ``ctx.meta["missed"]``. The first tick that sees a schedule runs only its latest slot
        within ``max_delay`` (default 15 minutes), with ``missed`` 0: earlier slots are from
        before the schedule existed.
        """
        if callable(cron):
            raise ConfigurationError(
                "@q.schedule needs a schedule: @q.schedule('*/15 * * * *') or "
                "@q.schedule(every=timedelta(minutes=15))"
            )

        from .schedule import ScheduleDefinition

        def register(fn: Callable[..., Any]) -> JobFunction[Any, Any]:
            job_name = fn.name if isinstance(fn, JobFunction) else (name or fn.__name__)
            definition = ScheduleDefinition(
                name=name or job_name, job=job_name, cron=cron, every=every, tz=tz,
                catch_up=catch_up, max_catch_up=max_catch_up, max_delay=max_delay,
            )  # fmt: skip
            if definition.name in self._schedules:
                raise ConfigurationError(
                    f"a schedule named {definition.name!r} is already registered; "
                    "pass name= to tell them apart"
                )
            if isinstance(fn, JobFunction):
                if fn._queue is not self:
                    raise ConfigurationError(f"job {fn.name!r} belongs to another Queue")
                check_no_arguments_needed(fn._definition)
                job = fn
            else:
                # The schedule's max_delay is about its slots; the job type gets none of
                # its own, so `tickq plan` doesn't also treat it as enqueued by the app.
                job = self.job(name=name)(fn)
                try:
                    check_no_arguments_needed(job._definition)
                except ConfigurationError:
                    self._runtime.registry.remove(job.name)
                    raise
            self._schedules[definition.name] = definition
            return job

        return register

    def tick(self, limit: int = 100, time_budget: float | None = 20.0) -> dict[str, Any]:
        """What one scheduler call does: enqueue due schedule slots, then process jobs.

        Runs at most ``limit`` jobs and starts none after ``time_budget`` seconds. Returns
        a JSON-serialisable summary: ``schedules_enqueued`` ([{name, slot, job_id}]),
        ``jobs`` (claimed, succeeded, retried, snoozed, failed, ...), ``remaining_due`` (due jobs
        left for the next call, counted up to 1000: ``remaining_due_exact`` is False when
        there are at least that many), ``next_due_at`` (ISO-8601 UTC of the next job or slot, or
        None), ``oldest_due_age_seconds``, ``ticked_at`` and ``duration_ms``.
        """
        from .tick import run_tick

        return run_tick(self._runtime, limit, time_budget, self._alerts)

    def enqueue_schedules(self) -> list[dict[str, Any]]:
        """Enqueue the schedule slots that have come due, without running anything."""
        from .tick import enqueue_schedules

        return enqueue_schedules(self._runtime)

    def health(
        self, expected_interval: timedelta = timedelta(minutes=15), *, alert: bool = True
    ) -> dict[str, Any]:
        """When the last tick ran; ``ok`` is False once it is older than twice the interval.

        A stale tick also raises the overdue alert (once an hour) and delivers it, unless
        ``alert=False``: pass that when an anonymous caller (a public route) triggers this.
        """
        from .tick import tick_health

        return tick_health(self._runtime, expected_interval, alert, lambda: self.alerts)
