"""Internal: turning ``enqueue`` arguments into a checked row to insert (no I/O).

Whatever passes here is decodable and runnable by every backend: options and payload
are validated once, at enqueue, the same on SQLite and Postgres.
"""

from __future__ import annotations

import json  # loaded already: tickq.payload imports from json
from collections.abc import Mapping
from datetime import timedelta

from .errors import ConfigurationError, UnknownJobType
from .job import NewJob
from .job_options import DEFAULT_ENQUEUE_OPTIONS, DEFAULT_JOB_OPTIONS, check_job_type
from .payload import dump_payload

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

    from .clock import Clock
    from .job_options import EnqueueOptions
    from .registry import Registry


def new_job(
    registry: Registry,
    strict: bool,
    clock: Clock,
    job_type: str,
    payload: Mapping[str, Any] | None = None,
    options: EnqueueOptions | None = None,
    meta: Mapping[str, Any] | None = None,
    external: bool = False,
) -> NewJob:
    """Validate one job and return the row to insert: ``options`` are checked already,
    and what they leave out (None) is the job type's. Typed parameters are converted to
    JSON here; ``external``: the payload is JSON from outside (a webhook, the CLI), whose
    typed values are checked in their JSON form instead."""
    definition = registry.definition(job_type)
    if definition is None and strict:
        known = ", ".join(sorted(registry.job_names())) or "none"
        raise UnknownJobType(
            f"no job type {job_type!r} is registered (registered: {known}); decorate "
            "the function with @q.job, or use Queue(strict=False) to enqueue types "
            "that another process handles"
        )
    check_job_type(job_type)
    if definition is not None and definition.types.fields() and isinstance(payload, Mapping):
        payload = definition.types.dump(payload, job_type, external)
    payload_json = dump_payload(payload, job_type)
    if definition is not None:
        definition.check_payload(payload or {})
    chosen = options or DEFAULT_ENQUEUE_OPTIONS
    own = definition.options if definition is not None else DEFAULT_JOB_OPTIONS
    if chosen.keep:
        meta = {**(meta or {}), "keep": True}
    return NewJob(
        type=job_type, payload_json=payload_json,
        queue=own.queue if chosen.queue is None else chosen.queue,
        priority=own.priority if chosen.priority is None else chosen.priority,
        max_attempts=own.max_attempts if chosen.max_attempts is None else chosen.max_attempts,
        run_after=due_at(clock, chosen.run_after), unique_key=chosen.unique_key,
        unique_scope=chosen.unique_scope if chosen.unique_key is not None else None,
        meta_json=json.dumps(dict(meta)) if meta else None,
        concurrency_key=None if definition is None else definition.key_of(payload or {}),
        unregistered=definition is None,
    )  # fmt: skip


def due_at(clock: Clock, run_after: datetime | timedelta | None) -> datetime | None:
    """``run_after`` (checked: None, a timedelta or an aware UTC time) as an aware UTC time;
    a timedelta counts from the clock's now."""
    if isinstance(run_after, timedelta):
        try:
            return clock.now() + run_after
        except OverflowError:
            raise ConfigurationError(
                f"run_after {run_after!r} from now is past the year 9999"
            ) from None
    return run_after
