"""Internal: turning ``enqueue`` arguments into a checked row to insert (no I/O).

Whatever passes here is decodable and runnable by every backend: options and payload
are validated once, at enqueue, the same on SQLite and Postgres.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .clock import require_aware
from .errors import ConfigurationError, UnknownJobType
from .job import NewJob
from .job_options import (
    check_job_type,
    check_max_attempts,
    check_priority,
    check_queue,
    check_unique_key,
    check_unique_scope,
)
from .payload import dump_payload

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from .clock import Clock
    from .registry import Registry


def new_job(
    registry: Registry,
    strict: bool,
    clock: Clock,
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
    """Validate one job and return the row to insert."""
    definition = registry.definition(job_type)
    if definition is None and strict:
        known = ", ".join(sorted(registry.job_names())) or "none"
        raise UnknownJobType(
            f"no job type {job_type!r} is registered (registered: {known}); decorate "
            "the function with @q.job, or use Queue(strict=False) to enqueue types "
            "that another process handles"
        )
    check_job_type(job_type)
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
        run_after=due_at(clock, run_after), unique_key=check_unique_key(unique_key),
        unique_scope=unique_scope if unique_key is not None else None,
        meta_json=json.dumps(dict(meta)) if meta else None,
    )  # fmt: skip


def due_at(clock: Clock, run_after: datetime | timedelta | None) -> datetime | None:
    """``run_after`` as an aware UTC time (a timedelta counts from the clock's now)."""
    if run_after is None:
        return None
    if isinstance(run_after, timedelta):
        try:
            return clock.now() + run_after
        except OverflowError:
            raise ConfigurationError(
                f"run_after {run_after!r} from now is past the year 9999"
            ) from None
    if isinstance(run_after, datetime):
        return require_aware(run_after, "run_after")
    raise TypeError(f"run_after must be a datetime or timedelta, got {type(run_after).__name__}")
