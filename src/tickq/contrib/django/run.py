"""The tickq job function behind each Django task: call it with the stored arguments."""

from __future__ import annotations

import threading
import traceback
from typing import TYPE_CHECKING, Any

from ...context import JobContext
from ...errors import Snooze
from ...payload_types import PayloadTypes
from .compat import TaskContext, TaskResultStatus, normalize_json, task_finished, task_started

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...job import Job
    from ...queue import Queue
    from .compat import BaseTaskBackend as TickqBackend
    from .compat import Task as TickqTask


def runner(backend: TickqBackend, task: TickqTask, q: Queue) -> Callable[..., Any]:
    """A job function of ``q`` taking ``args``/``kwargs`` (none for scheduled runs) that
    calls the task, passing Django's ``TaskContext`` first when the task ``takes_context``;
    its JSON-normalised return value becomes the job's result (``return_value``)."""
    from inspect import iscoroutinefunction

    from ...execute import UnfitPayload

    types = task_types(task)

    def arguments(args: list[Any] | None, kwargs: dict[str, Any] | None,
                  ctx: JobContext) -> tuple[list[Any], dict[str, Any]]:  # fmt: skip
        try:
            positional, named = types.load_call(list(args or []), dict(kwargs or {}), ctx.type)
        except TypeError as exc:
            raise UnfitPayload(str(exc)) from None
        if task.takes_context:
            positional.insert(0, TaskContext(task_result=backend.get_result(str(ctx.id))))
        _signal(task_started, backend, ctx)
        return positional, named

    if iscoroutinefunction(task.func):

        async def run_async(ctx: JobContext, args: list[Any] | None = None,
                            kwargs: dict[str, Any] | None = None) -> Any:  # fmt: skip
            positional, named = arguments(args, kwargs, ctx)
            try:
                return normalize_json(await task.func(*positional, **named))
            except Snooze:
                raise
            except BaseException as exc:
                _keep((q.url, ctx.id), ctx.attempt, exc)
                raise

        run_async.__name__ = task.name
        return run_async

    def run(ctx: JobContext, args: list[Any] | None = None,
            kwargs: dict[str, Any] | None = None) -> Any:  # fmt: skip
        from django.db import close_old_connections

        close_old_connections()  # as a request does: no connection left broken or stale
        try:
            positional, named = arguments(args, kwargs, ctx)
            return normalize_json(task.func(*positional, **named))
        except Snooze:
            raise
        except BaseException as exc:
            _keep((q.url, ctx.id), ctx.attempt, exc)
            raise
        finally:
            close_old_connections()

    run.__name__ = task.name
    return run


def task_types(task: TickqTask) -> PayloadTypes:
    """The typed parameters of ``task``'s function, without its context (the first one)."""
    skip = None
    if task.takes_context:
        from ...signature import parameters

        skip = next((name for name, *_ in parameters(task.func)), None)
    return PayloadTypes(task.func, skip)


Key = tuple[str, int]
"""A job of one database: the URL of the Queue that runs it, and its id."""

_raised: dict[Key, tuple[int, BaseException]] = {}
"""The exception each task's last attempt in this process raised, with the attempt's
number, until its end (or its retry) is recorded; at most ``_KEPT`` (an attempt whose end
another process recorded, after a lost lease, is forgotten oldest first). The frames of
their tracebacks are cleared: what is kept is the class, the message and the lines, not
the task's local variables."""
_raised_lock = threading.Lock()
_KEPT = 1000


def _keep(key: Key, attempt: int, exc: BaseException) -> None:
    traceback.clear_frames(exc.__traceback__)  # frames still running are left alone
    with _raised_lock:
        _raised.pop(key, None)
        _raised[key] = (attempt, exc)
        while len(_raised) > _KEPT:
            del _raised[next(iter(_raised))]


def forget(key: Key, job: Job | None = None) -> BaseException | None:
    """The exception the job raised here, forgotten (its attempt is recorded). Given the
    recorded ``job``, only if it is what that job's last attempt failed with: not one of
    an earlier attempt, nor an exception the attempt raised before it failed otherwise
    (an async task cancelled by its timeout fails with ``JobTimeout``)."""
    with _raised_lock:
        found = _raised.pop(key, None)
    if found is None:
        return None
    attempt, exc = found
    if job is not None:
        failed_with = (job.last_error or "").startswith(f"{type(exc).__name__}:")
        if attempt != job.attempts or not failed_with:
            return None
    traceback.clear_frames(exc.__traceback__)  # the frames that ran the attempt, done now
    return exc


def retried(q: Queue, job: Job) -> None:
    """A retry hook of ``q``: the attempt is recorded, its exception no longer needed."""
    forget((q.url, job.id))


def finished(backend: TickqBackend, q: Queue, job: Job) -> None:
    """Django's ``task_finished``, once the task's end (successful, failed or cancelled) is
    recorded, so the ``task_result`` sent reads as it will stay. A failure's signal is sent
    while its exception is being handled: Django's own receiver logs it with
    ``logger.exception``, and error trackers reading ``sys.exc_info()`` see it."""
    raised = forget((q.url, job.id), job)
    if not task_finished.receivers:
        return
    result = backend.get_result(str(job.id))
    if raised is None or result.status != TaskResultStatus.FAILED:
        task_finished.send(type(backend), task_result=result)
        return
    try:
        raise raised
    except BaseException:
        task_finished.send(type(backend), task_result=result)


def _signal(signal: Any, backend: TickqBackend, ctx: JobContext) -> None:
    if signal.receivers:
        signal.send(type(backend), task_result=backend.get_result(str(ctx.id)))
