"""What a running job can know about itself: ``current_job()`` or a ``JobContext`` parameter."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .job import Job

_current: ContextVar[JobContext | None] = ContextVar("tickq_current_job", default=None)


@dataclass(frozen=True, slots=True)
class JobContext:
    """The running attempt. Declare a parameter annotated ``JobContext`` to receive it."""

    id: int
    type: str
    queue: str
    attempt: int
    max_attempts: int
    idempotency_key: str
    """Stable across every retry of this job: pass it to an email or payment API."""
    created_at: datetime
    payload: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    """Extra facts set by tickq, e.g. ``slot`` and ``missed`` for scheduled jobs."""

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    @classmethod
    def of(cls, job: Job) -> JobContext:
        return cls(
            id=job.id, type=job.type, queue=job.queue, attempt=job.attempts,
            max_attempts=job.max_attempts, idempotency_key=job.idempotency_key,
            created_at=job.created_at, payload=job.payload, meta=job.meta,
        )  # fmt: skip


def current_job() -> JobContext:
    """The job this code runs inside; raises ``LookupError`` outside a job."""
    ctx = _current.get()
    if ctx is None:
        raise LookupError("current_job() was called outside a running tickq job")
    return ctx
