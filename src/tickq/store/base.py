"""The one seam to the database: a store speaks job transitions, never opaque bytes.

``SqlStore`` holds every transition once; a backend supplies only its SQL dialect
(``sql/<dialect>.sql``), how to connect, and how to run statements.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from json import loads

from ..clock import SystemClock
from ..errors import InvalidTransition, JobNotFound
from ..job import Attempt, Frozen, Job, JobState, NewJob
from ..payload import Unreadable, load_payload
from .queries import DURATION_BUCKETS, bucket_label, load_queries, migrations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

    from ..clock import Clock

    Rows = list[tuple[Any, ...]]
    Statement = tuple[str, dict[str, Any]]
    Wake = Callable[[set[str] | None], None]
    """Called with the queues that got due jobs (None: anything may be due)."""
CHUNK = 1000
STATES = {s.value: s for s in JobState}


class Outcome(Frozen):
    """What one attempt came to: ``kind`` is complete, retry_later, fail or cancel_running."""

    __slots__ = ()
    _fields = ("job", "kind", "error", "delay", "duration", "result")
    _docs = {"result": "The job function's return value as JSON text (complete only), or None."}

    if TYPE_CHECKING:
        job: Job
        kind: str
        error: str | None
        delay: float
        duration: float
        result: str | None

    def __new__(
        cls, job: Job, kind: str, error: str | None = None, delay: float = 0.0,
        duration: float = 0.0, result: str | None = None,
    ) -> Outcome:  # fmt: skip
        return tuple.__new__(cls, (job, kind, error, delay, duration, result))


class TickState(Frozen):
    """What a tick reads before it starts: the time, the backlog and schedule cursors."""

    __slots__ = ()
    _fields = ("now", "due", "earliest_pending", "cursors")
    _docs = {
        "due": "Pending jobs due now.",
        "earliest_pending": "When the next job comes due: the earliest pending ``run_after``"
        " or running job's lease expiry (it comes back then if its worker died).",
        "cursors": "Schedule name -> ``handled_until``: every slot at or before it is enqueued.",
    }

    if TYPE_CHECKING:
        now: datetime
        due: int
        earliest_pending: datetime | None
        cursors: dict[str, datetime]

    def __new__(
        cls, now: datetime, due: int, earliest_pending: datetime | None,
        cursors: dict[str, datetime],
    ) -> TickState:  # fmt: skip
        return tuple.__new__(cls, (now, due, earliest_pending, cursors))


class ScheduleMove(Frozen):
    """Move one schedule's cursor from ``expected`` to ``handled_until`` with its jobs."""

    __slots__ = ()
    _fields = ("name", "expected", "handled_until", "last_slot", "jobs")

    if TYPE_CHECKING:
        name: str
        expected: datetime | None
        handled_until: datetime
        last_slot: datetime | None
        jobs: Sequence[NewJob]

    def __new__(
        cls, name: str, expected: datetime | None, handled_until: datetime,
        last_slot: datetime | None, jobs: Sequence[NewJob],
    ) -> ScheduleMove:  # fmt: skip
        return tuple.__new__(cls, (name, expected, handled_until, last_slot, jobs))


RECORDED_FIELDS = ("completed", "retried", "failed", "cancelled", "stale")


class Recorded:
    """Which outcomes the store applied; ``stale`` lost their lease before finishing."""

    __slots__ = ("cancelled", "completed", "failed", "retried", "stale")

    def __init__(self) -> None:
        self.completed: list[Job] = []
        self.retried: list[Job] = []
        self.failed: list[Job] = []
        self.cancelled: list[Job] = []
        self.stale: list[Job] = []

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in RECORDED_FIELDS)
        return f"Recorded({shown})"


class SqlStore:
    """Transitions of ``tickq_jobs`` over a DB-API connection per thread."""

    dialect = ""
    paramstyle = "named"
    can_listen = False
    """True when ``listen`` hears other processes' enqueues (Postgres LISTEN/NOTIFY)."""
    transaction_pooled = False
    """True behind a transaction pooler: LISTEN hears nothing there without a direct URL."""

    def __init__(self, url: str, clock: Clock | None = None) -> None:
        self.url = url
        self.clock = clock or SystemClock()
        self.q = load_queries(self.dialect, self.paramstyle)
        self._local = threading.local()
        self._subscribers: list[Wake] = []

    # -- what a backend provides -------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _run(self, conn: Any, sql: str, params: dict[str, Any]) -> Rows:
        raise NotImplementedError

    def _run_many(self, conn: Any, statements: Sequence[Statement]) -> list[Rows]:
        raise NotImplementedError

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

    def _migrate(self, conn: Any, steps: list[tuple[int, str, str]]) -> list[int]:
        raise NotImplementedError

    # -- connection per thread (and per process, after a fork) --------------------------
    def connection(self) -> Any:
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            with self._errors():
                local.conn, local.pid = self._connect(), os.getpid()
        return local.conn

    def drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with suppress(Exception):
                conn.close()

    def close(self) -> None:
        self.drop_connection()

    def run(self, name: str, **params: Any) -> Rows:
        with self._errors():
            return self._run(self.connection(), self.q[name], params)

    def run_many(self, statements: Sequence[Statement]) -> list[Rows]:
        with self._errors():
            return self._run_many(self.connection(), statements)

    # -- time ---------------------------------------------------------------------------
    def now(self) -> datetime:
        """The time that decides what is due (the database's own on Postgres)."""
        if self._db_clock():
            return self._decode_ts(self.run("db_now")[0][0])  # type: ignore[return-value]
        return self.clock.now()

    def _now(self) -> Any:
        return None if self._db_clock() else self._ts(self.clock.now())

    def _in(self, seconds: float) -> Any:
        if self._db_clock():
            return None
        return self._ts(self.clock.now() + timedelta(seconds=seconds))

    # -- rows ---------------------------------------------------------------------------
    def job_from_row(self, row: Sequence[Any]) -> Job:
        """A ``Job`` from a row of ``JOB_COLUMNS``; never raises for a bad stored value
        (the job then has an ``Unreadable`` payload saying why)."""
        (id_, type_, queue, payload, status, priority, attempts, max_attempts, run_after,
         last_error, unique_key, created_at, updated_at, attempted_at, finished_at, lease_owner,
         lease_expires_at, meta, result) = row  # fmt: skip
        ts, js = self._lenient_ts, self._lenient_json
        payload, priority, max_attempts = self._vetted(payload, priority, attempts, max_attempts)
        return Job(
            id_, type_, queue, payload, STATES[status], priority, attempts, max_attempts,
            ts(run_after), last_error, unique_key, ts(created_at), ts(updated_at),  # type: ignore[arg-type]
            ts(attempted_at), ts(finished_at), lease_owner, ts(lease_expires_at), js(meta),
            js(result),
        )  # fmt: skip

    def claimed_from_row(self, row: Sequence[Any], owner: str) -> Job:
        """A just-claimed ``Job`` from a row of ``CLAIMED_COLUMNS``; a row that can't be
        decoded or run gets an ``Unreadable`` payload, so it fails alone."""
        (id_, type_, queue, payload, priority, attempts, max_attempts, run_after, last_error,
         unique_key, created_at, attempted_at, lease_expires_at, meta) = row  # fmt: skip
        ts, js = self._lenient_ts, self._lenient_json
        payload, priority, max_attempts = self._vetted(payload, priority, attempts, max_attempts)
        claimed_at = ts(attempted_at)
        return Job(
            id_, type_, queue, payload, JobState.RUNNING, priority, attempts, max_attempts,
            ts(run_after) or _EPOCH, last_error, unique_key, ts(created_at), claimed_at,  # type: ignore[arg-type]
            claimed_at, None, owner, ts(lease_expires_at), js(meta),
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

    def insert_params(self, job: NewJob, now: Any = ...) -> dict[str, Any]:
        """Parameters of the ``insert`` query; pass ``now`` once for a whole chunk."""
        return {
            "type": job.type, "queue": job.queue, "payload": job.payload_json,
            "priority": job.priority, "max_attempts": job.max_attempts,
            "run_after": self._ts(job.run_after), "unique_key": job.unique_key,
            "unique_scope": job.unique_scope, "meta": job.meta_json,
            "now": self._now() if now is ... else now,
        }  # fmt: skip

    # -- schema -------------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Apply the migrations not yet applied; returns their versions. Idempotent."""
        with self._errors():
            return self._migrate(self.connection(), migrations(self.dialect))

    def schema_sql(self) -> str:
        """Every migration's SQL, in order, for users who manage their own schema."""
        parts = [f"-- {name}\n{sql.strip()}\n" for _, name, sql in migrations(self.dialect)]
        return "\n".join(parts)

    # -- enqueue ------------------------------------------------------------------------
    def insert(self, jobs: Sequence[NewJob]) -> list[int]:
        """Insert jobs on tickq's own connection; a unique clash yields the existing id."""
        ids: list[int] = []
        for start in range(0, len(jobs), CHUNK):
            chunk = jobs[start : start + CHUNK]
            ids.extend(self._insert_chunk(chunk))
        self.announce(jobs)
        return ids

    def _insert_chunk(self, jobs: Sequence[NewJob]) -> list[int]:
        now = self._now()
        results = self.run_many([("insert", self.insert_params(j, now)) for j in jobs])
        return [self._existing_or_new(j, rows) for j, rows in zip(jobs, results, strict=True)]

    def _existing_or_new(self, job: NewJob, rows: Rows) -> int:
        if rows:
            return int(rows[0][0])
        for _ in range(5):
            found = self.run(
                "find_unique", unique_key=job.unique_key, unique_scope=job.unique_scope
            )
            if found:
                return int(found[0][0])
            # The clashing job finished between our insert and the look-up: insert again.
            again = self.run("insert", **self.insert_params(job))
            if again:
                return int(again[0][0])
        raise RuntimeError(f"could not insert or find the job with unique_key {job.unique_key!r}")

    # -- claim and record ---------------------------------------------------------------
    def claim(
        self, owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None = None
    ) -> list[Job]:
        """Move up to ``limit`` due pending jobs to running under ``owner``'s lease."""
        params = self._claim_params(owner, limit, lease_seconds, queues)
        return self._claimed(self.run("claim", **params), owner)

    def _claim_params(
        self, owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None
    ) -> dict[str, Any]:
        return {
            "owner": owner, "limit": limit, "lease_seconds": lease_seconds,
            "lease_until": self._in(lease_seconds), "now": self._now(),
            "queues": self._queues_param(queues),
        }  # fmt: skip

    def _claimed(self, rows: Rows, owner: str) -> list[Job]:
        jobs = [self.claimed_from_row(r, owner) for r in rows]
        jobs.sort(key=_claim_order)
        return jobs

    def _queues_param(self, queues: Sequence[str] | None) -> Any:
        return list(queues) if queues else None

    def record(self, owner: str, outcomes: Sequence[Outcome]) -> Recorded:
        """Apply each attempt's outcome, guarded by (status running, attempt, owner)."""
        return self.record_and_claim(owner, outcomes, 0, 0.0)[0]

    def record_and_claim(
        self,
        owner: str,
        outcomes: Sequence[Outcome],
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None = None,
        durable: bool = True,
    ) -> tuple[Recorded, list[Job]]:
        """``record`` then ``claim`` in one transaction: a worker's finished jobs and its
        next batch cost one round trip and one commit.

        ``durable=False``: the commit need only survive this process being killed, not the
        machine losing power (a later durable commit makes it durable too); SQLite then
        skips its sync to disk."""
        completed = [o for o in outcomes if o.kind == "complete"]
        others = [o for o in outcomes if o.kind != "complete"]
        statements: list[Statement] = []
        if completed:
            statements.append(("complete", self._complete_params(owner, completed)))
        for o in others:
            statements.extend(self._outcome_statements(owner, o))
        if limit > 0:
            statements.append(("claim", self._claim_params(owner, limit, lease_seconds, queues)))
        results = self.run_many(statements) if statements else []
        jobs = self._claimed(results.pop(), owner) if limit > 0 else []
        return self._recorded([o.job for o in completed], others, results), jobs

    def _outcome_statements(self, owner: str, outcome: Outcome) -> list[Statement]:
        """The statements of one outcome; the last one's rows tell whether it applied."""
        return [(outcome.kind, self._outcome_params(owner, outcome))]

    def _complete_params(self, owner: str, completed: Sequence[Outcome]) -> dict[str, Any]:
        return {
            "owner": owner, "now": self._now(), "ids": [o.job.id for o in completed],
            "attempts": [o.job.attempts for o in completed],
            "durations": [o.duration for o in completed],
        }  # fmt: skip

    def _outcome_params(self, owner: str, o: Outcome) -> dict[str, Any]:
        return {
            "id": o.job.id, "attempt": o.job.attempts, "owner": owner, "error": o.error,
            "delay": o.delay, "run_after": self._in(o.delay), "now": self._now(),
            "duration": o.duration,
            "outcome": {"retry_later": "error", "fail": "error"}.get(o.kind, "cancelled"),
        }  # fmt: skip

    def _recorded(self, done: list[Job], others: list[Outcome], results: list[Rows]) -> Recorded:
        out = Recorded()
        if done:
            applied = {r[0] for r in results.pop(0)}
            out.completed = [j for j in done if j.id in applied]
            out.stale = [j for j in done if j.id not in applied]
        buckets = {"retry_later": out.retried, "fail": out.failed, "cancel_running": out.cancelled}
        per_outcome = len(results) // len(others) if others else 0
        for i, outcome in enumerate(others):
            rows = results[(i + 1) * per_outcome - 1]
            if rows:
                buckets[outcome.kind].append(self.job_from_row(rows[0]))
            else:
                out.stale.append(outcome.job)
        return out

    def release(self, owner: str, jobs: Sequence[Job]) -> list[int]:
        """Put claimed-but-unfinished jobs back to pending without counting the attempt."""
        statements = [
            ("release", {"id": j.id, "attempt": j.attempts, "owner": owner, "now": self._now()})
            for j in jobs
        ]
        results = self.run_many(statements) if statements else []
        return [rows[0][0] for rows in results if rows]

    def extend_leases(self, owner: str, ids: Sequence[int], lease_seconds: float) -> set[int]:
        """Push the leases of ``ids`` forward; returns the ids ``owner`` still holds."""
        if not ids:
            return set()
        rows = self.run(
            "extend_leases", owner=owner, ids=self._ids_param(ids), now=self._now(),
            lease_seconds=lease_seconds, lease_until=self._in(lease_seconds),
        )  # fmt: skip
        return {r[0] for r in rows}

    def _ids_param(self, ids: Sequence[int]) -> Any:
        return list(ids)

    def rescue_expired(self) -> list[Job]:
        """Jobs whose lease ran out go back to pending (or failed, when out of attempts)."""
        return [self.job_from_row(r) for r in self.run("rescue_expired", now=self._now())]

    def due_in(self, queues: Sequence[str] | None = None) -> float | None:
        """Seconds until the next pending job (of ``queues``) is due; <= 0: due now."""
        first, now = self.run("due_in", now=self._now(), queues=self._queues_param(queues))[0]
        if first is None:
            return None
        return (self._decode_ts(first) - self._decode_ts(now)).total_seconds()  # type: ignore[operator]

    # -- waking workers -----------------------------------------------------------------
    def subscribe(self, wake: Wake) -> None:
        """Call ``wake(queues)`` whenever this process enqueues jobs that are due now."""
        self._subscribers.append(wake)

    def unsubscribe(self, wake: Wake) -> None:
        with suppress(ValueError):
            self._subscribers.remove(wake)

    def announce(self, jobs: Sequence[NewJob]) -> None:
        """Wake this process's workers for ``jobs`` that are due now (a hint, never a promise:
        an enqueue on the caller's connection is announced before the caller commits)."""
        if not self._subscribers:
            return
        now = self.clock.now()
        queues = {j.queue for j in jobs if j.run_after is None or j.run_after <= now}
        if queues:
            for wake in tuple(self._subscribers):
                wake(queues)

    def direct_url(self, url: str) -> str:
        """``url`` checked as an address to ``listen`` on."""
        return url

    def listen(self, wake: Wake, stop: threading.Event, url: str | None = None) -> None:
        """Block until ``stop`` is set, calling ``wake`` for other processes' enqueues;
        ``url``: listen on a connection to there (a direct one, past a pooler).

        Only where ``can_listen``; raises ``DatabaseUnavailable`` when the connection drops.
        """
        raise NotImplementedError(f"{self.dialect} cannot listen for enqueues; poll instead")

    # -- reads and manual transitions ----------------------------------------------------
    def get(self, job_id: int) -> Job | None:
        rows = self.run("get", id=job_id)
        return self.job_from_row(rows[0]) if rows else None

    def list_jobs(
        self,
        status: str | None = None,
        type: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Job]:
        rows = self.run(
            "list", status=status, type=type, queue=queue, limit=limit, before_id=before_id
        )
        return [self.job_from_row(r) for r in rows]

    def attempts(self, job_id: int) -> list[Attempt]:
        """Every attempt of a job, oldest first (see ``Attempt``)."""
        ts = self._decode_ts
        return [
            Attempt(r[0], r[1], ts(r[2]), ts(r[3]), r[4], r[5], r[6])
            for r in self.run("attempts", id=job_id)
        ]

    def retry(self, job_id: int) -> Job:
        """Manual retry: a failed or cancelled job goes back to pending, due now."""
        rows = self._guarded_manual("retry", job_id, "retry")
        return self.job_from_row(rows[0])

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending or running job (a running one's late result is then ignored)."""
        rows = self._guarded_manual("cancel", job_id, "cancel")
        return self.job_from_row(rows[0])

    def _manual_statements(self, name: str, params: dict[str, Any]) -> list[Statement]:
        """The statements of a manual transition; the last one's rows tell whether it applied."""
        return [(name, params)]

    def _guarded_manual(self, name: str, job_id: int, verb: str) -> Rows:
        try:
            statements = self._manual_statements(name, {"id": job_id, "now": self._now()})
            rows = self.run_many(statements)[-1]
        except self.integrity_errors() as exc:
            job = self.get(job_id)
            key = job.unique_key if job else None
            raise InvalidTransition(
                f"cannot {verb} job {job_id}: another pending or running job already holds "
                f"its unique_key {key!r}; wait for it to finish or cancel it first"
            ) from exc
        if rows:
            return rows
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(f"job {job_id} does not exist (it may have been pruned)")
        allowed = "failed or cancelled" if verb == "retry" else "pending or running"
        why = WHY_NOT.get((verb, job.status.value), "")
        raise InvalidTransition(
            f"cannot {verb} job {job_id}: it is {job.status.value}; "
            f"only {allowed} jobs can be {'retried' if verb == 'retry' else 'cancelled'}{why}"
        )

    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        return ()

    def prune(
        self,
        older_than: timedelta,
        batch: int = 5000,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Delete finished jobs (and their attempts) that finished before now - older_than.

        What they counted is first added to ``tickq_totals``; ``progress(deleted_so_far)``
        is called after each batch.
        """
        cutoff = self._ts(self.now() - older_than)
        total = 0
        while True:
            deleted = self._prune_batch(cutoff, batch)
            total += deleted
            if progress is not None and deleted:
                progress(total)
            if deleted < batch:
                return total

    def _prune_batch(self, cutoff: Any, batch: int) -> int:
        rows = self.run("prune", cutoff=cutoff, batch=batch)
        return len(rows)

    def stats(self) -> dict[str, Any]:
        """Counts by status, queue and type; due backlog; recent failures; processed totals
        by outcome and the duration histogram (the figures ``tickq.metrics`` exports)."""
        now = self.now()
        by_status = {s.value: 0 for s in JobState}
        by_queue: dict[str, dict[str, int]] = {}
        by_type: dict[str, dict[str, int]] = {}
        for queue, status, type_, count in self.run("counts"):
            by_status[status] += count
            by_queue.setdefault(queue, {}).setdefault(status, 0)
            by_queue[queue][status] += count
            by_type.setdefault(type_, {}).setdefault(status, 0)
            by_type[type_][status] += count
        due, oldest = self.run("due_summary", now=self._ts(now))[0]
        oldest_ts = self._decode_ts(oldest)
        since = self._ts(now - timedelta(hours=1))
        processed, durations = summarise_totals(self.totals())
        return {
            "by_status": by_status, "by_queue": by_queue, "by_type": by_type,
            "due": due,
            "oldest_due_age_seconds": (now - oldest_ts).total_seconds() if oldest_ts else None,
            "failed_last_hour": self.run("failed_since", since=since)[0][0],
            "failed_attempts_last_hour": self.run("failed_attempts_since", since=since)[0][0],
            "processed": processed, "duration_seconds": durations,
            "now": now.isoformat(),
        }  # fmt: skip

    def totals(self) -> list[tuple[str, str, str, str, int, float]]:
        """Finished attempts as (queue, type, outcome, le, attempts, seconds), one row per
        duration bucket (not cumulative): the live table plus what pruning rolled up."""
        merged: dict[tuple[str, str, str, str], list[float]] = {}
        for queue, type_, outcome, le, count, seconds in self.run("totals"):
            entry = merged.setdefault((queue, type_, outcome, le), [0, 0.0])
            entry[0] += int(count)
            entry[1] += float(seconds or 0)
        return [(*key, int(v[0]), v[1]) for key, v in sorted(merged.items())]

    def count_failed(self, job_type: str | None = None) -> int:
        """How many jobs are failed (of ``job_type``, when given)."""
        return int(self.run("count_failed", type=job_type)[0][0])

    def retry_failed(self, job_type: str | None = None, batch: int = 500) -> list[int]:
        """Put one batch of failed jobs back to pending; returns their ids (empty: none left).

        Failed jobs whose ``unique_key`` is held by an active job are left failed.
        """
        try:
            rows = self.run("retry_failed", type=job_type, batch=batch, now=self._now())
        except self.integrity_errors():
            # A job with the same unique_key was enqueued meanwhile: retry one by one.
            return self._retry_each_failed(job_type, batch)
        return [int(r[0]) for r in rows]

    def _retry_each_failed(self, job_type: str | None, batch: int) -> list[int]:
        retried = []
        for job in self.list_jobs("failed", job_type, None, batch):
            with suppress(InvalidTransition, JobNotFound):
                retried.append(self.retry(job.id).id)
        return retried

    def failure_summary(
        self, job_type: str, start: datetime, end: datetime, sample: int = 10
    ) -> dict[str, Any]:
        """Failures of ``job_type`` in [start, end): jobs that reached failed and failed
        attempts (``Retry`` on purpose excluded), with recent job ids and the latest error."""
        window = {"type": job_type, "start": self._ts(start), "end": self._ts(end)}
        failed_jobs = self.run("failed_in_window", **window)[0][0]
        attempts = self.run("failed_attempts_in_window", **window)[0][0]
        if failed_jobs:
            rows = self.run("failed_sample_in_window", limit=sample, **window)
        else:
            rows = self.run("failed_attempts_sample_in_window", limit=sample, **window)
        return {
            "failed_jobs": int(failed_jobs),
            "failed_attempts": int(attempts),
            "job_ids": list(dict.fromkeys(int(r[0]) for r in rows)),
            "last_error": rows[0][1] if rows else None,
        }

    def due_summary(self) -> tuple[int, datetime | None]:
        """(number of pending jobs due now, when the next pending job comes due)."""
        due = self.run("due_summary", now=self._now())[0][0]
        return due, self._decode_ts(self.run("next_due")[0][0])

    # -- schedules and ticks ------------------------------------------------------------
    def start_tick(self) -> TickState:
        """Record that a tick began and read what it needs, in one round trip."""
        params = {"now": self._now()}
        return self._tick_state(self.run_many(self._start_tick_statements(params))[-1])

    def _start_tick_statements(self, params: dict[str, Any]) -> list[Statement]:
        return [("record_tick", params), ("tick_state", params)]

    def tick_state(self) -> TickState:
        """The time, the backlog and every schedule's cursor, without recording a tick."""
        return self._tick_state(self.run("tick_state", now=self._now()))

    def _tick_state(self, rows: Rows) -> TickState:
        now, due, earliest, cursors = None, 0, None, {}
        for kind, name, at, count in rows:
            if kind == "now":
                now = self._decode_ts(at)
            elif kind == "backlog":
                due, earliest = int(count or 0), self._decode_ts(at)
            else:
                cursors[name] = self._decode_ts(at)
        return TickState(now, due, earliest, cursors)  # type: ignore[arg-type]

    def tick_backlog(self) -> tuple[int, datetime | None, datetime]:
        """(pending jobs due now, when the next job comes due (``earliest_pending``), now)."""
        due, earliest, now = self.run("tick_backlog", now=self._now())[0]
        return int(due), self._decode_ts(earliest), self._decode_ts(now)  # type: ignore[return-value]

    def enqueue_schedules(self, moves: Sequence[ScheduleMove]) -> list[dict[str, int] | None]:
        """Apply each move whose cursor is still where it was read, in one transaction.

        Per move: ``{unique_key: job id}`` of the jobs inserted, or None when another tick
        moved the cursor first (and so enqueued those slots itself).
        """
        if not moves:
            return []
        results = self.run_many([("enqueue_schedule", self._move_params(m)) for m in moves])
        return [{key: int(id_) for id_, key in rows if id_} if rows else None for rows in results]

    def _move_params(self, move: ScheduleMove) -> dict[str, Any]:
        return {
            "name": move.name, "expected": self._ts(move.expected),
            "handled_until": self._ts(move.handled_until),
            "last_slot": self._ts(move.last_slot), "now": self._now(),
        }  # fmt: skip

    def schedule_states(self) -> list[dict[str, Any]]:
        """Each stored schedule cursor: name, handled_until, last_slot, updated_at."""
        return [
            {"name": name, "handled_until": self._decode_ts(until),
             "last_slot": self._decode_ts(last), "updated_at": self._decode_ts(updated)}
            for name, until, last, updated in self.run("schedule_states")
        ]  # fmt: skip

    def last_tick(self) -> tuple[datetime | None, int, datetime]:
        """(when the last tick began or None, how many ticks so far, now)."""
        at, ticks, now = self.run("last_tick", now=self._now())[0]
        return self._decode_ts(at), int(ticks or 0), self._decode_ts(now)  # type: ignore[return-value]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _claim_order(job: Job) -> tuple[int, datetime, int]:
    return -job.priority, job.run_after, job.id


WHY_NOT = {
    ("retry", "done"): " (it already succeeded; enqueue a new job to run it again)",
    ("retry", "pending"): " (it is already waiting to run)",
    ("retry", "running"): " (it is running now)",
    ("cancel", "done"): " (it already finished)",
    ("cancel", "failed"): " (it already stopped)",
    ("cancel", "cancelled"): " (it is already cancelled)",
}


def summarise_totals(
    rows: Sequence[tuple[str, str, str, str, int, float]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(processed[queue][type][outcome] = attempts, duration_seconds[queue][type] =
    {count, sum, buckets: {le: cumulative count}}) from ``SqlStore.totals()`` rows."""
    processed: dict[str, Any] = {}
    per_bucket: dict[tuple[str, str], dict[str, int]] = {}
    sums: dict[tuple[str, str], float] = {}
    for queue, type_, outcome, le, count, seconds in rows:
        by_outcome = processed.setdefault(queue, {}).setdefault(type_, {})
        by_outcome[outcome] = by_outcome.get(outcome, 0) + count
        buckets = per_bucket.setdefault((queue, type_), {})
        buckets[le] = buckets.get(le, 0) + count
        sums[(queue, type_)] = sums.get((queue, type_), 0.0) + seconds
    durations: dict[str, Any] = {}
    labels = [bucket_label(b) for b in DURATION_BUCKETS] + ["+Inf"]
    for (queue, type_), buckets in per_bucket.items():
        running, cumulative = 0, {}
        for le in labels:
            running += buckets.get(le, 0)
            cumulative[le] = running
        durations.setdefault(queue, {})[type_] = {
            "count": running,
            "sum": round(sums[(queue, type_)], 6),
            "buckets": cumulative,
        }
    return processed, durations
