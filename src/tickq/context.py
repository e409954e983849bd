"""What a running job can know about itself: ``current_job()`` or a ``JobContext`` parameter."""

from __future__ import annotations

from contextlib import contextmanager, suppress
from contextvars import ContextVar
from datetime import datetime

from .job import Frozen, Job

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterator
    from typing import Any

    Key = tuple[int, int, str | None]

# The running job, or its context once asked for: a JobContext is only built for jobs that
# take one or call current_job() (most don't, and it costs microseconds per job).
_current: ContextVar[Job | JobContext | None] = ContextVar("tickq_current_job", default=None)

# Running attempts of this process asked to stop, as (job id, attempt, lease owner): the
# lease keeper adds them, the job reads them (a set lookup), the keeper's drop forgets them.
_requested: set[Key] = set()
# The asyncio task running each async attempt, to cancel it when it is asked to stop.
_tasks: dict[Key, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}


class JobContext(Frozen):
    """The running attempt. Declare a parameter annotated ``JobContext`` to receive it."""

    __slots__ = ()
    _fields = ("id", "type", "queue", "attempt", "max_attempts", "idempotency_key",
               "created_at", "payload", "meta", "snoozes", "lease_owner")  # fmt: skip
    _docs = {
        "idempotency_key": "Stable across every retry of this job: pass it to an email or "
        "payment API.",
        "meta": "Extra facts set by tickq, e.g. ``slot`` and ``missed`` for scheduled jobs.",
        "snoozes": "How many times this job has raised ``Snooze`` before this run (snoozes "
        "are not attempts: ``attempt`` does not grow with them).",
        "lease_owner": "Who runs this attempt (``host:pid:tag``); None outside a worker.",
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
        lease_owner: str | None

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
        lease_owner: str | None = None,
    ) -> JobContext:
        return tuple.__new__(cls, (
            id, type, queue, attempt, max_attempts, idempotency_key, created_at,
            {} if payload is None else payload, {} if meta is None else meta, snoozes,
            lease_owner,
        ))  # fmt: skip

    @property
    def is_last_attempt(self) -> bool:
        """True on the job's last attempt: if it fails now, the job ends ``failed``."""
        return self.attempt >= self.max_attempts

    @property
    def cancel_requested(self) -> bool:
        """True once ``q.cancel(id)`` asked this running attempt to stop (from any process).

        Cheap enough to check in every loop of a long job: a set lookup, no I/O. The worker
        learns of the request within about a second. Stop soon after (return, or raise
        ``tickq.Cancel``): an attempt asked to stop that raises anything ends
        ``cancelled``, never retried; one that returns normally still succeeds. An
        ``async def`` job needn't look: it is cancelled at its next ``await``.
        """
        return bool(_requested) and (self.id, self.attempt, self.lease_owner) in _requested

    @classmethod
    def of(cls, job: Job) -> JobContext:
        """The context of ``job``'s current attempt, e.g. to call its function in a test."""
        return cls(
            job.id, job.type, job.queue, job.attempts, job.max_attempts, job.idempotency_key,
            job.created_at, job.payload, job.meta, job.snoozes, job.lease_owner,
        )  # fmt: skip


def attempt_key(job: Job) -> Key:
    """The running attempt ``job`` is, as the stop requests know it."""
    return job.id, job.attempts, job.lease_owner


def stop_requested(job: Job) -> bool:
    """True when ``job``'s running attempt was asked to stop (see ``request_stop``)."""
    return bool(_requested) and (job.id, job.attempts, job.lease_owner) in _requested


def request_stop(key: Key) -> None:
    """Ask a running attempt to stop: its ``cancel_requested`` turns True and, if it is an
    ``async def`` job, its task is cancelled (from any thread)."""
    _requested.add(key)
    running = _tasks.get(key)
    if running is not None:
        _cancel_soon(*running)


def forget_stop(key: Key) -> None:
    """The attempt is over: drop its request."""
    _requested.discard(key)


@contextmanager
def stoppable(job: Job) -> Iterator[None]:
    """Within: ``job``'s async attempt runs as the current task, cancelled on request."""
    import asyncio

    key, task = attempt_key(job), asyncio.current_task()
    if task is None or job.lease_owner is None:
        yield
        return
    loop = asyncio.get_running_loop()
    _tasks[key] = (loop, task)
    if key in _requested:  # asked before it started: stop at its first await
        task.cancel()
    try:
        yield
    finally:
        if _tasks.get(key, (loop, None))[1] is task:  # not a newer run's (same attempt)
            del _tasks[key]


def _cancel_soon(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
    with suppress(RuntimeError):  # the loop closed meanwhile: nothing left to cancel
        loop.call_soon_threadsafe(task.cancel)


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
