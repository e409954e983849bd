"""Internal: turning ``enqueue`` arguments into a checked row to insert (no I/O).

Whatever passes here is decodable and runnable by every backend: options and payload
are validated once, at enqueue, the same on SQLite and Postgres.
"""

from __future__ import annotations

import json  # loaded already: tickq.payload imports from json
from collections.abc import Mapping
from datetime import timedelta

from .controls import concurrency_key_of
from .errors import ConfigurationError, UnknownJobType
from .job import NewJob
from .job_options import DEFAULT_ENQUEUE_OPTIONS, DEFAULT_JOB_OPTIONS, check_job_type
from .payload import dump_payload, dump_plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

    from .clock import Clock
    from .job_options import EnqueueOptions
    from .registry import JobDefinition, Registry


def job_kind(registry: Registry, strict: bool, job_type: str) -> JobKind:
    """``job_type``'s ``JobKind``, or ``UnknownJobType`` / ``TypeError`` /
    ``ConfigurationError`` for a type that can't be enqueued."""
    definition = registry.definition(job_type)
    if definition is None and strict:
        known = ", ".join(sorted(registry.job_names())) or "none"
        raise UnknownJobType(
            f"no job type {job_type!r} is registered (registered: {known}); decorate "
            "the function with @q.job, or use Queue(strict=False) to enqueue types "
            "that another process handles"
        )
    check_job_type(job_type)
    return JobKind(job_type, definition)


class JobKind:
    """What ``new_job`` looks up about one job type, once: ``enqueue_many`` keeps one per
    type of its batch. A plain JSON payload that fits takes one quick pass
    (``dump_plain``, ``fits``); any other, the full checks, which say what is wrong."""

    __slots__ = (
        "accepted",
        "checks",
        "context_param",
        "definition",
        "job_type",
        "keyed",
        "own",
        "required",
        "typed",
    )  # fmt: skip

    def __init__(self, job_type: str, definition: JobDefinition | None) -> None:
        self.job_type = job_type
        self.definition = definition
        self.own = definition.options if definition is not None else DEFAULT_JOB_OPTIONS
        self.typed = definition is not None and bool(definition.types.fields())
        self.keyed = self.own.concurrency_key is not None
        if definition is not None:
            from .hints import checks_of

            self.accepted = definition.accepted
            self.required = definition.required
            self.context_param = definition.context_param
            self.checks = checks_of(definition.fn)

    def new_job(
        self,
        clock: Clock,
        payload: Mapping[str, Any] | None,
        options: EnqueueOptions | None = None,
        meta: Mapping[str, Any] | None = None,
        external: bool = False,
    ) -> NewJob:
        """Validate one job of this type and return the row to insert: ``options`` are
        checked already, and what they leave out (None) is the job type's. Typed parameters
        are converted to JSON here; ``external``: the payload is JSON from outside (a
        webhook, the CLI), whose typed values are checked in their JSON form instead."""
        definition, job_type = self.definition, self.job_type
        if self.typed and isinstance(payload, Mapping):
            assert definition is not None
            payload = definition.types.dump(payload, job_type, external)
        payload_json = dump_plain(payload)
        if payload_json is None or not self.fits(payload):
            payload_json = dump_payload(payload, job_type)
            if definition is not None:
                definition.check_payload(payload or {})
        chosen = options or DEFAULT_ENQUEUE_OPTIONS
        own = self.own
        if chosen.keep:
            meta = {**(meta or {}), "keep": True}
        run_after = chosen.run_after
        unique_key = chosen.unique_key
        return NewJob(  # by position, in NewJob._fields' order (keywords cost 0.4 µs a job)
            job_type,
            payload_json,
            own.queue if chosen.queue is None else chosen.queue,
            own.priority if chosen.priority is None else chosen.priority,
            own.max_attempts if chosen.max_attempts is None else chosen.max_attempts,
            None if run_after is None else due_at(clock, run_after),
            unique_key,
            None if unique_key is None else chosen.unique_scope,
            json.dumps(dict(meta)) if meta else None,
            concurrency_key_of(job_type, own.concurrency_key, payload or {})
            if self.keyed
            else None,
            definition is None,
        )

    def fits(self, payload: Any) -> bool:
        """True when ``check_payload`` would accept ``payload`` (a ``dict`` of str keys);
        False when it may not: it then says why."""
        if self.definition is None:
            return True
        keys = payload.keys()
        if self.accepted is not None:
            if not keys <= self.accepted:
                return False
        elif self.context_param in keys:
            return False
        if not keys >= self.required:
            return False
        checks = self.checks
        if checks:
            for key, value in payload.items():
                found = checks.get(key)
                if found is not None and not found[1](value):
                    return False
        return True


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
