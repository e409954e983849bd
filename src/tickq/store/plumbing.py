"""The SQL plumbing every store shares: a connection per thread, named queries, the
time, and turning rows into jobs. Private to ``tickq.store``: nothing outside it runs SQL.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from json import loads
from time import monotonic

from ..clock import SystemClock
from ..job import Job, JobState, NewJob
from ..payload import Unreadable, load_payload
from .queries import load_queries

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

    from ..clock import Clock

    Rows = list[tuple[Any, ...]]
    Statement = tuple[str, dict[str, Any]]
    Wake = Callable[[set[str] | None], None]
    """Called with the queues that got due jobs (None: anything may be due)."""
    Later = Callable[[str, float], None]
    """Called with a queue and the seconds until a job just put in line there comes due."""

STATES = {s.value: s for s in JobState}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Plumbing:
    """Named queries over a DB-API connection per thread; a backend fills in the hooks."""

    dialect = ""
    paramstyle = "named"

    def __init__(self, url: str, clock: Clock | None = None) -> None:
        self.url = url
        self.clock: Clock = clock or SystemClock()
        self._sql = load_queries(self.dialect, self.paramstyle)
        self._local = threading.local()

    # -- what a backend provides -------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _run(self, conn: Any, sql: str, params: dict[str, Any]) -> Rows:
        raise NotImplementedError

    def _run_many(self, conn: Any, statements: Sequence[Statement]) -> list[Rows]:
        raise NotImplementedError

    def _run_script(self, conn: Any, sql: str) -> None:
        """Run a migration's statements inside the migration's transaction."""
        raise NotImplementedError

    @contextmanager
    def _migrating(self, conn: Any) -> Iterator[None]:
        """One transaction that only one process at a time may be in."""
        raise NotImplementedError
        yield

    @contextmanager
    def _errors(self) -> Iterator[None]:
        yield

    def _ts(self, value: datetime | None) -> Any:
        return value

    def _decode_ts(self, value: Any) -> datetime | None:
        return value  # type: ignore[no-any-return]

    def _decode_json(self, value: str | None) -> Any:
        return loads(value) if value else None

    def _db_clock(self) -> bool:
        """True when the database's own clock decides what is due."""
        return False

    def _integrity_errors(self) -> tuple[type[BaseException], ...]:
        return ()

    def _queues_param(self, queues: Sequence[str] | None) -> Any:
        return list(queues) if queues else None

    def _ids_param(self, ids: Sequence[int]) -> Any:
        return list(ids)

    # -- connection per thread (and per process, after a fork) --------------------------
    def _connection(self) -> Any:
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            with self._errors():
                local.conn, local.pid = self._connect(), os.getpid()
            local.opened = monotonic()
        return local.conn

    def connection_age(self) -> float | None:
        """Seconds since this thread's connection was opened; None when it has none."""
        local = self._local
        if getattr(local, "conn", None) is None or local.pid != os.getpid():
            return None
        return monotonic() - float(local.opened)

    def drop_connection(self) -> None:
        """Close this thread's connection; the next call opens a new one."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close this thread's connection (the store stays usable)."""
        self.drop_connection()

    def _query(self, name: str, **params: Any) -> Rows:
        """Run the named query on this thread's connection."""
        with self._errors():
            return self._run(self._connection(), self._sql[name], params)

    def _query_many(self, statements: Sequence[Statement]) -> list[Rows]:
        """Run named queries in one transaction (and one round trip where the driver can)."""
        with self._errors():
            return self._run_many(self._connection(), statements)

    # -- time ---------------------------------------------------------------------------
    def now(self) -> datetime:
        """The time that decides what is due (the database's own on Postgres)."""
        if self._db_clock():
            return self._decode_ts(self._query("db_now")[0][0])  # type: ignore[return-value]
        return self.clock.now()

    def _now(self) -> Any:
        return None if self._db_clock() else self._ts(self.clock.now())

    def _epoch(self) -> float:
        """The clock's now in seconds since 1970 (SQLite's rate limits count starts so)."""
        return self.clock.now().timestamp()

    def _in(self, seconds: float) -> Any:
        if self._db_clock():
            return None
        return self._ts(self.clock.now() + timedelta(seconds=seconds))

    # -- rows ---------------------------------------------------------------------------
    def _job(self, row: Sequence[Any]) -> Job:
        """A ``Job`` from a row of ``JOB_COLUMNS``; never raises for a bad stored value
        (the job then has an ``Unreadable`` payload saying why)."""
        (id_, type_, queue, payload, status, priority, attempts, max_attempts, run_after,
         last_error, unique_key, created_at, updated_at, attempted_at, finished_at, lease_owner,
         lease_expires_at, meta, result, snoozes, snoozed_since,
         cancel_requested_at) = row  # fmt: skip
        ts, js = self._lenient_ts, self._lenient_json
        payload, priority, max_attempts = self._vetted(payload, priority, attempts, max_attempts)
        return Job(
            id_, type_, queue, payload, STATES[status], priority, attempts, max_attempts,
            ts(run_after), last_error, unique_key, ts(created_at), ts(updated_at),  # type: ignore[arg-type]
            ts(attempted_at), ts(finished_at), lease_owner, ts(lease_expires_at), js(meta),
            js(result), snoozes, ts(snoozed_since), ts(cancel_requested_at),
        )  # fmt: skip

    def _claimed_job(self, row: Sequence[Any], owner: str) -> Job:
        """A just-claimed ``Job`` from a row of ``CLAIMED_COLUMNS``; a row that can't be
        decoded or run gets an ``Unreadable`` payload, so it fails alone."""
        (id_, type_, queue, payload, priority, attempts, max_attempts, run_after, last_error,
         unique_key, created_at, attempted_at, lease_expires_at, meta, snoozes,
         snoozed_since) = row  # fmt: skip
        ts, js = self._lenient_ts, self._lenient_json
        payload, priority, max_attempts = self._vetted(payload, priority, attempts, max_attempts)
        claimed_at = ts(attempted_at)
        return Job(
            id_, type_, queue, payload, JobState.RUNNING, priority, attempts, max_attempts,
            ts(run_after) or _EPOCH, last_error, unique_key, ts(created_at), claimed_at,  # type: ignore[arg-type]
            claimed_at, None, owner, ts(lease_expires_at), js(meta), None, snoozes,
            ts(snoozed_since),
        )  # fmt: skip

    def _vetted(
        self, payload: str | None, priority: Any, attempts: Any, max_attempts: Any
    ) -> tuple[dict[str, Any], int, int]:
        """The payload, priority and max_attempts to build the job with; a bad stored option
        (text written by hand or by an older version) makes the payload ``Unreadable`` and is
        replaced by an int, so sorting and logging the job can't raise."""
        decoded = load_payload(payload)
        if type(priority) is not int:
            decoded, priority = Unreadable(f"stored priority {priority!r} is not an integer"), 0
        if type(max_attempts) is not int:
            decoded = Unreadable(f"stored max_attempts {max_attempts!r} is not an integer")
            max_attempts = attempts
        return decoded, priority, max_attempts

    def _lenient_ts(self, value: Any) -> datetime | None:
        try:
            return self._decode_ts(value)
        except (TypeError, ValueError, AttributeError):
            return None

    def _lenient_json(self, value: str | None) -> Any:
        try:
            return self._decode_json(value)
        except (RecursionError, ValueError):
            return None

    def _insert_params(self, job: NewJob, now: Any = ...) -> dict[str, Any]:
        """Parameters of the ``insert`` query; pass ``now`` once for a whole chunk."""
        return {
            "type": job.type, "queue": job.queue, "payload": job.payload_json,
            "priority": job.priority, "max_attempts": job.max_attempts,
            "run_after": self._ts(job.run_after), "unique_key": job.unique_key,
            "unique_scope": job.unique_scope, "meta": job.meta_json,
            "concurrency_key": job.concurrency_key, "unregistered": job.unregistered,
            "now": self._now() if now is ... else now,
        }  # fmt: skip
