"""The ``Queue``: declare jobs, enqueue them (in your transaction), and process them."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from .clock import SystemClock, require_aware
from .cycle import run_cycle
from .errors import ConfigurationError, UnknownJobType
from .job import Frozen, NewJob
from .job_options import (
    check_max_attempts,
    check_priority,
    check_queue,
    check_text,
    check_unique_key,
    check_unique_scope,
)
from .lease import LeaseKeeper
from .logger import log
from .payload import dump_payload
from .redact import redact_url
from .retry import as_backoff
from .signature import is_async, parameters, payload_names, signature_text
from .store import open_store

# typing, dataclasses and schedule (cronsim) cost a waking host milliseconds of import:
# imported for type checkers only, or when first needed.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any, Generic, ParamSpec, TypeVar, Unpack, overload

    from .alerts import Alerts, Sink
    from .clock import Clock
    from .job import Attempt, Job
    from .retry import Backoff
    from .schedule import ScheduleDefinition
    from .store import SqlStore
    from .web.asgi import AsgiApp
    from .web.endpoint import Endpoint, EndpointSettings
    from .web.wsgi import WsgiApp

    P = ParamSpec("P")
    R = TypeVar("R")
    FailureHook = Callable[[Job], Any]

    class _Generic(Generic[P, R]): ...

else:
    P = R = None

    class _Generic:
        """``JobFunction[P, R]`` at run time, without ``typing.Generic``."""

        __slots__ = ()

        def __class_getitem__(cls, params: object) -> type:
            return cls


DEFAULT_URL = "sqlite:///tickq.db"
DATABASE_ENV = "TICKQ_DATABASE_URL"
RESERVED_PARAMS = ("conn",)
# Set either and alerts are configured from the environment (tickq.alerts.sinks_from_env);
# otherwise tickq.alerts isn't imported at all, which a waking host would pay for.
ALERT_ENV = ("TICKQ_ALERT_WEBHOOK_URL", "TICKQ_ALERT_EMAIL_TO")
DEFAULT_MAX_CATCH_UP = 100  # tickq.schedule.DEFAULT_MAX_CATCH_UP (a test keeps them equal)


class JobDefinition(Frozen):
    """How to run one job type; built by ``@q.job``."""

    __slots__ = ()
    _fields = ("name", "fn", "max_attempts", "backoff", "queue", "priority", "timeout",
               "max_delay", "is_async", "context_param", "accepted", "required")  # fmt: skip
    _docs = {"accepted": "Keyword names the function takes; None: it takes **kwargs."}

    if TYPE_CHECKING:
        name: str
        fn: Callable[..., Any]
        max_attempts: int
        backoff: Backoff
        queue: str
        priority: int
        timeout: float | None
        max_delay: timedelta | None
        is_async: bool
        context_param: str | None
        accepted: frozenset[str] | None
        required: frozenset[str]

    def __new__(
        cls,
        name: str,
        fn: Callable[..., Any],
        max_attempts: int,
        backoff: Backoff,
        queue: str,
        priority: int,
        timeout: float | None,
        max_delay: timedelta | None,
        is_async: bool,
        context_param: str | None,
        accepted: frozenset[str] | None = None,
        required: frozenset[str] = frozenset(),
    ) -> JobDefinition:
        return tuple.__new__(cls, (
            name, fn, max_attempts, backoff, queue, priority, timeout, max_delay, is_async,
            context_param, accepted, required,
        ))  # fmt: skip

    @property
    def effective_max_delay(self) -> timedelta:
        """How late an enqueued job may start: ``max_delay``, else ``DEFAULT_MAX_DELAY``."""
        from .schedule import DEFAULT_MAX_DELAY

        return self.max_delay or DEFAULT_MAX_DELAY

    def check_payload(self, payload: Mapping[str, Any]) -> None:
        """Raise ``TypeError`` now if the job function could never accept ``payload``, or a
        value doesn't fit a simple annotation (``a="1"`` for ``a: int``)."""
        from .hints import mismatch

        problem = self.unfit(payload) or mismatch(self.fn, payload)  # type: ignore[arg-type]
        if problem:
            raise TypeError(
                f"payload does not fit job {self.name!r}{signature_text(self.fn)}: {problem}"
            )

    def unfit(self, payload: Mapping[str, Any]) -> str | None:
        """What keeps the function from ever taking ``payload`` as keywords, or None."""
        keys = payload.keys()
        unexpected = sorted(keys - self.accepted) if self.accepted is not None else []
        missing = sorted(self.required - keys)
        problems = [f"unexpected {', '.join(map(repr, unexpected))}"] if unexpected else []
        problems += [f"missing {', '.join(map(repr, missing))}"] if missing else []
        if self.accepted is None and self.context_param in keys:  # **kwargs would lose it
            problems.append(f"{self.context_param!r} is the name of its JobContext parameter")
        return "; ".join(problems) or None


class JobFunction(_Generic[P, R]):
    """A function registered with ``@q.job``: call it directly, or ``.enqueue(**kwargs)``."""

    def __init__(self, queue: Queue, definition: JobDefinition) -> None:
        self.queue = queue
        self.definition = definition
        self.name = definition.name
        self.__wrapped__ = definition.fn
        self.__doc__ = definition.fn.__doc__
        self.__name__ = definition.fn.__name__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.definition.fn(*args, **kwargs)  # type: ignore[no-any-return]

    def enqueue(self, *, conn: Any = None, **payload: Any) -> int:
        """Enqueue with ``payload`` as keyword arguments; ``conn=`` joins your transaction."""
        return self.queue.enqueue(self.name, payload, conn=conn)

    async def enqueue_async(self, *, conn: Any = None, **payload: Any) -> int:
        """``enqueue`` for async code; ``conn=`` takes an async connection or session."""
        return await self.queue.enqueue_async(self.name, payload, conn=conn)

    def with_options(self, **options: Any) -> _BoundEnqueue:
        """Enqueue with options: ``f.with_options(run_after=..., unique_key=...).enqueue(...)``."""
        return _BoundEnqueue(self, options)

    def __repr__(self) -> str:
        return f"<tickq job {self.name!r}>"


class _BoundEnqueue:
    def __init__(self, fn: JobFunction[Any, Any], options: dict[str, Any]) -> None:
        self.fn, self.options = fn, options

    def enqueue(self, *, conn: Any = None, **payload: Any) -> int:
        return self.fn.queue.enqueue(self.fn.name, payload, conn=conn, **self.options)

    async def enqueue_async(self, *, conn: Any = None, **payload: Any) -> int:
        return await self.fn.queue.enqueue_async(self.fn.name, payload, conn=conn, **self.options)


class Queue:
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
    ) -> None:
        if lease_seconds < 3:
            raise ConfigurationError(f"lease_seconds must be >= 3, got {lease_seconds}")
        self.url = database_url(url)
        self.store: SqlStore = open_store(self.url, clock or SystemClock())
        self.lease_seconds = float(lease_seconds)
        self.strict = strict
        self._definitions: dict[str, JobDefinition] = {}
        self.schedules: dict[str, ScheduleDefinition] = {}
        self._failure_hooks: list[FailureHook] = []
        self._retry_hooks: list[FailureHook] = []
        if callable(on_failure):
            self._failure_hooks.append(on_failure)
        elif on_failure is not None:
            self._failure_hooks.extend(on_failure)
        self._owner: tuple[int, str] | None = None
        self._keeper: tuple[int, LeaseKeeper] | None = None
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
        return f"<tickq.Queue {self.store.dialect} {shown!r} jobs={sorted(self._definitions)}>"

    @property
    def clock(self) -> Clock:
        """The clock deciding what is due. Replace it in tests: ``q.clock = FrozenClock()``."""
        return self.store.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.store.clock = clock

    # -- identity of this process as a lease owner --------------------------------------
    @property
    def owner(self) -> str:
        """Who holds the leases this process takes: host, pid and a random tag."""
        pid = os.getpid()
        if self._owner is None or self._owner[0] != pid:
            self._owner = (pid, f"{_hostname()}:{pid}:{os.urandom(4).hex()}")
        return self._owner[1]

    @property
    def lease_keeper(self) -> LeaseKeeper:
        pid = os.getpid()
        if self._keeper is None or self._keeper[0] != pid:
            self._keeper = (pid, LeaseKeeper(self.store, self.owner, self.lease_seconds))
        return self._keeper[1]

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
    ) -> Any:
        """Register a job function. ``backoff`` is seconds per retry, default (60, 300, 1800).

        ``max_attempts`` counts every attempt, the first included; after the last one fails
        the job is ``failed`` and failure hooks (alerts) run. ``timeout`` is in seconds.
        ``max_delay`` is how late an enqueued job may start (default 15 minutes); on a host
        that sleeps, ``tickq plan`` picks the tick interval from it.
        """
        max_attempts, priority = check_max_attempts(max_attempts), check_priority(priority)
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be positive seconds, got {timeout}")
        queue = check_queue(queue)
        policy = as_backoff(backoff)

        def register(f: Callable[P, R]) -> JobFunction[P, R]:
            definition = self._define(f, name, max_attempts, policy, queue, priority, timeout,
                                      max_delay)  # fmt: skip
            self._definitions[definition.name] = definition
            return JobFunction(self, definition)

        return register(fn) if fn is not None else register

    def _define(self, f: Callable[..., Any], name: str | None, max_attempts: int,
                backoff: Backoff, queue: str, priority: int, timeout: float | None,
                max_delay: timedelta | None) -> JobDefinition:  # fmt: skip
        from .context import JobContext

        job_name = name or f.__name__
        if job_name in self._definitions:
            raise ConfigurationError(f"a job named {job_name!r} is already registered")
        params = parameters(f)
        for reserved in RESERVED_PARAMS:
            if any(p[0] == reserved for p in params):
                raise ConfigurationError(
                    f"job {job_name!r} has a parameter named {reserved!r}, which .enqueue() "
                    "reserves for the caller's connection; rename the parameter"
                )
        context_param = next(
            (name for name, _, _, note in params if note in (JobContext, "JobContext")), None
        )
        accepted, required = payload_names(params, context_param)
        return JobDefinition(
            name=job_name, fn=f, max_attempts=max_attempts, backoff=backoff, queue=queue,
            priority=priority, timeout=timeout, max_delay=max_delay, is_async=is_async(f),
            context_param=context_param, accepted=accepted, required=required,
        )  # fmt: skip

    def definition(self, job_type: str) -> JobDefinition | None:
        return self._definitions.get(job_type)

    def job_names(self) -> list[str]:
        return list(self._definitions)

    def on_failure(self, hook: FailureHook) -> FailureHook:
        """Register ``hook(job)`` to run when a job reaches ``failed``; usable as decorator."""
        self._failure_hooks.append(hook)
        return hook

    def notify_failed(self, job: Job) -> None:
        """Run failure hooks; a hook that raises is logged and never stops the caller."""
        log.error("job %s %s failed after %s attempt(s): %s", job.id, job.type, job.attempts,
                  (job.last_error or "").split("\n", 1)[0])  # fmt: skip
        _run_hooks(self._failure_hooks, job)

    def on_retry(self, hook: FailureHook) -> FailureHook:
        """Register ``hook(job)`` to run after a failed attempt that will be retried."""
        self._retry_hooks.append(hook)
        return hook

    def notify_retried(self, job: Job) -> None:
        """Run retry hooks (a failed attempt, retried later); a hook that raises is logged."""
        _run_hooks(self._retry_hooks, job)

    # -- schema -------------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Create or upgrade tickq's tables. Idempotent and safe to run concurrently."""
        return self.store.migrate()

    def schema_sql(self) -> str:
        """The schema as SQL, for Alembic / Django migrations or a DBA."""
        return self.store.schema_sql()

    # -- enqueue ------------------------------------------------------------------------
    def new_job(
        self,
        job_type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        run_after: datetime | timedelta | None = None,
        unique_key: str | None = None,
        unique_scope: str = "active",
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> NewJob:
        """Validate one job and return the row to insert (no I/O)."""
        definition = self._definitions.get(job_type)
        if definition is None and self.strict:
            known = ", ".join(sorted(self._definitions)) or "none"
            raise UnknownJobType(
                f"no job type {job_type!r} is registered (registered: {known}); decorate "
                "the function with @q.job, or use Queue(strict=False) to enqueue types "
                "that another process handles"
            )
        check_text("job type", job_type)
        unique_scope = check_unique_scope(unique_scope)
        payload_json = dump_payload(payload, job_type)
        if definition is not None:
            definition.check_payload(payload or {})
        import json

        return NewJob(
            type=job_type, payload_json=payload_json,
            queue=check_queue(queue) if queue is not None else (
                definition.queue if definition else "default"),
            priority=check_priority(priority) if priority is not None else (
                definition.priority if definition else 0),
            max_attempts=check_max_attempts(max_attempts) if max_attempts is not None else (
                definition.max_attempts if definition else 4),
            run_after=self._run_after(run_after), unique_key=check_unique_key(unique_key),
            unique_scope=unique_scope if unique_key is not None else None,
            meta_json=json.dumps(dict(meta)) if meta else None,
        )  # fmt: skip

    def _run_after(self, run_after: datetime | timedelta | None) -> datetime | None:
        if run_after is None:
            return None
        if isinstance(run_after, timedelta):
            try:
                return self.clock.now() + run_after
            except OverflowError:
                raise ConfigurationError(
                    f"run_after {run_after!r} from now is past the year 9999"
                ) from None
        if isinstance(run_after, datetime):
            return require_aware(run_after, "run_after")
        raise TypeError(
            f"run_after must be a datetime or timedelta, got {type(run_after).__name__}"
        )

    def enqueue(
        self,
        job_type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        conn: Any = None,
        run_after: datetime | timedelta | None = None,
        unique_key: str | None = None,
        unique_scope: str = "active",
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
    ) -> int:
        """Store one job and return its id.

        With ``conn=`` the job is inserted in that connection's open transaction: commit and
        the job exists, roll back and it never did. With ``unique_key`` a second enqueue
        while one is pending or running (``unique_scope="all"``: while one exists at all)
        returns the existing job's id instead of adding another.

        The job receives exactly ``payload``, or nothing is stored: a value JSON would
        change or can't carry, a payload that doesn't fit the function (names, simple
        annotations) or a bad option raises ``TypeError`` / ``ValueError`` naming the field
        or option, the same on every backend (see docs/payloads.md).
        """
        job = self.new_job(
            job_type, payload, run_after=run_after, unique_key=unique_key,
            unique_scope=unique_scope, priority=priority, queue=queue,
            max_attempts=max_attempts,
        )  # fmt: skip
        return self.insert([job], conn)[0]

    async def enqueue_async(
        self,
        job_type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        conn: Any = None,
        run_after: datetime | timedelta | None = None,
        unique_key: str | None = None,
        unique_scope: str = "active",
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
    ) -> int:
        """``enqueue`` for async code: ``conn=`` takes a psycopg ``AsyncConnection`` or a
        SQLAlchemy ``AsyncConnection`` / ``AsyncSession``."""
        job = self.new_job(
            job_type, payload, run_after=run_after, unique_key=unique_key,
            unique_scope=unique_scope, priority=priority, queue=queue,
            max_attempts=max_attempts,
        )  # fmt: skip
        if conn is None:
            import asyncio

            return (await asyncio.to_thread(self.insert, [job]))[0]
        from .store.foreign import insert_on_async

        return (await insert_on_async(self.store, conn, [job]))[0]

    def enqueue_many(
        self,
        jobs: Iterable[
            tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], dict[str, Any]]
        ],
        *,
        conn: Any = None,
    ) -> list[int]:
        """Store many jobs at once: ``[(type, payload), (type, payload, {options}), ...]``.

        One statement per chunk of 1,000 on Postgres, one transaction on SQLite; returns
        the ids in input order. All or nothing: an invalid job stores none of them.
        """
        rows = []
        for item in jobs:
            job_type, payload, *rest = item
            rows.append(self.new_job(job_type, payload, **(rest[0] if rest else {})))
        return self.insert(rows, conn)

    def insert(self, jobs: Sequence[NewJob], conn: Any = None) -> list[int]:
        if conn is None:
            return self.store.insert(jobs)
        from .store.foreign import insert_on

        return insert_on(self.store, conn, jobs)

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
        ``failed``, ``cancelled``, ``rescued`` (jobs recovered from dead workers),
        ``stale`` (finished after losing their lease; not recorded), ``released`` and
        ``duration_ms``. With ``time_budget`` (seconds) no job is started once it is spent.
        """
        return run_cycle(self, limit, time_budget, queues)

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
        """
        from .worker import Worker

        handler = None
        if log_format is not None:
            from .logfmt import log_to_stderr

            handler = log_to_stderr(log_format)
        try:
            return Worker(
                self, queues=queues, concurrency=concurrency, poll_interval=poll_interval,
                grace=grace, stop=stop, listen_url=listen_url,
            ).run()  # fmt: skip
        finally:
            if handler is not None:
                from .logfmt import stop_logging

                stop_logging(handler)

    # -- inspection and manual transitions ----------------------------------------------
    def get_job(self, job_id: int) -> Job | None:
        """The job with this id, or None."""
        return self.store.get(job_id)

    def attempts(self, job_id: int) -> list[Attempt]:
        """Every attempt of a job, oldest first: start, end, outcome and error.

        ``outcome`` is ``error``, ``cancelled`` or ``lease_expired`` for attempts that did
        not succeed (``error_type``, ``error_message`` and ``traceback`` split the error),
        ``done`` for the successful one and ``running`` for one in progress.
        """
        return self.store.attempts(job_id)

    def list_jobs(
        self,
        status: str | None = None,
        type: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Job]:
        """Jobs newest first, filtered; page with ``before_id`` = last id seen."""
        return self.store.list_jobs(status, type, queue, limit, before_id)

    def retry(self, job_id: int) -> Job:
        """Put a failed or cancelled job back to pending, due now."""
        return self.store.retry(job_id)

    def retry_failed(
        self,
        type: str | None = None,
        *,
        batch: int = 500,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Put every failed job (of ``type``, when given) back to pending, in batches.

        Returns how many were retried; ``progress(done, total)`` runs after each batch.
        A failed job whose ``unique_key`` an active job holds stays failed.
        """
        if batch < 1:
            raise ConfigurationError(f"batch must be >= 1, got {batch}")
        total, done = self.store.count_failed(type), 0
        while ids := self.store.retry_failed(type, batch):
            done += len(ids)
            if progress is not None:
                progress(done, max(total, done))
        return done

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending or running job (a running one finishes but changes nothing)."""
        return self.store.cancel(job_id)

    def prune(
        self,
        older_than: timedelta = timedelta(days=7),
        *,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Delete done, failed and cancelled jobs finished more than ``older_than`` ago.

        Their attempts go with them; processed totals keep counting them.
        ``progress(deleted_so_far)`` runs after each batch of 5,000.
        """
        if older_than < timedelta(0):
            raise ConfigurationError(f"older_than must be >= 0, got {older_than}")
        return self.store.prune(older_than, progress=progress)

    def stats(self) -> dict[str, Any]:
        """What the queue holds and has done, as a JSON-ready dict.

        ``by_status``, ``by_queue`` and ``by_type`` (job counts), ``due`` and
        ``oldest_due_age_seconds``, ``failed_last_hour`` (jobs that reached failed),
        ``failed_attempts_last_hour``, ``processed[queue][type][outcome]`` (every finished
        attempt, pruned ones included) and ``duration_seconds[queue][type]`` (``count``,
        ``sum`` and cumulative ``buckets``): the same figures ``tickq.metrics`` exports.
        """
        return self.store.stats()

    def close(self) -> None:
        """Close this thread's database connection. The Queue stays usable: the next call
        connects again, and leases of jobs still running elsewhere keep being renewed."""
        if self._keeper is not None:
            self._keeper[1].idle()
        self.store.close()

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
            if definition.name in self.schedules:
                raise ConfigurationError(
                    f"a schedule named {definition.name!r} is already registered; "
                    "pass name= to tell them apart"
                )
            if isinstance(fn, JobFunction):
                if fn.queue is not self:
                    raise ConfigurationError(f"job {fn.name!r} belongs to another Queue")
                _callable_without_arguments(fn.definition)
                job = fn
            else:
                # The schedule's max_delay is about its slots; the job type gets none of
                # its own, so `tickq plan` doesn't also treat it as enqueued by the app.
                job = self.job(fn, name=name)
                try:
                    _callable_without_arguments(job.definition)
                except ConfigurationError:
                    del self._definitions[job.name]
                    raise
            self.schedules[definition.name] = definition
            return job

        return register

    def tick(self, limit: int = 100, time_budget: float | None = 20.0) -> dict[str, Any]:
        """What one scheduler call does: enqueue due schedule slots, then process jobs.

        Runs at most ``limit`` jobs and starts none after ``time_budget`` seconds. Returns
        a JSON-serialisable summary: ``schedules_enqueued`` ([{name, slot, job_id}]),
        ``jobs`` (claimed, succeeded, retried, failed, ...), ``remaining_due`` (due jobs
        left for the next call), ``next_due_at`` (ISO-8601 UTC of the next job or slot, or
        None), ``oldest_due_age_seconds``, ``ticked_at`` and ``duration_ms``.
        """
        from .tick import run_tick

        return run_tick(self, limit, time_budget)

    def enqueue_schedules(self) -> list[dict[str, Any]]:
        """Enqueue the schedule slots that have come due, without running anything."""
        from .tick import enqueue_schedules

        return enqueue_schedules(self)

    def health(
        self, expected_interval: timedelta = timedelta(minutes=15), *, alert: bool = True
    ) -> dict[str, Any]:
        """When the last tick ran; ``ok`` is False once it is older than twice the interval.

        A stale tick also raises the overdue alert (once an hour) and delivers it, unless
        ``alert=False``: pass that when an anonymous caller (a public route) triggers this.
        """
        from .tick import tick_health

        return tick_health(self, expected_interval, alert=alert)

    def endpoint(self, **options: Unpack[EndpointSettings]) -> Endpoint:
        """The framework-free tick and health endpoints behind every adapter below."""
        from .web.endpoint import Endpoint, EndpointOptions

        return Endpoint(self, EndpointOptions(**options))

    def asgi_app(self, **options: Unpack[EndpointSettings]) -> AsgiApp:
        """An ASGI app with ``POST /api/cron/tick`` and ``GET /api/cron/health``.

        The tick needs ``Authorization: Bearer $CRON_SECRET`` (``$CRON_SECRET_PREVIOUS`` is
        accepted too, for rotation); without a secret configured it answers 503 and runs
        nothing. Options: ``path``, ``health_path``, ``secret``, ``previous_secret``,
        ``allow_get`` (Vercel Cron calls with GET), ``limit``, ``max_limit`` (cap of
        ``?limit=``), ``time_budget``, ``expected_interval`` (health fails after twice
        that), ``max_wait`` (``?strict=1`` answers 500 past it, or on new failures) and
        ``heartbeat_url`` (default ``$TICKQ_HEARTBEAT_URL``).
        """
        from .web.asgi import AsgiApp

        return AsgiApp(self.endpoint(**options))

    def wsgi_app(self, **options: Unpack[EndpointSettings]) -> WsgiApp:
        """The same endpoints as a WSGI app; options as for ``asgi_app``."""
        from .web.wsgi import WsgiApp

        return WsgiApp(self.endpoint(**options))

    def flask_blueprint(self, name: str = "tickq", **options: Unpack[EndpointSettings]) -> Any:
        """The same endpoints as a Flask blueprint; options as for ``asgi_app``."""
        from .web.flask import blueprint

        return blueprint(self.endpoint(**options), name)

    def fastapi_router(self, **options: Unpack[EndpointSettings]) -> Any:
        """The same endpoints as a FastAPI router: ``app.include_router(q.fastapi_router())``
        adds ``POST /api/cron/tick`` and ``GET /api/cron/health`` beside the app's own
        routes (``prefix=`` moves them). Options as for ``asgi_app``."""
        from .web.fastapi import router

        return router(self.endpoint(**options))

    def django_urls(self, **options: Unpack[EndpointSettings]) -> list[Any]:
        """The same endpoints as Django URL patterns: ``urlpatterns += q.django_urls()``."""
        from .web.django import urls

        return urls(self.endpoint(**options))


def database_url(url: str | None) -> str:
    """The URL given, else ``$TICKQ_DATABASE_URL``, else ``sqlite:///tickq.db``; never ''."""
    if url is not None:
        if not isinstance(url, str):
            raise ConfigurationError(
                f"the database URL must be a str like 'sqlite:///app.db', got {type(url).__name__}"
            )
        if not url.strip():
            raise ConfigurationError(
                f"the database URL is empty ({url!r}): pass one, e.g. Queue('sqlite:///app.db') "
                f"or Queue('postgresql://user@host:5432/db'), or call Queue() to read "
                f"${DATABASE_ENV} (else {DEFAULT_URL})"
            )
        return url.strip()
    found = os.environ.get(DATABASE_ENV)
    if found is not None and not found.strip():
        raise ConfigurationError(
            f"${DATABASE_ENV} is set but empty: set it to the database URL, or unset it to "
            f"use {DEFAULT_URL}"
        )
    if found:
        log.info("tickq uses the database in $%s: %s", DATABASE_ENV, redact_url(found.strip()))
        return found.strip()
    log.info("tickq uses %s (./tickq.db in %s): no URL given and $%s is not set",
             DEFAULT_URL, os.getcwd(), DATABASE_ENV)  # fmt: skip
    return DEFAULT_URL


def _callable_without_arguments(definition: JobDefinition) -> None:
    try:
        definition.check_payload({})
    except TypeError:
        raise ConfigurationError(
            f"scheduled job {definition.name!r} is called with no arguments, but its "
            "function requires some; give them defaults (a JobContext parameter is fine)"
        ) from None


def _hostname() -> str:
    try:
        return os.uname().nodename
    except AttributeError:  # Windows
        import platform

        return platform.node()


def _run_hooks(hooks: Sequence[FailureHook], job: Job) -> None:
    for hook in hooks:
        try:
            hook(job)
        except Exception:
            log.exception("tickq hook %r raised for job %s", hook, job.id)
