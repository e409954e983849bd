"""A job row, its states and the transitions between them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from operator import itemgetter

TYPE_CHECKING = False  # typing costs a waking host milliseconds of import; checkers see True
if TYPE_CHECKING:
    from typing import Any, Self


class Frozen(tuple):  # type: ignore[type-arg]
    """A read-only record stored as a tuple, its fields readable by name.

    The store builds one ``Job`` per claimed row, so it has to cost no more than a tuple
    (a frozen dataclass cost 2 µs per job, and importing ``dataclasses`` cost every waking
    host several milliseconds). Subclasses list ``_fields`` and define ``__new__``.
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _docs: dict[str, str] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for i, name in enumerate(cls.__dict__.get("_fields", ())):
            setattr(cls, name, property(itemgetter(i), doc=cls._docs.get(name)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self, strict=True))
        return f"{type(self).__name__}({shown})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def _replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (what ``dataclasses.replace`` did)."""
        values = dict(zip(self._fields, self, strict=True))
        values.update(changes)
        return type(self)(**values)


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


JOB_FIELDS = (
    "id", "type", "queue", "payload", "status", "priority", "attempts", "max_attempts",
    "run_after", "last_error", "unique_key", "created_at", "updated_at", "attempted_at",
    "finished_at", "lease_owner", "lease_expires_at", "meta", "result",
)  # fmt: skip
"""The columns of ``tickq_jobs`` a ``Job`` carries, in its order."""


class Job(Frozen):
    """One row of ``tickq_jobs`` (read-only). Every datetime is aware UTC."""

    __slots__ = ()
    _fields = JOB_FIELDS

    if TYPE_CHECKING:
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
        attempted_at: datetime | None
        finished_at: datetime | None
        lease_owner: str | None
        lease_expires_at: datetime | None
        meta: dict[str, Any]
        result: Any

    def __new__(
        cls,
        id: int,
        type: str,
        queue: str,
        payload: dict[str, Any],
        status: JobState,
        priority: int,
        attempts: int,
        max_attempts: int,
        run_after: datetime,
        last_error: str | None,
        unique_key: str | None,
        created_at: datetime,
        updated_at: datetime,
        attempted_at: datetime | None = None,
        finished_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_expires_at: datetime | None = None,
        meta: dict[str, Any] | None = None,
        result: Any = None,
    ) -> Job:
        return tuple.__new__(cls, (
            id, type, queue, payload, status, priority, attempts, max_attempts, run_after,
            last_error, unique_key, created_at, updated_at, attempted_at, finished_at,
            lease_owner, lease_expires_at, {} if meta is None else meta, result,
        ))  # fmt: skip

    @property
    def idempotency_key(self) -> str:
        """The same on every attempt of this job; pass it to providers that dedupe."""
        return f"tickq-{self.id}-{int(self.created_at.timestamp() * 1_000_000)}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO-8601 UTC strings)."""
        out: dict[str, Any] = {}
        for name, value in zip(JOB_FIELDS, self, strict=True):
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        out["status"] = str(self.status)
        out["idempotency_key"] = self.idempotency_key
        return out


class Attempt(Frozen):
    """One attempt of a job: its start, end, outcome and error.

    Failed and interrupted attempts are rows of ``tickq_attempts`` (``outcome`` is
    ``error``, ``cancelled`` or ``lease_expired``); the successful final attempt
    (``done``) and the one in progress (``running``, ``finished_at`` None) are read from
    the job row itself, so success costs no extra write. ``started_at`` is when the
    attempt was claimed; jobs claimed in one batch run one after another.
    """

    __slots__ = ()
    _fields = ("job_id", "attempt", "started_at", "finished_at", "outcome", "error", "seconds")
    _docs = {"seconds": "How long the job function ran, as the worker measured it (None when "
             "unknown)."}  # fmt: skip

    if TYPE_CHECKING:
        job_id: int
        attempt: int
        started_at: datetime | None
        finished_at: datetime | None
        outcome: str
        error: str | None
        seconds: float | None

    def __new__(
        cls,
        job_id: int,
        attempt: int,
        started_at: datetime | None,
        finished_at: datetime | None,
        outcome: str,
        error: str | None,
        seconds: float | None = None,
    ) -> Attempt:
        return tuple.__new__(
            cls, (job_id, attempt, started_at, finished_at, outcome, error, seconds)
        )

    @property
    def duration(self) -> float | None:
        """Seconds the attempt ran: as measured, else from start to end; None while running."""
        if self.seconds is not None:
            return self.seconds
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    @property
    def error_type(self) -> str | None:
        """The exception's class name, e.g. ``ValueError``."""
        return split_error(self.error)[0]

    @property
    def error_message(self) -> str | None:
        """The exception's message, without the type and the traceback."""
        return split_error(self.error)[1]

    @property
    def traceback(self) -> str | None:
        """The formatted traceback, when the attempt raised."""
        return split_error(self.error)[2]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO-8601 UTC strings)."""
        kind, message, trace = split_error(self.error)
        return {
            "job_id": self.job_id, "attempt": self.attempt,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "duration_seconds": self.duration, "outcome": self.outcome,
            "error_type": kind, "error_message": message, "traceback": trace,
        }  # fmt: skip


TRACEBACK_START = "\nTraceback (most recent call last):\n"


def split_error(error: str | None) -> tuple[str | None, str | None, str | None]:
    """Split a stored error (``Type: message`` then the traceback) into its three parts."""
    if not error:
        return None, None, None
    head, sep, rest = error.partition(TRACEBACK_START)
    trace = (sep + rest).lstrip("\n") if sep else None
    kind, colon, message = head.partition(": ")
    if not colon or not kind.replace(".", "").replace("_", "").isalnum():
        return None, head, trace
    return kind, message, trace


class NewJob(Frozen):
    """What enqueue hands the store: a row before it has an id."""

    __slots__ = ()
    _fields = ("type", "payload_json", "queue", "priority", "max_attempts", "run_after",
               "unique_key", "unique_scope", "meta_json")  # fmt: skip

    if TYPE_CHECKING:
        type: str
        payload_json: str
        queue: str
        priority: int
        max_attempts: int
        run_after: datetime | None
        unique_key: str | None
        unique_scope: str | None
        meta_json: str | None

    def __new__(
        cls,
        type: str,
        payload_json: str,
        queue: str,
        priority: int,
        max_attempts: int,
        run_after: datetime | None,
        unique_key: str | None,
        unique_scope: str | None,
        meta_json: str | None = None,
    ) -> NewJob:
        return tuple.__new__(cls, (type, payload_json, queue, priority, max_attempts, run_after,
                                   unique_key, unique_scope, meta_json))  # fmt: skip
