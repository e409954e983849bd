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
    """Waiting for ``run_after``. In: enqueue, ``retried``, ``snoozed``, ``rescued``,
    ``refunded``, ``released`` (on shutdown), a manual ``retry``. Out: ``claimed``,
    ``claimed_ahead`` or ``cancel``."""

    RUNNING = "running"
    """Claimed by one worker under a lease. Out: ``succeeded``, ``retried``, ``snoozed``,
    ``failed``, ``cancelled``, ``released``, or ``rescued`` (``refunded`` if its start was
    never confirmed) when the lease expires. ``cancel_requested`` (``q.cancel``) leaves it
    running, asked to stop: from then on ``retried``, ``snoozed``, ``failed`` and ``rescued``
    end it cancelled instead (and ``released``/``refunded`` don't apply); ``succeeded``
    still succeeds."""

    DONE = "done"
    """Finished successfully (``succeeded``). Out: ``pruned`` only."""

    FAILED = "failed"
    """Out of attempts (or failed permanently); alerts fire. Out: ``retry``, ``pruned``."""

    CANCELLED = "cancelled"
    """Stopped by a person (``cancel`` while pending; ``cancel_requested`` while running,
    then ended by its worker or its rescue) or by the job raising ``Cancel``
    (``cancelled``). Out: ``retry``, ``pruned``."""


ACTIVE_STATES = (JobState.PENDING, JobState.RUNNING)
FINISHED_STATES = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


class Transition(Frozen):
    """One row of the state machine: a change of ``status`` and what it counts.

    ``name`` is the one word for it wherever it shows: the outcome an executor returns, the
    field of the cycle's report, the log event. ``query`` names the store's named query
    (for an outcome, the same word; otherwise the verb of its store method, as
    ``rescue_expired`` makes ``rescued``). Every query is guarded by ``sources`` (and, for a
    finish, by attempt and lease owner), so a late or repeated one changes nothing.
    """

    __slots__ = ()
    _fields = ("name", "sources", "target", "exhausted", "attempts", "snoozes", "counted",
               "query")  # fmt: skip
    _docs = {
        "sources": "The states a job must be in for it to apply.",
        "target": "The state it moves the job to (None: the row is deleted).",
        "exhausted": "The state instead when the job is out of attempts (None: no such rule).",
        "attempts": "What it adds to the job's ``attempts``.",
        "snoozes": "What it adds to the job's ``snoozes``.",
        "counted": "What the attempt counts as in the history and the processed totals "
        "(``Attempt.outcome``), when the job was running; None: not an attempt.",
        "query": "The store's named query that applies it (in every dialect).",
    }

    if TYPE_CHECKING:
        name: str
        sources: tuple[JobState, ...]
        target: JobState | None
        exhausted: JobState | None
        attempts: int
        snoozes: int
        counted: str | None
        query: str

    def __new__(
        cls, name: str, sources: tuple[JobState, ...], target: JobState | None,
        exhausted: JobState | None, attempts: int, snoozes: int, counted: str | None,
        query: str,
    ) -> Transition:  # fmt: skip
        return tuple.__new__(
            cls, (name, sources, target, exhausted, attempts, snoozes, counted, query)
        )

    @property
    def finishes(self) -> bool:
        """True when it ends the job (done, failed or cancelled): ``finished_at`` is set."""
        return self.target in FINISHED_STATES


_P, _R, _D, _F, _C = JobState  # pending, running, done, failed, cancelled

STATE_MACHINE = (
    #          name         sources   target exhausted attempts snoozes counted  query
    Transition("claimed",   (_P,),    _R,    None,     +1,  0,  None,        "claim"),
    Transition("claimed_ahead", (_P,), _R,   None,     +1,  0,  None,        "claim_ahead"),
    Transition("started",   (_R,),    _R,    None,     0,   0,  None,        "started"),
    Transition("succeeded", (_R,),    _D,    None,     0,   0,  "done",      "finish"),
    Transition("retried",   (_R,),    _P,    None,     0,   0,  "error",     "finish"),
    Transition("snoozed",   (_R,),    _P,    None,     -1,  +1, "snoozed",   "finish"),
    Transition("suspended", (_R,),    _P,    None,     -1,  0,  None,        "finish"),
    Transition("failed",    (_R,),    _F,    None,     0,   0,  "error",     "finish"),
    Transition("cancelled", (_R,),    _C,    None,     0,   0,  "cancelled", "finish"),
    Transition("released",  (_R,),    _P,    None,     -1,  0,  None,        "release"),
    Transition("rescued",   (_R,),    _P,    _F,       0,   0,  "lease_expired", "rescue_expired"),
    Transition("refunded",  (_R,),    _P,    None,     -1,  0,  "refunded",  "refund_expired"),
    Transition("retry",     (_F, _C), _P,    None,     0,   0,  None,        "retry"),
    Transition("cancel",    (_P,),    _C,    None,     0,   0,  None,        "cancel"),
    Transition("cancel_requested", (_R,), _R, None,    0,   0,  None,        "cancel"),
    Transition("pruned",    (_D, _F, _C), None, None,  0,   0,  None,        "prune"),
)  # fmt: skip
"""Every state change tickq makes. An attempt that raised is ``retried``, or ``failed`` when
the job is ``out_of_attempts`` (the executor decides); a run that raised ``Snooze`` is
``snoozed``: back to pending with its attempt given back (the run stays in the history,
counted as ``snoozed``, never as a failure), or ``failed`` when the job's ``max_snooze`` is
up (the executor decides); a ``rescued`` job out of attempts goes to failed (the store
decides, by the same rule). ``retry`` and ``cancel`` are made by a person (on a running job
``cancel`` is a request, ``cancel_requested``: the job sees it and its worker ends it
cancelled); ``pruned`` rows are first added to the processed totals.

A workflow's driver job that waits (for a step, a timer or an event) is ``suspended``:
back to pending with its attempt given back and no history row (a replay is not an
attempt), due when the driver said in its own transaction, or sooner if a step's end or an
event moved it meanwhile (``store/workflows.py``); the ``finish`` statement keeps it.

A worker may claim jobs ahead of its free slots (``claimed_ahead``) to wait in its line.
Every claim is unconfirmed until ``started`` (its only change is that mark: the job stays
running) or the job's outcome reaches the database in a later round trip. A lease that runs
out on an unconfirmed job is ``refunded``: back to pending with the attempt given back (the
history keeps a ``refunded`` row, numbered like the attempt it gave back), and never
refunded or claimed ahead again — so a process killed between its claim and the job's
start spends no attempt, and a job that kills its worker each time gets at most one run not
counted, and still runs out of attempts.

An outcome's row is the whole decision: the store's ``finish`` statement applies a batch of
them as the rows say (target, attempts, snoozes, ``finishes``, ``counted`` for the history),
guarded by (running, attempt, lease owner). The one thing it decides itself, in one place
(``store.queries.ASKED_TO_STOP``): a job asked to stop ends cancelled, its attempt counted,
whatever the run came to, except a success."""

TRANSITIONS = {t.name: t for t in STATE_MACHINE}
"""The state machine by name."""

OUTCOMES = tuple(t.name for t in STATE_MACHINE if t.query == "finish")
"""What one attempt can come to: the transitions an executor returns and ``record`` applies
(succeeded, retried, snoozed, suspended, failed, cancelled), all by one statement, ``finish``.
``stale`` is the word for a finish that changes nothing (its lease was lost, or the job was
cancelled or rescued meanwhile)."""


BACK_IN_LINE = tuple(t.name for t in STATE_MACHINE if t.name in OUTCOMES and t.target is _P)
"""The outcomes that put the job back in line, due after the outcome's delay (retried,
snoozed, suspended): a worker looks again when the first of them comes due."""


def out_of_attempts(attempts: int, max_attempts: int) -> bool:
    """True when a job that used ``attempts`` may not run again: an error then fails it,
    and so does a rescue (``store.queries.OUT_OF_ATTEMPTS`` is this rule in SQL)."""
    return attempts >= max_attempts


def queue_wait(job: Job) -> float | None:
    """Seconds from when ``job`` was due (enqueued, for one to run at once; its retry or
    delay's time otherwise) to its claim, both on the store's clock."""
    if job.attempted_at is None:
        return None
    due = max(job.run_after, job.created_at)
    return max((job.attempted_at - due).total_seconds(), 0.0)


JOB_FIELDS = (
    "id", "type", "queue", "payload", "status", "priority", "attempts", "max_attempts",
    "run_after", "last_error", "unique_key", "created_at", "updated_at", "attempted_at",
    "finished_at", "lease_owner", "lease_expires_at", "meta", "result", "snoozes",
    "snoozed_since", "cancel_requested_at",
)  # fmt: skip
"""The columns of ``tickq_jobs`` a ``Job`` carries, in its order."""


class Job(Frozen):
    """One row of ``tickq_jobs`` (read-only). Every datetime is aware UTC."""

    __slots__ = ()
    _fields = JOB_FIELDS
    _docs = {
        "snoozes": "How many times the job raised ``Snooze`` (none of them is an attempt).",
        "snoozed_since": "When the run that first snoozed started (since the job was "
        "enqueued or retried by hand): its ``max_snooze`` is measured from there (None: it "
        "has not snoozed).",
        "cancel_requested_at": "When ``q.cancel`` asked this job to stop while it ran "
        "(None: never); it stays ``running`` until its worker ends it ``cancelled``.",
    }

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
        snoozes: int
        snoozed_since: datetime | None
        cancel_requested_at: datetime | None

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
        snoozes: int = 0,
        snoozed_since: datetime | None = None,
        cancel_requested_at: datetime | None = None,
    ) -> Job:
        return tuple.__new__(cls, (
            id, type, queue, payload, status, priority, attempts, max_attempts, run_after,
            last_error, unique_key, created_at, updated_at, attempted_at, finished_at,
            lease_owner, lease_expires_at, {} if meta is None else meta, result, snoozes,
            snoozed_since, cancel_requested_at,
        ))  # fmt: skip

    @property
    def keep(self) -> bool:
        """Enqueued with ``keep=True``: retention never prunes this job once it finished."""
        return self.meta.get("keep") is True

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
    ``error``, ``cancelled`` or ``lease_expired``), and so are runs not counted as
    attempts, which share the number of the attempt that follows them and never count as
    failures: ``snoozed`` (raised ``Snooze``), ``refunded`` (its process vanished before
    confirming the start) and ``released`` (cut short when its worker shut down, the grace
    run out); the successful final attempt
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
               "unique_key", "unique_scope", "meta_json", "concurrency_key",
               "unregistered")  # fmt: skip
    _docs = {
        "concurrency_key": "The key its type's limits apply to (a keyed type), else None.",
        "unregistered": "Enqueued by a process that doesn't register the type, so it could "
        "not compute a key: the store gives it the key '' if the type is keyed.",
    }

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
        concurrency_key: str | None
        unregistered: bool

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
        concurrency_key: str | None = None,
        unregistered: bool = False,
    ) -> NewJob:
        return tuple.__new__(cls, (type, payload_json, queue, priority, max_attempts, run_after,
                                   unique_key, unique_scope, meta_json, concurrency_key,
                                   unregistered))  # fmt: skip
