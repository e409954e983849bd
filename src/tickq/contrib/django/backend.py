"""``TickqBackend``: Django's Tasks API on tickq's queue, in Django's own database."""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from ...errors import ConfigurationError
from ...job import Job
from ...job_options import DEFAULT_JOB_OPTIONS, DEFAULT_MAX_SNOOZE, EnqueueOptions, JobOptions
from ...payload_types import PayloadTypes
from ...queue import Queue
from ...registry import JobFunction, define
from .compat import BaseTaskBackend, InvalidTask, Task, TaskResultDoesNotExist, normalize_json
from .database import database_url


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TickqTask(Task):
    """A Django ``Task`` with tickq's options, set as ``@task(...)`` keyword arguments:
    ``max_attempts`` (default 4), ``backoff`` (seconds per retry, default 60, 300, 1800),
    ``timeout`` (seconds), ``max_snooze`` (how long the task may keep raising
    ``tickq.Snooze``, default 24 hours; None: no bound) and, per enqueue,
    ``.using(unique_key=...)``."""

    max_attempts: int | None = None
    backoff: Sequence[float] | None = None
    timeout: float | None = None
    max_snooze: timedelta | None = DEFAULT_MAX_SNOOZE
    unique_key: str | None = None

    def using(self, *, unique_key: str | None = None, **changes: Any) -> TickqTask:
        """Django's ``using`` (priority, queue_name, run_after, backend), plus ``unique_key``:
        while a job with that key is pending or running, enqueueing returns that job."""
        task: TickqTask = Task.using(self, **changes)
        return dataclasses.replace(task, unique_key=unique_key) if unique_key else task


class TickqBackend(BaseTaskBackend):
    """Runs Django tasks with tickq: retries with backoff, alerts, schedules, a worker
    (``manage.py tickq_worker``) or a protected tick URL for hosts that sleep."""

    task_class = TickqTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.database = self.options.get("DATABASE", "default")
        unknown = sorted(set(self.options) - {"DATABASE"})
        if unknown:
            raise ConfigurationError(
                f"TASKS[{alias!r}]['OPTIONS'] has unknown keys {unknown}; tickq takes DATABASE"
            )
        # Django makes a backend per thread (and per async context): what tasks and
        # schedules the alias has, and its Queue, are the process's, shared by all of them.
        self._shared = _shared(alias)
        self._shared.database = self.database

    # -- the tickq Queue behind it ------------------------------------------------------
    @property
    def queue(self) -> Queue:
        """The tickq ``Queue`` storing this backend's jobs in ``DATABASES[DATABASE]``, one
        per process for each alias; built again when Django's settings for it change (a
        test run's test database)."""
        url = database_url(self.database)
        shared = self._shared
        with shared.lock:
            if shared.queue is None or shared.queue.url != url:
                previous, shared.queue = shared.queue, self._build(url)
                if previous is not None:
                    previous.close()
                    _carry_webhooks(previous, shared.queue)
            return shared.queue

    def per_queue(self, name: str, build: Callable[[Queue], Any]) -> Any:
        """``build(queue)`` made once per Queue and kept (the tick endpoint, the dashboard)."""
        q = self.queue
        with self._shared.lock:
            found = self._shared.views.get(name)
            if found is None or found[0] is not q:
                found = self._shared.views[name] = (q, build(q))
            return found[1]

    def _build(self, url: str) -> Queue:
        from .run import retried

        q = Queue(url)
        q._runtime.finish_hooks.append(functools.partial(self._finished, q))
        q._runtime.retry_hooks.append(functools.partial(retried, q))
        for task in self._shared.tasks.values():
            self._define(q, task, self._shared.options[task.module_path])
        for name, args, options in self._shared.schedules:
            q.schedule(*args, name=name, **options)(_job_function(q, name))
        return q

    def _finished(self, q: Queue, job: Job) -> None:
        if job.type in self._shared.tasks:
            from .run import finished

            finished(self, q, job)

    def _define(self, q: Queue, task: TickqTask, options: JobOptions) -> None:
        from .run import runner

        q._add_job(define(runner(self, task, q), options))

    def add_schedule(self, task: TickqTask, args: tuple[Any, ...], options: dict[str, Any]) -> None:
        with self._shared.lock:
            self._shared.schedules.append((task.module_path, args, options))
            q = self._shared.queue
            if q is not None:
                q.schedule(*args, name=task.module_path, **options)(
                    _job_function(q, task.module_path)
                )

    # -- Django's backend API -----------------------------------------------------------
    def check(self, **kwargs: Any) -> list[Any]:
        """``manage.py check``: without ``tickq.contrib.django`` in ``INSTALLED_APPS``
        ``migrate`` creates no tables and no app's ``tasks.py`` is imported at start-up."""
        from django.apps import apps
        from django.core import checks

        found = list(super().check(**kwargs))
        if not apps.is_installed("tickq.contrib.django"):
            found.append(checks.Error(
                f"TASKS[{self.alias!r}] uses TickqBackend, but 'tickq.contrib.django' is not "
                "in INSTALLED_APPS: manage.py migrate creates no tickq tables and no app's "
                "tasks.py is imported at start-up",
                hint="add 'tickq.contrib.django' to INSTALLED_APPS, then run manage.py migrate",
                obj=self, id="tickq.E001",
            ))  # fmt: skip
        return found

    def validate_task(self, task: Task) -> None:
        from .run import task_types

        super().validate_task(task)
        if not isinstance(task, TickqTask):
            raise InvalidTask(f"{task.module_path} is not a tickq task; use @task from django")
        try:
            options = job_options(task)
        except (ConfigurationError, TypeError, ValueError) as exc:
            raise InvalidTask(f"{task.module_path}: {exc}") from None
        with self._shared.lock:
            if task.module_path not in self._shared.tasks:
                self._shared.tasks[task.module_path] = task
                self._shared.options[task.module_path] = options
                self._shared.types[task.module_path] = task_types(task)
                if self._shared.queue is not None:
                    self._define(self._shared.queue, task, options)

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        from django.db import connections

        from .results import enqueued

        self.validate_task(task)
        args, kwargs = self._shared.types[task.module_path].dump_call(
            list(args), dict(kwargs), task.module_path
        )
        payload = {"args": normalize_json(args), "kwargs": normalize_json(kwargs)}
        job_id = self.queue._enqueue(
            task.module_path, payload, enqueue_options(task), connections[self.database]
        )
        return enqueued(self, task, job_id, payload)

    def get_result(self, result_id: str) -> Any:
        from .results import result_of

        job_id = _job_id(result_id)
        job = self.queue.get_job(job_id) if job_id is not None else None
        if job is None:
            raise TaskResultDoesNotExist(f"no tickq job with id {result_id!r}")
        return result_of(self, job, self.queue.attempts(job.id))

    def task_of(self, module_path: str) -> TickqTask:
        """The task a job type names, imported if this process hasn't seen it yet."""
        task = self._shared.tasks.get(module_path)
        if task is None:
            from django.utils.module_loading import import_string

            try:
                found = import_string(module_path)  # defining the task registers it
            except ImportError as exc:
                raise ConfigurationError(
                    f"job type {module_path!r} names a task this process can't import ({exc}); "
                    "define tasks in an app's tasks.py or import their module at start-up"
                ) from None
            if isinstance(found, TickqTask) and found.backend == self.alias:
                self.validate_task(found)  # imported before this alias's backend existed
            task = self._shared.tasks.get(module_path)
        if task is None:
            raise ConfigurationError(f"{module_path!r} is not a task of TASKS[{self.alias!r}]")
        return task


@dataclasses.dataclass(eq=False)
class _Shared:
    """One alias's tasks, schedules and Queue, for every backend Django makes of it."""

    tasks: dict[str, TickqTask] = dataclasses.field(default_factory=dict)
    options: dict[str, JobOptions] = dataclasses.field(default_factory=dict)  # by task
    types: dict[str, PayloadTypes] = dataclasses.field(default_factory=dict)  # by task
    schedules: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = dataclasses.field(
        default_factory=list
    )
    queue: Queue | None = None
    database: str = "default"
    views: dict[str, tuple[Queue, Any]] = dataclasses.field(default_factory=dict)
    lock: threading.RLock = dataclasses.field(default_factory=threading.RLock)


_SHARED: dict[str, _Shared] = {}
_SHARED_LOCK = threading.Lock()


def _shared(alias: str) -> _Shared:
    with _SHARED_LOCK:
        return _SHARED.setdefault(alias, _Shared())


def let_go(**signal: Any) -> None:
    """Close this thread's tickq connections (the next call opens one again) where Django
    closes its own: after a request (``request_finished``), when the database's
    ``CONN_MAX_AGE`` says so (0, the default: after every request; N seconds: once the
    connection is that old; None: never), and always when Django connects to no database
    (``connection_created`` with no database: it creates or drops one, as its test runner
    does at the end) — a connection left open there would keep ``DROP DATABASE`` from
    running ("N other sessions are using the database")."""
    from django.db.backends.base.base import NO_DB_ALIAS

    connection = signal.get("connection")
    if connection is not None and connection.alias != NO_DB_ALIAS:
        return
    with _SHARED_LOCK:
        held = [(s.database, s.queue) for s in _SHARED.values() if s.queue is not None]
    for database, q in held:
        if connection is not None or _too_old(q, database):
            q._store.drop_connection()


def _too_old(q: Queue, database: str) -> bool:
    """Whether ``CONN_MAX_AGE`` of Django's ``database`` ends tickq's connection to it now."""
    from django.conf import settings

    max_age = settings.DATABASES.get(database, {}).get("CONN_MAX_AGE", 0)
    if max_age is None:
        return False  # persistent, as Django's own
    age = q._store.connection_age()
    return age is not None and age >= max_age


def _job_id(result_id: Any) -> int | None:
    text = str(result_id)
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None


def job_options(task: TickqTask) -> JobOptions:
    """The job options of ``task`` (Django's ``queue_name`` and ``priority`` are per
    enqueue: ``enqueue_options``)."""
    attempts = task.max_attempts
    return JobOptions(
        name=task.module_path, backoff=task.backoff, timeout=task.timeout,
        max_snooze=task.max_snooze,
        max_attempts=DEFAULT_JOB_OPTIONS.max_attempts if attempts is None else attempts,
    )  # fmt: skip


def enqueue_options(task: TickqTask) -> EnqueueOptions:
    """The options each enqueue of ``task`` stores its job with."""
    return EnqueueOptions(
        run_after=task.run_after, unique_key=task.unique_key, priority=task.priority,
        queue=task.queue_name, max_attempts=task.max_attempts,
    )  # fmt: skip


def _check_schedule(
    task: TickqTask, cron: str | None, every: timedelta | None, options: dict[str, Any]
) -> None:
    """Refuse a bad schedule, or a task that needs arguments, at decoration time."""
    import inspect

    from ...schedule import ScheduleDefinition

    name = task.module_path
    unknown = sorted(set(options) - {"tz", "catch_up", "max_catch_up", "max_delay"})
    if unknown:
        raise ConfigurationError(f"schedule() of {name}: unknown options {unknown}")
    ScheduleDefinition(name=name, job=name, cron=cron, every=every, **options)
    try:
        inspect.signature(task.func).bind(*([None] if task.takes_context else []))
    except TypeError:
        raise ConfigurationError(
            f"scheduled task {name} is called with no arguments, but its function requires "
            "some; give them defaults"
        ) from None


def _carry_webhooks(previous: Queue, q: Queue) -> None:
    """Webhooks declared with ``@queue().webhook`` stay when the Queue is built again."""
    for path, webhook in previous._runtime.webhooks.items():
        definition = previous._definition(webhook.job)
        if definition is not None and webhook.job not in q._runtime.registry:
            q._runtime.registry.add(definition)
        q._runtime.webhooks[path] = webhook


def _job_function(q: Queue, name: str) -> JobFunction[Any, Any]:
    definition = q._definition(name)
    if definition is None:
        raise ConfigurationError(f"schedule() of {name}: the task is not registered")
    return JobFunction(q, definition)


def backend_for(alias: str = "default") -> TickqBackend:
    """The ``TickqBackend`` configured as ``TASKS[alias]``."""
    from .compat import task_backends

    if alias not in task_backends.settings:
        known = ", ".join(repr(name) for name in task_backends.settings) or "none"
        raise ConfigurationError(
            f"there is no TASKS[{alias!r}] in settings (configured: {known}); name one of "
            "those, or add it to TASKS"
        )
    found = task_backends[alias]
    if not isinstance(found, TickqBackend):
        raise ConfigurationError(
            f"TASKS[{alias!r}] is {type(found).__name__}, not tickq.contrib.django.TickqBackend"
        )
    return found


def queue(alias: str = "default") -> Queue:
    """The tickq ``Queue`` of ``TASKS[alias]``: ``q.stats()``, ``q.on_failure(...)``..."""
    return backend_for(alias).queue


def schedule(
    cron: str | None = None, /, *, every: timedelta | None = None, **options: Any
) -> Callable[[TickqTask], TickqTask]:
    """Run a Django task on a schedule, with no arguments: stack it above ``@task``.

    ``schedule("*/15 * * * *")`` or ``schedule(every=timedelta(hours=1))``; the other options
    (``tz``, ``catch_up``, ``max_catch_up``, ``max_delay``) are those of ``Queue.schedule``.
    Slots are enqueued by ``manage.py tickq_worker`` or by each call of the tick URL.
    """

    def register(task: TickqTask) -> TickqTask:
        if not isinstance(task, TickqTask):
            raise ConfigurationError(
                f"schedule() goes above @task (with TASKS using TickqBackend), got {task!r}"
            )
        _check_schedule(task, cron, every, options)
        args = (cron,) if cron is not None else ()
        backend_for(task.backend).add_schedule(task, args, {"every": every, **options})
        return task

    return register
