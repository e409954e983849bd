"""The ``Store`` protocol: the one seam between tickq and a database.

Its methods are the transitions of ``job.STATE_MACHINE`` plus the reads the drivers, the
CLI and the dashboard need; every backend passes ``tests/store_contract``. Imported only
for type checking (``typing`` costs a waking host milliseconds): ``tickq.store.Store``
loads it on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Collection, Mapping, Sequence
    from datetime import datetime, timedelta

    from ..clock import Clock
    from ..controls import Limit
    from ..job import Attempt, Job, NewJob
    from .plumbing import Later, Wake
    from .postgres import PostgresStore
    from .records import Leases, Outcome, Recorded, Rescued, ScheduleMove, TickState
    from .sqlite import SQLiteStore


class Transitions(Protocol):
    """Every change of a job's status, each guarded by the state it expects."""

    def insert(self, jobs: Sequence[NewJob]) -> list[int]:
        """New pending jobs; a unique clash yields the existing job's id."""

    def claim(
        self, owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None = None
    ) -> list[Job]:
        """``claimed``: up to ``limit`` due pending jobs to running under ``owner``'s lease."""

    def record(self, owner: str, outcomes: Sequence[Outcome]) -> Recorded:
        """``succeeded``/``retried``/``failed``/``cancelled``, each only if ``owner`` still
        holds that attempt; the rest come back as ``stale`` and change nothing."""

    def record_and_claim(
        self,
        owner: str,
        outcomes: Sequence[Outcome],
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None = None,
        durable: bool = True,
        ahead: int = 0,
        started: Sequence[Job] = (),
        ahead_wait: float | None = None,
    ) -> tuple[Recorded, list[Job]]:
        """``started`` (jobs claimed ahead that began), ``record``, then ``claim`` and
        ``claimed_ahead`` (``ahead`` more, listed last), in one transaction; rate-limited
        types are claimed ahead only given ``ahead_wait`` (seconds within which the caller
        starts each or gives it back)."""

    def release(
        self,
        owner: str,
        jobs: Sequence[Job],
        ran: Collection[int] = (),
        grace: float | None = None,
    ) -> list[int]:
        """``released``: back to pending, the attempt not counted; returns the ids moved.
        Jobs of ``ran`` (ids) had started: each gets a ``released`` history row."""

    def note_late(self, outcomes: Sequence[Outcome], outage: float) -> set[int]:
        """Say in the history row of each outcome's run (``lease_expired`` or ``refunded``)
        that it finished, was recorded late and had been rescued during an outage of
        ``outage`` seconds; returns the ids of the jobs whose row was found."""

    def extend_leases(
        self, owner: str, ids: Sequence[int], lease_seconds: float, started: Sequence[int] = ()
    ) -> Leases:
        """Push leases forward, recording that ``started`` started; returns the ids
        ``owner`` still holds (and, in ``cancel_requested``, those of them asked to stop)."""

    def cancel_requests(self, owner: str, ids: Sequence[int]) -> set[int]:
        """Which of ``ids``, running under ``owner``'s lease, were asked to stop (a read)."""

    def rescue_expired(self, grace: float = 0.0) -> Rescued:
        """``rescued``: jobs whose lease ran out, to pending (failed when out of attempts);
        ``refunded`` instead for jobs whose start was never confirmed (``started``). Where
        the database can tell, none within ``grace`` seconds of its own start."""

    def rescue_and_claim(
        self,
        grace: float,
        owner: str,
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None = None,
    ) -> tuple[Rescued, list[Job]]:
        """``rescue_expired``, then ``claim``, in one round trip and transaction."""

    def retry(self, job_id: int) -> Job:
        """``retry`` by hand: a failed or cancelled job to pending, due now."""

    def retry_failed(self, job_type: str | None = None, batch: int = 500) -> list[int]:
        """``retry`` one batch of failed jobs; returns their ids (empty: none left)."""

    def cancel(self, job_id: int) -> Job:
        """``cancel`` by hand: a pending job to cancelled; a running one is asked to stop
        (``cancel_requested``), its worker then ends it cancelled."""

    def prune(
        self,
        older_than: timedelta,
        batch: int = 5000,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """``pruned``: delete jobs finished before now - ``older_than``, keeping totals."""


class Controls(Protocol):
    """Paused queues and the limits of job types, obeyed by every claim."""

    def pause(self, queue: str) -> bool:
        """No claim takes ``queue``'s jobs until ``resume``; False if already paused."""

    def resume(self, queue: str) -> bool:
        """Claims take ``queue``'s jobs again; False if it was not paused."""

    def paused(self) -> set[str]: ...

    def limits(self) -> dict[str, Limit]: ...

    def declare_limits(self, limits: Mapping[str, Limit | None]) -> None:
        """Set (or, for None, clear) these types' limits with the next claim."""


class Reads(Protocol):
    """What the queue holds, read without changing anything."""

    def now(self) -> datetime:
        """The time that decides what is due."""

    def get(self, job_id: int) -> Job | None: ...

    def list_jobs(
        self,
        status: str | None = None,
        type: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Job]: ...

    def attempts(self, job_id: int) -> list[Attempt]: ...

    def due_in(self, queues: Sequence[str] | None = None) -> float | None: ...

    def lease_expiry_in(self) -> float | None: ...

    def count_failed(self, job_type: str | None = None) -> int: ...

    def stats(self) -> dict[str, Any]: ...

    def database_health(self) -> dict[str, Any]:
        """SQLite: the write-ahead log's size and the disk's free space; Postgres:
        transactions held open long (``long_transactions``)."""

    watches_horizon: bool

    def long_transactions(self) -> list[dict[str, Any]]:
        """Postgres: the transactions open longer than ``long_transaction_seconds``, a
        WARNING for each that holds vacuum's horizon (once); elsewhere none, no query."""

    def totals(self) -> list[tuple[str, str, str, str, int, float]]: ...

    def failure_summary(
        self, job_type: str, start: datetime, end: datetime, sample: int = 10
    ) -> dict[str, Any]: ...

    def due_summary(self) -> tuple[int, datetime | None]: ...

    def queue_gauges(self) -> list[tuple[str, int, int]]: ...


class Ticks(Protocol):
    """What a tick reads, and schedule cursors moved with the jobs they enqueue."""

    def start_tick(self) -> TickState: ...

    def tick_state(self) -> TickState: ...

    def tick_backlog(self) -> tuple[int, datetime | None, datetime]: ...

    def enqueue_schedules(self, moves: Sequence[ScheduleMove]) -> list[dict[str, int] | None]: ...

    def schedule_states(self) -> list[dict[str, Any]]: ...

    def last_tick(self) -> tuple[datetime | None, int, datetime]: ...

    def remember_token(self, jti: str, expires_at: float) -> bool: ...


class Lifecycle(Protocol):
    """The schema, connections, and waking workers."""

    clock: Clock

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgres``: which named queries it runs."""

    @property
    def url(self) -> str: ...

    @property
    def can_listen(self) -> bool:
        """True when ``listen`` hears other processes' enqueues."""

    @property
    def transaction_pooled(self) -> bool:
        """True behind a transaction pooler (LISTEN there hears nothing)."""

    def migrate(self) -> list[int]: ...

    def schema_sql(self) -> str: ...

    def subscribe(self, wake: Wake) -> None: ...

    def unsubscribe(self, wake: Wake) -> None: ...

    def direct_url(self, url: str) -> str: ...

    def listen(
        self, wake: Wake, stop: threading.Event, url: str | None = None, later: Later | None = None
    ) -> None: ...

    def drop_connection(self) -> None: ...

    def close(self) -> None: ...


class Store(Transitions, Controls, Reads, Ticks, Lifecycle, Protocol):
    """A backend: ``SQLiteStore`` and ``PostgresStore`` implement it."""


def _conforms(sqlite: SQLiteStore, postgres: PostgresStore) -> tuple[Store, Store]:
    """Never called: the type checker proves here that both backends are ``Store``s."""
    return sqlite, postgres
