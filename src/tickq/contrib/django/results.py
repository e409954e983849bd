"""Django's ``TaskResult`` read from a tickq job and its attempts."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...job import JobState
from .compat import TaskError, TaskResult, TaskResultStatus, task_enqueued

if TYPE_CHECKING:
    from ...job import Attempt, Job
    from .compat import BaseTaskBackend as TickqBackend
    from .compat import Task as TickqTask

STATUS = {
    JobState.PENDING: TaskResultStatus.READY,
    JobState.RUNNING: TaskResultStatus.RUNNING,
    JobState.DONE: TaskResultStatus.SUCCESSFUL,
    JobState.FAILED: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,  # Django has no "cancelled"
}
UNRECORDED_WORKER = "unrecorded"
"""tickq keeps no worker per finished attempt; ``worker_ids`` has one entry per attempt
(snoozed runs are not attempts, so Django's ``attempts`` agrees with tickq's)."""


def enqueued(backend: TickqBackend, task: TickqTask, job_id: int, payload: dict[str, Any]) -> Any:
    """The result ``enqueue`` returns: READY (the row may not be committed yet), enqueued
    at the row's own time, read in the same transaction: ``get_result`` reads it back."""
    from django.db import connections

    from ...store.foreign import created_at_on

    q = backend.queue
    stored = created_at_on(q._store, connections[backend.database], job_id)
    result = TaskResult(
        task=task, id=str(job_id), status=TaskResultStatus.READY,
        enqueued_at=stored or q.clock.now(), started_at=None, finished_at=None,
        last_attempted_at=None, args=payload["args"], kwargs=payload["kwargs"],
        backend=backend.alias, errors=[], worker_ids=[],
    )  # fmt: skip
    task_enqueued.send(type(backend), task_result=result)
    return result


def result_of(backend: TickqBackend, job: Job, attempts: list[Attempt]) -> Any:
    """``TaskResult`` of ``job``: status, errors (class path and traceback), times, value."""
    payload = job.payload if isinstance(job.payload, dict) else {}
    result = TaskResult(
        task=backend.task_of(job.type), id=str(job.id), status=STATUS[job.status],
        enqueued_at=job.created_at,
        started_at=attempts[-1].started_at if attempts else None,
        finished_at=job.finished_at, last_attempted_at=job.attempted_at,
        args=payload.get("args") or [], kwargs=payload.get("kwargs") or {},
        backend=backend.alias, errors=[task_error(a) for a in attempts if a.error],
        worker_ids=[_worker(job, a) for a in attempts if a.outcome != "snoozed"],
    )  # fmt: skip
    object.__setattr__(result, "_return_value", job.result)
    return result


def task_error(attempt: Attempt) -> Any:
    return TaskError(
        exception_class_path=exception_path(attempt.error_type or "Exception", attempt.error),
        traceback=attempt.traceback or attempt.error or "",
    )


def exception_path(name: str, error: str | None) -> str:
    """``module.Class`` of the exception: the traceback's last line names it so. Named
    bare, it is a builtin, or one of tickq's own errors (``UnknownJobType``, written by
    tickq without a traceback); an error tickq records that has no class of its own
    (``UnrunnableJob``, ``SnoozeLimitExceeded``) is a ``tickq.errors.TickqError``."""
    import builtins

    from ... import errors

    pattern = re.compile(rf"^((?:[\w]+\.)*){re.escape(name)}(?::|$)", re.MULTILINE)
    found = [m.group(1) for m in pattern.finditer(error or "")]
    prefix = found[-1] if found else ""
    if prefix:
        return f"{prefix}{name}"
    if isinstance(getattr(builtins, name, None), type):
        return f"builtins.{name}"
    if isinstance(getattr(errors, name, None), type):
        return f"tickq.errors.{name}"
    return "tickq.errors.TickqError"


def _worker(job: Job, attempt: Attempt) -> str:
    running = attempt.outcome == "running" and job.lease_owner
    return job.lease_owner if running else UNRECORDED_WORKER  # type: ignore[return-value]
