"""The one seam to the database: a store speaks job transitions, never opaque bytes.

``SqlStore`` holds every transition of ``job.STATE_MACHINE`` once; a backend supplies only
its SQL dialect (``sql/<dialect>.sql``), how to connect, and how to run statements.
"""

from __future__ import annotations

from contextlib import suppress

from ..errors import InvalidTransition, JobNotFound
from ..job import STATE_MACHINE, TRANSITIONS, Attempt, Job, JobState, Transition
from .controls import ControlQueries
from .records import Leases, Recorded, Rescued
from .retention import RetentionQueries
from .sessions import SessionQueries
from .stats import StatsQueries
from .ticks import TickQueries
from .tokens import TokenQueries
from .workflows import WorkflowQueries

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Collection, Sequence
    from datetime import datetime, timedelta
    from re import Match
    from typing import Any

    from ..clock import Clock
    from ..job import NewJob
    from .plumbing import Later, Rows, Statement, Wake
    from .records import Outcome

CHUNK = 1000
CANCEL_NOTE = ""
"""What ``listen`` hears (as a queue name: no queue has an empty one) when a running job
was asked to stop: where the store can tell (Postgres NOTIFY), workers look at once."""


class SqlStore(
    TickQueries,
    StatsQueries,
    ControlQueries,
    SessionQueries,
    TokenQueries,
    WorkflowQueries,
    RetentionQueries,
):
    """Transitions of ``tickq_jobs`` over a DB-API connection per thread (see ``Store``)."""

    can_listen = False
    """True when ``listen`` hears other processes' enqueues (Postgres LISTEN/NOTIFY)."""

    def __init__(self, url: str, clock: Clock | None = None) -> None:
        super().__init__(url, clock)
        self._sql.update(by_kind(self._sql, self.FINISHING))
        self._subscribers: list[Wake] = []

    @property
    def transaction_pooled(self) -> bool:
        """True behind a transaction pooler: LISTEN hears nothing there without a direct URL."""
        return False

    # -- schema -------------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Apply the migrations not yet applied; returns their versions. Idempotent."""
        from .migrate import migrate  # only a deploy needs it, not every waking host

        return migrate(self)

    def schema_sql(self) -> str:
        """Every migration's SQL, in order, for users who manage their own schema."""
        from .migrate import schema_sql

        return schema_sql(self.dialect)

    # -- enqueue ------------------------------------------------------------------------
    def insert(self, jobs: Sequence[NewJob]) -> list[int]:
        """Insert jobs on tickq's own connection; a unique clash yields the existing id."""
        ids: list[int] = []
        for start in range(0, len(jobs), CHUNK):
            chunk = jobs[start : start + CHUNK]
            ids.extend(self._insert_chunk(chunk))
        self._announce(jobs)
        return ids

    def _insert_chunk(self, jobs: Sequence[NewJob]) -> list[int]:
        now = self._now()
        results = self._query_many([("insert", self._insert_params(j, now)) for j in jobs])
        return [self._existing_or_new(j, rows) for j, rows in zip(jobs, results, strict=True)]

    def insert_one(self, job: NewJob) -> tuple[int, bool]:
        """Insert ``job`` on tickq's own connection: its id and True, or, when its unique
        key clashes, the existing job's id and False."""
        rows = self._query("insert", **self._insert_params(job, self._now()))
        job_id, new = self._inserted_or_found(job, rows)
        if new:
            self._announce([job])
        return job_id, new

    def _existing_or_new(self, job: NewJob, rows: Rows) -> int:
        return self._inserted_or_found(job, rows)[0]

    def _inserted_or_found(self, job: NewJob, rows: Rows) -> tuple[int, bool]:
        if rows:
            return int(rows[0][0]), True
        for _ in range(5):
            found = self._query(
                "find_unique", unique_key=job.unique_key, unique_scope=job.unique_scope
            )
            if found:
                return int(found[0][0]), False
            # The clashing job finished between our insert and the look-up: insert again.
            again = self._query("insert", **self._insert_params(job))
            if again:
                return int(again[0][0]), True
        raise RuntimeError(f"could not insert or find the job with unique_key {job.unique_key!r}")

    # -- claim and record ---------------------------------------------------------------
    def claim(
        self, owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None = None
    ) -> list[Job]:
        """Move up to ``limit`` due pending jobs to running under ``owner``'s lease."""
        params = self._claim_params(owner, limit, lease_seconds, queues)
        return self._claimed(self._claim_many([("claim", params)])[-1], owner)

    def _claim_many(self, statements: list[Statement]) -> list[Rows]:
        """Run statements that claim, after the limits this process declared and has not
        written yet (``declare_limits``); returns the rows of ``statements``."""
        declarations = self._undeclared
        if not declarations:
            return self._query_many(statements)
        results = self._query_many(declarations + statements)
        self._declared()
        return results[len(declarations) :]

    def _claim_params(
        self, owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None
    ) -> dict[str, Any]:
        return {
            "owner": owner, "limit": limit, "lease_seconds": lease_seconds,
            "now": self._now(), "queues": self._queues_param(queues),
            **self._lease_params(lease_seconds),
        }  # fmt: skip

    def _lease_params(self, lease_seconds: float) -> dict[str, Any]:
        """When a lease taken or renewed now runs out (``lease_until``; SQLite adds its
        deadline on the monotonic clock)."""
        return {"lease_until": self._in(lease_seconds)}

    def _claimed(self, rows: Rows, owner: str) -> list[Job]:
        jobs = [self._claimed_job(r, owner) for r in rows]
        jobs.sort(key=_claim_order)
        return jobs

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
        ahead: int = 0,
        started: Sequence[Job] = (),
        ahead_wait: float | None = None,
    ) -> tuple[Recorded, list[Job]]:
        """``record`` then ``claim`` in one transaction: a worker's finished jobs and its
        next batch cost one round trip and one commit.

        ``durable=False``: the commit need only survive this process being killed, not the
        machine losing power (a later durable commit makes it durable too); SQLite then
        skips its sync to disk. ``started``: jobs claimed ahead that have started (recorded
        first). ``ahead``: claim up to that many more jobs ahead, after the ``limit`` ones
        (listed last; their ids in ``Recorded.ahead``); limited types within the room their
        limits leave, rate-limited ones only given ``ahead_wait``: the caller starts each of
        those within that many seconds of this call or gives it back unstarted (its start
        is counted at that time)."""
        outcomes, later = _one_per_job(outcomes)
        statements: list[Statement] = [] if durable else self._undurable_statements()
        if started:
            statements.append(("started", self._started_params(owner, started)))
        if outcomes:
            statements.extend(self._finish_statements(owner, outcomes))
        if limit > 0:
            statements.append(("claim", self._claim_params(owner, limit, lease_seconds, queues)))
        if ahead > 0:
            params = self._claim_params(owner, ahead, lease_seconds, queues)
            statements.append(("claim_ahead", {**params, "ahead_wait": ahead_wait}))
        if limit > 0 or ahead > 0:
            ran = self._claim_many(statements)
        else:
            ran = self._query_many(statements) if statements else []
        rows: dict[str, list[Any]] = {}
        for (name, _), r in zip(statements, ran, strict=True):
            # "finish:retried": finish as compiled for one kind of outcome (by_kind)
            rows.setdefault(name.partition(":")[0], []).extend(r)
        claimed_ahead = self._claimed(rows.get("claim_ahead", []), owner)
        recorded = self._recorded(outcomes, rows)
        recorded.started = [r[0] for r in rows.get("started", [])]
        recorded.ahead = {j.id for j in claimed_ahead}
        if later:
            recorded.add(self.record(owner, later))
        return recorded, self._claimed(rows.get("claim", []), owner) + claimed_ahead

    def _undurable_statements(self) -> list[Statement]:
        """What makes a round trip's commit wait for this process, not the disk (SQLite
        does it on the connection instead)."""
        return []

    def _started_params(self, owner: str, jobs: Sequence[Job]) -> dict[str, Any]:
        jobs = sorted(jobs, key=id_of)  # ids ascending: see queries.of_job
        return {"owner": owner, "ids": [j.id for j in jobs], "attempts": [j.attempts for j in jobs]}

    FINISHING: tuple[str, ...] = ("finish", "add_attempts")
    """The statements compiled once per kind of outcome (see ``by_kind``)."""
    SETTLES_IN_FINISH = False
    """True where ``finish_settled`` returns the jobs it left (no ``settled`` after it)."""

    def _finish_statements(self, owner: str, outcomes: Sequence[Outcome]) -> list[Statement]:
        """``finish`` applying ``outcomes``, once per kind of outcome among them, as compiled
        for that kind (``finish:retried``: its row of the state machine written into the
        statement); for others than successes, their history rows first (under finish's
        own guard: it then sees them running) and the jobs it settled read back after
        (their hooks and alerts get them)."""
        now = self._now()
        kinds: dict[str, list[Outcome]] = {}
        for o in outcomes:
            kinds.setdefault(o.kind, []).append(o)
        statements: list[Statement] = []
        others: list[int] = []
        for kind, batch in kinds.items():
            params = {"owner": owner, "now": now, **self._decisions(batch)}
            if kind == "succeeded":
                statements.append((f"finish:{kind}", params))
                continue
            statements.append((f"add_attempts:{kind}", params))
            if self.SETTLES_IN_FINISH:
                statements.append((f"finish_settled:{kind}", params))
            else:
                statements.append((f"finish:{kind}", params))
                others += [o.job.id for o in batch]
        if others:
            statements.append(("settled", {"ids": self._ids_param(others), "now": now}))
        return statements

    def _decisions(self, outcomes: Sequence[Outcome]) -> dict[str, Any]:
        """The parameters of ``finish`` for ``outcomes`` (all of one kind), in the
        dialect's form: what varies from job to job (see ``decisions``)."""
        raise NotImplementedError

    def _recorded(self, outcomes: Sequence[Outcome], rows: dict[str, Rows]) -> Recorded:
        """Sort ``outcomes`` by what ``finish`` returned: ``(id, status)`` of those it
        applied (a job asked to stop ends cancelled, whatever its attempt came to), or the
        jobs ``finish_settled`` left."""
        jobs = {job.id: job for job in map(self._job, rows.get("settled", ()))}
        status = {row[0]: row[1] for row in rows.get("finish", ())}
        for job in map(self._job, rows.get("finish_settled", ())):
            jobs[job.id] = job
            status[job.id] = str(job.status)
        out = Recorded()
        for o in outcomes:
            now = status.get(o.job.id)
            if now is None:
                out.stale.append(o.job)
            elif o.kind == "succeeded":
                out.succeeded.append(o.job)
            else:
                getattr(out, "cancelled" if now == "cancelled" else o.kind).append(jobs[o.job.id])
        return out

    def release(
        self,
        owner: str,
        jobs: Sequence[Job],
        ran: Collection[int] = (),
        grace: float | None = None,
    ) -> list[int]:
        """Put claimed-but-unfinished jobs back to pending without counting the attempt.
        Those of ``ran`` (ids) had started and are cut short: each gets a ``released``
        history row (numbered minus the attempt it gives back) saying ``grace`` ran out."""
        if not jobs:
            return []
        params = {"owner": owner, "now": self._now(), **self._releases(jobs, ran, grace)}
        statements = self._release_statements(params)
        ran_rows = self._query_many(statements)
        rows = {name: r for (name, _), r in zip(statements, ran_rows, strict=True)}
        back = {r[0] for r in rows["release"]}
        return [j.id for j in jobs if j.id in back]

    def _releases(
        self, jobs: Sequence[Job], ran: Collection[int], grace: float | None
    ) -> dict[str, Any]:
        """The jobs ``release`` puts back, in the dialect's form: id, attempt, whether it
        ran, and the error of its history row."""
        raise NotImplementedError

    def _release_statements(self, params: dict[str, Any]) -> list[Statement]:
        """The statements releasing the jobs of ``params``; ``release`` returns their ids."""
        return [("release", params)]

    def note_late(self, outcomes: Sequence[Outcome], outage: float) -> set[int]:
        """Say in each outcome's run's history row that its outcome came after the job had
        been rescued during a database outage of ``outage`` seconds (not a crash)."""
        statements = [("note_late", {
            "id": o.job.id, "attempt": o.job.attempts, "started": self._ts(o.job.attempted_at),
            "note": late_note(o, outage),
        }) for o in outcomes]  # fmt: skip
        results = self._query_many(statements) if statements else []
        return {rows[0][0] for rows in results if rows}

    def extend_leases(
        self, owner: str, ids: Sequence[int], lease_seconds: float, started: Sequence[int] = ()
    ) -> Leases:
        """Push the leases of ``ids`` forward, and record that the ``started`` ones (of
        ``ids``) started; returns the ids ``owner`` still holds, with those asked to stop
        (``q.cancel``) in ``cancel_requested``."""
        if not ids:
            return Leases((), ())
        rows = self._query(
            "extend_leases", owner=owner, ids=self._ids_param(ids), now=self._now(),
            lease_seconds=lease_seconds, started=self._ids_param(started),
            **self._lease_params(lease_seconds),
        )  # fmt: skip
        return Leases((r[0] for r in rows), (r[0] for r in rows if r[1]))

    def cancel_requests(self, owner: str, ids: Sequence[int]) -> set[int]:
        """Which of ``ids``, running under ``owner``'s lease, were asked to stop (a read:
        what a worker checks between lease renewals)."""
        if not ids:
            return set()
        return {r[0] for r in self._query("cancel_requests", owner=owner, ids=self._ids_param(ids))}

    def rescue_expired(self, grace: float = 0.0) -> Rescued:
        """Jobs whose lease ran out go back to pending (or failed, when out of attempts);
        those claimed ahead that never started are refunded (see ``Rescued``). On
        PostgreSQL none in the first ``grace`` seconds after the server started: their
        holders could not renew while it was down."""
        return self.rescue_and_claim(grace, "", 0, 0.0)[0]

    def rescue_and_claim(
        self,
        grace: float,
        owner: str,
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None = None,
    ) -> tuple[Rescued, list[Job]]:
        """``rescue_expired``, then ``claim`` up to ``limit`` jobs, in one round trip (the
        claim may take a job just rescued)."""
        self._before_rescue()
        statements = [(n, {**p, "grace": grace}) for n, p in self._rescue_statements(self._now())]
        rescues = len(statements)
        if limit > 0:
            statements.append(("claim", self._claim_params(owner, limit, lease_seconds, queues)))
            results = self._claim_many(statements)
        else:
            results = self._query_many(statements) if statements else []
        jobs = self._claimed(results[rescues], owner) if limit > 0 else []
        if not rescues:
            return Rescued([], []), jobs
        refunded = results[[name for name, _ in statements].index("refund_expired")]
        rescued = results[rescues - 1]
        return Rescued([self._job(r) for r in rescued], [self._job(r) for r in refunded]), jobs

    def _before_rescue(self) -> None:
        """What a dialect does before each rescue (SQLite tends its log and its clock)."""

    def _rescue_statements(self, now: Any) -> list[Statement]:
        return [("refund_expired", {"now": now}), ("rescue_expired", {"now": now})]

    def due_in(self, queues: Sequence[str] | None = None) -> float | None:
        """Seconds until the next pending job (of ``queues``) is due; <= 0: due now."""
        first, now, limited = self._query(
            "due_in", now=self._now(), queues=self._queues_param(queues), epoch=self._epoch()
        )[0]
        if first is None:
            return None if limited is None else float(limited)
        seconds = (self._decode_ts(first) - self._decode_ts(now)).total_seconds()  # type: ignore[operator]
        return seconds if limited is None else min(seconds, float(limited))

    def lease_expiry_in(self) -> float | None:
        """Seconds until the first lease of a running job runs out (None: nothing runs)."""
        first, now = self._query("lease_expiry", now=self._now())[0]
        if first is None:
            return None
        return (self._decode_ts(first) - self._decode_ts(now)).total_seconds()  # type: ignore[operator]

    # -- waking workers -----------------------------------------------------------------
    def subscribe(self, wake: Wake) -> None:
        """Call ``wake(queues)`` whenever this process enqueues jobs that are due now."""
        self._subscribers.append(wake)

    def unsubscribe(self, wake: Wake) -> None:
        """Stop calling ``wake`` (no error when it was not subscribed)."""
        with suppress(ValueError):
            self._subscribers.remove(wake)

    def _announce(self, jobs: Sequence[NewJob]) -> None:
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

    def listen(
        self, wake: Wake, stop: threading.Event, url: str | None = None, later: Later | None = None
    ) -> None:
        """Block until ``stop`` is set, calling ``wake`` for other processes' enqueues;
        ``url``: listen on a connection to there (a direct one, past a pooler). ``later``:
        called with a queue and seconds where the store can tell that a job put in line
        there comes due that much later (Postgres); without it such a note calls ``wake``.

        Only where ``can_listen``; raises ``DatabaseUnavailable`` when the connection drops.
        """
        raise NotImplementedError(f"{self.dialect} cannot listen for enqueues; poll instead")

    # -- reads and manual transitions ----------------------------------------------------
    def get(self, job_id: int) -> Job | None:
        """The job with this id, or None."""
        rows = self._query("get", id=job_id)
        return self._job(rows[0]) if rows else None

    def list_jobs(
        self,
        status: str | None = None,
        type: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Job]:
        """Jobs newest first, filtered; page with ``before_id`` = last id seen."""
        rows = self._query(
            "list", status=status, type=type, queue=queue, limit=limit, before_id=before_id
        )
        return [self._job(r) for r in rows]

    def attempts(self, job_id: int) -> list[Attempt]:
        """Every attempt of a job, oldest first (see ``Attempt``)."""
        ts = self._decode_ts
        return [
            Attempt(r[0], r[1], ts(r[2]), ts(r[3]), r[4], r[5], r[6])
            for r in self._query("attempts", id=job_id)
        ]

    def retry(self, job_id: int) -> Job:
        """Manual retry: a failed or cancelled job goes back to pending, due now."""
        return self._job(self._by_hand("retry", job_id)[0])

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending job; ask a running one to stop (``cancel_requested``: it stays
        running, with ``cancel_requested_at`` set, until its worker ends it cancelled)."""
        return self._job(self._by_hand("cancel", job_id)[0])

    def _manual_statements(self, name: str, params: dict[str, Any]) -> list[Statement]:
        """The statements of a manual transition; the last one's rows tell whether it applied."""
        return [(name, params)]

    def _by_hand(self, verb: str, job_id: int) -> Rows:
        """Apply the manual transition ``verb`` (``retry`` or ``cancel``) to one job."""
        transition = TRANSITIONS[verb]
        try:
            params = {"id": job_id, "now": self._now()}
            rows = self._query_many(self._manual_statements(transition.query, params))[-1]
        except self._integrity_errors() as exc:
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
        allowed = " or ".join(
            s.value for t in STATE_MACHINE if t.query == transition.query for s in t.sources
        )
        why = WHY_NOT.get((verb, job.status.value), "")
        raise InvalidTransition(
            f"cannot {verb} job {job_id}: it is {job.status.value}; "
            f"only {allowed} jobs can be {'retried' if verb == 'retry' else 'cancelled'}{why}"
        )

    def retry_failed(self, job_type: str | None = None, batch: int = 500) -> list[int]:
        """Put one batch of failed jobs back to pending; returns their ids (empty: none left).

        Failed jobs whose ``unique_key`` is held by an active job are left failed.
        """
        try:
            rows = self._query("retry_failed", type=job_type, batch=batch, now=self._now())
        except self._integrity_errors():
            # A job with the same unique_key was enqueued meanwhile: retry one by one.
            return self._retry_each_failed(job_type, batch)
        return [int(r[0]) for r in rows]

    def _retry_each_failed(self, job_type: str | None, batch: int) -> list[int]:
        retried = []
        for job in self.list_jobs("failed", job_type, None, batch):
            with suppress(InvalidTransition, JobNotFound):
                retried.append(self.retry(job.id).id)
        return retried

    def prune(
        self,
        older_than: timedelta,
        batch: int = 5000,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Delete finished jobs (and their attempts) that finished before now - older_than,
        and the workflow runs that ended before then (with their steps) and the events kept
        past their time.

        What they counted stays in ``tickq_totals`` (kept as they finished);
        ``progress(deleted_so_far)`` is called after each batch.
        """
        cutoff = self._ts(self.now() - older_than)
        total = 0
        while True:
            deleted = self._prune_batch(cutoff, batch)
            total += deleted
            if progress is not None and deleted:
                progress(total)
            if deleted < batch:
                self.prune_workflows(cutoff)
                return total

    def _prune_batch(self, cutoff: Any, batch: int) -> int:
        return len(self._query("prune", cutoff=cutoff, batch=batch))


def decisions(
    outcomes: Sequence[Outcome], due: Callable[[float], Any] | None = None
) -> list[tuple[Any, ...]]:
    """Outcomes of one kind as ``finish`` applies them (their kind's row of
    ``job.STATE_MACHINE`` is in the statement, see ``by_kind``): per outcome, sorted by
    job id, the job's id and attempt (its guard), the run's delay (None unless back in
    line; ``due(delay)`` when given: SQLite passes the time it comes due), error, result
    and duration."""
    per_job = []
    for job, kind, error, delay, duration, result in sorted(outcomes, key=_job_id):
        waits = DECIDED[kind][5]
        when = None if not waits else delay if due is None else due(delay)
        per_job.append((job.id, job.attempts, when, error, result, duration))
    return per_job


def _job_id(outcome: Outcome) -> int:
    return outcome.job.id


def id_of(job: Job) -> int:
    return job.id


def _decided(t: Transition) -> tuple[Any, ...]:
    # A suspended driver keeps the due time it wrote in its own transaction, which a step's
    # end or an event may have moved to now since (store/workflows.py): no delay of its own.
    waits = t.target is JobState.PENDING and t.name != "suspended"
    counted = None if t.target is JobState.DONE else t.counted
    return str(t.target), t.attempts, t.snoozes, t.finishes, counted, waits


DECIDED = {t.name: _decided(t) for t in STATE_MACHINE if t.query == "finish"}
"""Each outcome's row of the state machine as ``decisions`` hands it on, and whether it
waits (made once: a worker decides for every job it runs)."""


def _one_per_job(outcomes: Sequence[Outcome]) -> tuple[Sequence[Outcome], list[Outcome]]:
    """``outcomes`` split so that a job is in the first part once (``finish`` returns rows by
    id); the rest (another attempt of a job already there: rare) is recorded after."""
    ids = {o.job.id for o in outcomes}
    if len(ids) == len(outcomes):
        return outcomes, []
    first: dict[int, Outcome] = {}
    later: list[Outcome] = []
    for o in outcomes:
        if o.job.id in first:
            later.append(o)
        else:
            first[o.job.id] = o
    return list(first.values()), later


def match_inserted(store: SqlStore, jobs: Sequence[NewJob], rows: Rows) -> list[int]:
    """Line the returned (id, unique_key) rows of one statement's jobs up with the input;
    clashes get existing ids. Ids come from one sequence in statement order, so sorted ids
    follow the input order."""
    inserted = sorted(rows)
    ids, i = [], 0
    for job in jobs:
        if i < len(inserted) and (job.unique_key is None or inserted[i][1] == job.unique_key):
            ids.append(int(inserted[i][0]))
            i += 1
        else:
            ids.append(store._existing_or_new(job, []))
    return ids


def released_error(job: Job, grace: float | None) -> str:
    """The error of a ``released`` history row: a run cut short at shutdown."""
    waited = f"the worker's grace of {grace:g}s ran out" if grace is not None else "it stopped"
    return (
        f"Released: attempt {job.attempts} was cut short when its worker shut down "
        f"({waited} while it ran); the attempt is not counted and the job runs again"
    )


def late_note(outcome: Outcome, outage: float) -> str:
    """What a rescued run's history row says once its outcome arrives late."""
    return (
        f"LeaseExpired: outcome recorded late; the job had been rescued after the lease ran "
        f"out during a database outage of {outage:.0f} s (attempt {outcome.job.attempts} "
        f"{outcome.kind} after {outcome.duration:.1f} s on {outcome.job.lease_owner}, which "
        f"was alive and kept the outcome; it did not crash)"
    )


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


def by_kind(queries: dict[str, str], names: Sequence[str]) -> dict[str, str]:
    """``finish:retried``, ``add_attempts:retried``...: each statement of ``names`` with
    one kind of outcome's row of the state machine written into it as constants (its
    ``next_status``, ``attempt_change``, ``snooze_change``, ``finishes`` and ``counted``
    placeholders), so the database reads them as such, not per job: one text per kind."""
    import re

    compiled = {}
    for kind, (status, attempts, snoozes, finishes, counted, _) in DECIDED.items():
        row = {"next_status": _literal(status), "attempt_change": _literal(attempts),
               "snooze_change": _literal(snoozes), "finishes": _literal(finishes),
               "counted": _literal(counted)}  # fmt: skip
        keys = "|".join(row)
        pattern = re.compile(rf":({keys})\b|%\(({keys})\)s")
        for name in names:
            compiled[f"{name}:{kind}"] = pattern.sub(_written(row), queries[name])
    return compiled


def _written(row: dict[str, str]) -> Callable[[Match[str]], str]:
    def literal(match: Match[str]) -> str:
        return row[match.group(1) or match.group(2)]

    return literal


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool | int):
        return str(int(value))
    return "'" + str(value).replace("'", "''") + "'"
