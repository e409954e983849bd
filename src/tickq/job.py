"""A job row, its states and the transitions between them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class JobState(StrEnum):
    """The ``status`` column. Each state names who moves a job in and out of it."""

    PENDING = "pending"
    """Waiting for ``run_after``. In: enqueue, an automatic retry, a rescued lease, a manual
    retry, a release on shutdown. Out: claim (to running) or cancel."""

    RUNNING = "running"
    """Claimed by one worker under a lease. Out: complete, retry, fail, cancel, release, or
    rescue when the lease expires."""

    DONE = "done"
    """Finished successfully. Out: prune only."""

    FAILED = "failed"
    """Out of attempts (or failed permanently); alerts fire. Out: manual retry, prune."""

    CANCELLED = "cancelled"
    """Stopped by a person or by the job raising ``Cancel``. Out: manual retry, prune."""


ACTIVE_STATES = (JobState.PENDING, JobState.RUNNING)
FINISHED_STATES = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)

TRANSITIONS: dict[str, tuple[JobState, JobState]] = {
    "claim": (JobState.PENDING, JobState.RUNNING),
    "complete": (JobState.RUNNING, JobState.DONE),
    "retry_later": (JobState.RUNNING, JobState.PENDING),
    "fail": (JobState.RUNNING, JobState.FAILED),
    "cancel_running": (JobState.RUNNING, JobState.CANCELLED),
    "cancel": (JobState.PENDING, JobState.CANCELLED),
    "release": (JobState.RUNNING, JobState.PENDING),
    "rescue": (JobState.RUNNING, JobState.PENDING),
    "rescue_exhausted": (JobState.RUNNING, JobState.FAILED),
    "retry_failed": (JobState.FAILED, JobState.PENDING),
    "retry_cancelled": (JobState.CANCELLED, JobState.PENDING),
}
"""Every state change tickq makes: name -> (state it must be in, state it moves to).
Each store query that performs one is guarded by the ``from`` state."""


def allowed(src: JobState, dst: JobState) -> bool:
    """True when some transition moves a job from ``src`` to ``dst``."""
    return any(pair == (src, dst) for pair in TRANSITIONS.values())


@dataclass(frozen=True, slots=True)
class Job:
    """One row of ``tickq_jobs``. Every datetime is aware UTC."""

    id: int
    type: str
    queue: str
    payload: dict[str, Any]
    status: JobState
    priority: int
    attempts: int
    max_attempts: int
    run_after: datetime
    last_error: str | None
    unique_key: str | None
    created_at: datetime
    updated_at: datetime
    attempted_at: datetime | None = None
    finished_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def idempotency_key(self) -> str:
        """The same on every attempt of this job; pass it to providers that dedupe."""
        return f"tickq-{self.id}-{int(self.created_at.timestamp() * 1_000_000)}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO-8601 UTC strings)."""
        out: dict[str, Any] = {}
        for name in self.__slots__:  # type: ignore[attr-defined]
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        out["status"] = str(self.status)
        out["idempotency_key"] = self.idempotency_key
        return out


@dataclass(frozen=True, slots=True)
class Attempt:
    """One failed or interrupted attempt, kept in ``tickq_attempts``."""

    job_id: int
    attempt: int
    started_at: datetime | None
    finished_at: datetime
    outcome: str
    error: str | None


@dataclass(frozen=True, slots=True)
class NewJob:
    """What enqueue hands the store: a row before it has an id."""

    type: str
    payload_json: str
    queue: str
    priority: int
    max_attempts: int
    run_after: datetime | None
    unique_key: str | None
    unique_scope: str | None
    meta_json: str | None = None
