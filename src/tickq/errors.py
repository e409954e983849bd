"""Exceptions tickq raises, and the three a job may raise to steer its own fate."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import timedelta


class TickqError(Exception):
    """Base class of every error tickq raises on purpose."""


class ConfigurationError(TickqError, ValueError):
    """A setting or argument is invalid; the message names it and says what is expected."""


class UnknownJobType(TickqError, LookupError):
    """No handler is registered under this job type."""


class JobNotFound(TickqError, LookupError):
    """No job with this id exists (it may have been pruned)."""


class InvalidTransition(TickqError):
    """The job is not in a state that allows this operation (e.g. retrying a done job)."""


UNREACHABLE = "unreachable"
READ_ONLY = "read-only"
DISK_FULL = "disk full"
TOO_MANY_CONNECTIONS = "too many connections"
LOCKED = "locked"


class DatabaseUnavailable(TickqError):
    """The database can't be used right now; safe to try again once it can.

    ``reason`` says why, in words: ``"unreachable"`` (down, or the connection dropped),
    ``"read-only"`` (a replica, e.g. after a failover, or a read-only file), ``"disk full"``,
    ``"too many connections"`` or ``"locked"`` (SQLite: another writer held the lock). The
    message says what to do. An error in what was sent (a value too large to store) is
    never this: that is a ``ConfigurationError``, and trying again would fail again.
    """

    def __init__(self, message: str = "", reason: str = UNREACHABLE) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[type[DatabaseUnavailable], tuple[str, str]]:
        return type(self), (str(self), self.reason)


class SchemaMissing(TickqError):
    """tickq's tables are not there yet: run ``q.migrate()`` or ``tickq migrate``."""


class Cancel(Exception):
    """Raise inside a job to stop it for good (status ``cancelled``), without retries."""


class Retry(Exception):
    """Raise inside a job to retry it after ``delay`` seconds (counts as an attempt; to
    wait for something without failing, raise ``Snooze``)."""

    def __init__(self, delay: float, reason: str = "") -> None:
        super().__init__(reason or f"retry requested in {delay:g}s")
        if delay < 0:
            raise ValueError(f"Retry delay must be >= 0 seconds, got {delay}")
        self.delay = float(delay)


class Snooze(Exception):
    """Raise inside a job to run it again after ``seconds``, without using up an attempt.

    For a job that waits for something outside it (a batch, an export, a payment) rather
    than failing: the job goes back to pending with its attempt given back, and the wait is
    a row in the database (``run_after``), so it survives restarts and sleeping hosts.
    ``seconds`` is a number >= 0 or a ``timedelta``. The job's ``max_snooze`` bounds the
    total wait; ``JobContext.snoozes`` says how many times it has snoozed.
    """

    def __init__(self, seconds: float | timedelta) -> None:
        self.seconds = snooze_seconds(seconds)
        super().__init__(f"snoozed for {self.seconds:g}s")


def snooze_seconds(value: object) -> float:
    """``Snooze``'s ``seconds`` as a float; a clear error for anything else."""
    from datetime import timedelta
    from math import isfinite

    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"Snooze(seconds) takes a number of seconds or a timedelta, got "
            f"{type(value).__name__}: {value!r}"
        )
    if not isfinite(value) or value < 0:
        raise ValueError(f"Snooze seconds must be a finite number >= 0, got {value!r}")
    return float(value)


class JobTimeout(TickqError, TimeoutError):
    """A job ran past its ``timeout``; the attempt counts as failed."""


class StepFailed(TickqError):
    """Raised inside a workflow when one of its steps (a job) failed for good: out of
    attempts, failed permanently or cancelled. The workflow may catch it; uncaught, the
    run fails (and alerts, like a job). ``job_id`` is the step's job, ``error`` its last
    error (``None`` when it was cancelled without one)."""

    def __init__(self, job_id: int, name: str, error: str | None, status: str = "failed") -> None:
        first = (error or "").split("\n", 1)[0]
        super().__init__(f"step job {job_id} {name} {status}" + (f": {first}" if first else ""))
        self.job_id, self.name, self.error, self.status = job_id, name, error, status

    def __reduce__(self) -> tuple[type[StepFailed], tuple[int, str, str | None, str]]:
        return type(self), (self.job_id, self.name, self.error, self.status)


class WorkflowMismatch(TickqError):
    """The workflow's code asks for a different step than the one recorded at that place
    (the code changed while the run was in flight): the run fails rather than do something
    else. ``recorded`` and ``asked`` name both (docs/workflows.md: shipping a change)."""

    def __init__(self, run_id: int, seq: int, recorded: str, asked: str) -> None:
        super().__init__(
            f"workflow run {run_id} step {seq}: the run recorded {recorded} there, but the "
            f"code now asks for {asked}; the code changed while the run was in flight "
            "(keep the old steps in place for runs started before the change: see "
            "docs/workflows.md, shipping a change)"
        )
        self.run_id, self.seq, self.recorded, self.asked = run_id, seq, recorded, asked

    def __reduce__(self) -> tuple[type[WorkflowMismatch], tuple[int, int, str, str]]:
        return type(self), (self.run_id, self.seq, self.recorded, self.asked)


class Suspend(BaseException):
    """Internal: a workflow's driver job suspends (its run waits for a step, a timer or an
    event); due again after ``seconds`` at the latest. A ``BaseException``, so a workflow's
    own ``except Exception`` never swallows it."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"suspended for up to {seconds:g}s")
        self.seconds = seconds
