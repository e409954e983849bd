"""What a running job can know about itself: ``current_job()`` or a ``JobContext`` parameter."""

from __future__ import annotations

from contextvars import ContextVar
from datetime import datetime

from .job import Frozen, Job

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The running job, or its context once asked for: a JobContext is only built for jobs that
# take one or call current_job() (most don't, and it costs microseconds per job).
_current: ContextVar[Job | JobContext | None] = ContextVar("tickq_current_job", default=None)


class JobContext(Frozen):
    """The running attempt. Declare a parameter annotated ``JobContext`` to receive it."""

    __slots__ = ()
    _fields = ("id", "type", "queue", "attempt", "max_attempts", "idempotency_key",
               "created_at", "payload", "meta", "snoozes")  # fmt: skip
    _docs = {
        "idempotency_key": "Stable across every retry of this job: pass it to an email or "
        "payment API.",
        "meta": "Extra facts set by tickq, e.g. ``slot`` and ``missed`` for scheduled jobs.",
        "snoozes": "How many times this job has raised ``Snooze`` before this run (snoozes "
        "are not attempts: ``attempt`` does not grow with them).",
    }

    if TYPE_CHECKING:
        id: int
        type: str
        queue: str
        attempt: int
        max_attempts: int
        idempotency_key: str
        created_at: datetime
        payload: dict[str, Any]
        meta: dict[str, Any]
        snoozes: int

    def __new__(
        cls,
        id: int,
        type: str,
        queue: str,
        attempt: int,
        max_attempts: int,
        idempotency_key: str,
        created_at: datetime,
        payload: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        snoozes: int = 0,
    ) -> JobContext:
        return tuple.__new__(cls, (
            id, type, queue, attempt, max_attempts, idempotency_key, created_at,
            {} if payload is None else payload, {} if meta is None else meta, snoozes,
        ))  # fmt: skip

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    @classmethod
    def of(cls, job: Job) -> JobContext:
        return cls(
            job.id, job.type, job.queue, job.attempts, job.max_attempts, job.idempotency_key,
            job.created_at, job.payload, job.meta, job.snoozes,
        )  # fmt: skip


def current_job() -> JobContext:
    """The job this code runs inside; raises ``LookupError`` outside a job."""
    running = _current.get()
    if running is None:
        raise LookupError("current_job() was called outside a running tickq job")
    if isinstance(running, JobContext):
        return running
    ctx = JobContext.of(running)
    _current.set(ctx)  # the same object on every call within this job
    return ctx
