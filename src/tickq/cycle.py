"""Internal: ``run_cycle``: the one pass every driver shares (process_jobs, tick, worker).

rescue expired leases -> claim a job -> execute -> record it (and claim the next ones when
none is left in line) -> alert,
until the limit or the time budget is reached; returns a JSON-serialisable report.
"""

from __future__ import annotations

from collections import deque
from time import monotonic, sleep

from .execute import execute
from .horizon import look_at_horizon
from .job import OUTCOMES
from .logger import INFO, WARNING, held_lines, log
from .outbox import Outbox
from .runtime import watching
from .signals import noting_signals
from .store import RECORDED_FIELDS, Recorded
from .trouble import worth_retrying as _worth_retrying

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterator, Sequence
    from typing import Any

    from .job import Job
    from .lease import LeaseKeeper
    from .runtime import Runtime
    from .store import Outcome


RECORD_RETRIES = (0.2, 0.5, 1.0, 2.0)
"""Seconds between tries to record finished outcomes, the last one repeated for the
cycle's patience (the lease keeper holds the jobs meanwhile, renewing as soon as the
database answers): a finished job left ``running`` would run again once its lease ran out
and somebody rescued it, as if it had crashed."""
TICK_PATIENCE = 0.5
"""A tick (an HTTP request) keeps retrying a finished job's outcome for this fraction of
the lease, then must end: the outcome goes to the process's ``Outbox``, which keeps the
job's lease and records it once the database answers (or the next tick does, first)."""
CALL_PATIENCE = 2.0
"""``process_jobs`` keeps retrying for this many leases, and at least ``CALL_FLOOR``
seconds (a restart or failover is over well within two minutes, the default 60 s lease's
two)."""
CALL_FLOOR = 30.0
LATE_AFTER = 1.0
"""Outcomes that waited this many seconds or more for the database and came back stale
were taken over during the outage: their run's history row says so."""

REPORT_FIELDS = ("claimed", *OUTCOMES, "rescued", "stale", "released", "refunded")


def new_report() -> dict[str, Any]:
    return dict.fromkeys(REPORT_FIELDS, 0)


def run_cycle(
    runtime: Runtime,
    limit: int = 100,
    time_budget: float | None = None,
    queues: Sequence[str] | None = None,
    patience: float = CALL_PATIENCE,
) -> dict[str, Any]:
    """Process up to ``limit`` due jobs, starting none once ``time_budget`` is spent.

    Jobs run one after another, each outcome committed before the next job starts; short
    jobs are claimed a few at a time (see ``Line``), in the round trip recording the last
    outcome. So a process killed mid-cycle reruns at most the job it was running: none it
    finished runs again, and jobs it never started spend no attempt (those it had claimed
    come back, their attempt refunded, once their lease runs out). An outcome the
    database can't take (down, read-only) is sent again for ``patience`` leases; then the
    cycle returns and the process's outbox keeps it (the report's ``held``: outcomes
    waiting for the database), recording it as soon as the database answers. Outcomes
    held from an earlier call are recorded first of all, before any rescue; the rescue
    and the first claim share a round trip.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if time_budget is not None and time_budget <= 0:
        raise ValueError(f"time_budget must be positive seconds, got {time_budget}")
    started = monotonic()
    deadline = runtime.monotonic() + time_budget if time_budget else None
    report = new_report()
    runtime.flush_outbox()  # before any rescue: they are this process's, finished
    runtime.declare_limits()
    if watching():
        from .observe import queues as watch_queues

        watch_queues(runtime.store)
    keeper, outbox = runtime.lease_keeper, outbox_of(runtime)
    line = Line(runtime, keeper, report, limit, deadline, queues)
    line.extend(rescue(runtime, report, 1 if limit else 0, queues))  # one round trip
    with noting_signals():  # once a call: a job's own SystemExit is not a signal's
        try:
            while (job := line.next()) is not None:
                outcome = execute(job, runtime.definition(job.type), runtime.job_names)
                line.ran(outcome)
                want, ahead = line.wanted()
                # Each job's outcome is committed before the next job starts; only the last
                # commit needs to survive a power loss (it takes the earlier ones with it).
                try:
                    jobs = record_and_claim(runtime, keeper, [outcome], report, want, queues,
                                            line.last(want), ahead, patience=patience,
                                            outbox=outbox)[1]  # fmt: skip
                finally:
                    if not outbox.holds(job):  # the outbox drops its own
                        keeper.drop([job])
                line.extend(jobs)
        finally:
            line.give_back()
    look_at_horizon(runtime, report["claimed"] > 0)  # at most once a minute, while jobs flow
    report["held"] = outbox.count()
    report["duration_ms"] = round((monotonic() - started) * 1000, 3)
    return report


AHEAD_WORK = 0.05
"""Seconds of work, at the pace of the call's jobs so far, a tick or ``process_jobs``
claims ahead in one round trip: short jobs then cost one small round trip each (their
outcome), not a claim each, while a slow job keeps no others from other processes."""


class Line:
    """The jobs a cycle claimed and has yet to run, in claim order.

    The first is claimed alone; then, whenever the line runs dry, the next with as many
    more as ``AHEAD_WORK`` holds at the pace so far, in the round trip recording the last
    outcome. A job claimed ahead is marked unconfirmed, as every claim is until its outcome
    or a lease renewal says it started: a process killed before it starts it spends none of
    its attempts (the rescue refunds it once its lease runs out). Those the limit or the
    budget leave unstarted go back to pending, not counted."""

    def __init__(
        self,
        runtime: Runtime,
        keeper: LeaseKeeper,
        report: dict[str, Any],
        limit: int,
        deadline: float | None,
        queues: Sequence[str] | None,
    ) -> None:
        self.runtime, self.keeper, self.report = runtime, keeper, report
        self.limit, self.deadline, self.queues = limit, deadline, queues
        self.jobs: deque[Job] = deque()
        self.runs = 0
        self.busy = 0.0  # seconds the runs took

    def extend(self, jobs: list[Job]) -> None:
        self.keeper.hold(jobs)
        self.jobs.extend(jobs)

    def next(self) -> Job | None:
        """The next job to start, held as started; None when none is left to run."""
        if not self.jobs:
            return None
        if self.runs and _spent(self.runtime, self.deadline):
            return None  # the budget is spent: give_back() returns the rest
        job = self.jobs.popleft()
        self.keeper.started(job)
        return job

    def ran(self, outcome: Outcome) -> None:
        self.runs += 1
        self.busy += outcome.duration

    def wanted(self) -> tuple[int, int]:
        """How many jobs to claim now (1 when the line ran dry and the limit and budget
        allow) and how many more ahead of them."""
        room = self.limit - self.report["claimed"]
        if self.jobs or room <= 0 or _spent(self.runtime, self.deadline):
            return 0, 0
        pace = max(self.busy / self.runs, 1e-6)
        work = AHEAD_WORK
        if self.deadline is not None:
            work = min(work, self.deadline - self.runtime.monotonic())
        return 1, max(0, min(room - 1, int(work / pace)))

    def last(self, want: int) -> bool:
        """True when no job will start after this round trip: its commit is the durable one."""
        return not (want or (self.jobs and not _spent(self.runtime, self.deadline)))

    def give_back(self) -> None:
        """Put the jobs left unstarted back to pending (their attempt not counted)."""
        left, self.jobs = list(self.jobs), deque()
        if not left:
            return
        self.keeper.drop(left)
        try:
            back = self.runtime.store.release(self.runtime.owner, left)
        except Exception as exc:  # their leases run out; the rescue refunds them
            log.warning("tickq could not give back %d job(s) claimed and not started (%s); "
                        "they are refunded once their lease runs out", len(left), exc,
                        extra={"event": "give_back_failed"})  # fmt: skip
            return
        self.report["claimed"] -= len(back)


def rescue(
    runtime: Runtime,
    report: dict[str, Any],
    claim: int = 0,
    queues: Sequence[str] | None = None,
) -> list[Job]:
    """Return jobs whose worker vanished to pending (or failed when out of attempts); jobs
    it held whose start it never confirmed come back with their attempt refunded. Right
    after the database (re)started, no lease counts as run out for one lease: the holders
    get that long to reconnect and renew (they were alive, the database was not). Then,
    in the same round trip, claim up to ``claim`` jobs (returned)."""
    lease = runtime.lease_seconds
    rescued, jobs = runtime.store.rescue_and_claim(lease, runtime.owner, claim, lease, queues)
    report["claimed"] += len(jobs)
    runtime.notify_finished(j for j in rescued if j.status in ("failed", "cancelled"))
    for job in rescued:
        if job.id in rescued.refunded:
            report["refunded"] += 1
            log.info("tickq job %s %s: lease expired before its start was confirmed; "
                     "refunded attempt %s", job.id, job.type, job.attempts + 1,
                     extra={"event": "refunded", "job_id": job.id, "job_type": job.type,
                            "attempt": job.attempts + 1})  # fmt: skip
            continue  # not a failed attempt: no retry hook
        if job.status == "cancelled":  # asked to stop, and its worker died meanwhile
            report["cancelled"] += 1
            log.warning("tickq job %s %s: lease expired on attempt %s after a cancel request; "
                        "cancelled", job.id, job.type, job.attempts,
                        extra={"event": "cancelled", "job_id": job.id, "job_type": job.type,
                               "attempt": job.attempts, "outcome": "cancelled"})  # fmt: skip
            continue
        report["rescued"] += 1
        log.warning("tickq job %s %s: lease expired on attempt %s, rescued as %s",
                    job.id, job.type, job.attempts, job.status.value,
                    extra={"event": "rescued", "job_id": job.id, "job_type": job.type,
                           "attempt": job.attempts, "outcome": job.status.value})  # fmt: skip
        if job.status == "failed":
            report["failed"] += 1
            runtime.notify_failed(job)
        else:
            runtime.notify_retried(job)
    return jobs


def record(
    runtime: Runtime, keeper: LeaseKeeper, outcomes: list[Outcome], report: dict[str, Any]
) -> Recorded:
    """Record outcomes in one round trip (those whose lease was lost count as stale), then
    log each and alert on failures. Raises ``DatabaseUnavailable`` having recorded none."""
    return record_and_claim(runtime, keeper, outcomes, report)[0]


def record_and_claim(
    runtime: Runtime,
    keeper: LeaseKeeper,
    outcomes: list[Outcome],
    report: dict[str, Any],
    limit: int = 0,
    queues: Sequence[str] | None = None,
    durable: bool = True,
    ahead: int = 0,
    started: Sequence[Job] = (),
    *,
    patience: float = TICK_PATIENCE,
    held_for: float = 0.0,
    outbox: Outbox | None = None,
    ahead_wait: float | None = None,
) -> tuple[Recorded, list[Job]]:
    """``record``, and claim up to ``limit`` more jobs (and ``ahead`` more, claimed ahead)
    in the same round trip, which first records that the ``started`` jobs started.

    On a database error the outcomes alone are sent again for ``patience`` leases (then the
    error is raised, none recorded, unless an ``outbox`` takes them: then they are held
    there, none is tallied, and no job is claimed). ``held_for``: seconds these outcomes
    already waited for the database (the worker keeps them across its own retries). An
    outcome that waited and comes back stale was taken over meanwhile: its run's history
    row says so. ``ahead_wait``: see ``Store.record_and_claim`` (the worker's line)."""
    lost = keeper.finished(o.job for o in outcomes)
    applied, stale = outcomes, []
    if lost or any(o.kind == "stale" for o in outcomes):  # "stale": never started (pool)
        stale = [o.job for o in outcomes if o.job.id in lost or o.kind == "stale"]
        applied = [o for o in outcomes if o.job.id not in lost and o.kind != "stale"]
    try:
        recorded, jobs = runtime.store.record_and_claim(
            runtime.owner, applied, limit, runtime.lease_seconds, queues, durable, ahead,
            started, ahead_wait,
        )  # fmt: skip
    except Exception as exc:
        if not (applied and patience) or not _worth_retrying(exc):
            raise
        began = monotonic()
        try:
            recorded = _record_again(runtime, applied, started, exc, patience, outbox)
        except Exception as again:
            if outbox is None or not _worth_retrying(again):
                raise
            outbox.keep(applied, started, held_for + monotonic() - began)
            recorded, kept = Recorded(), {id(o) for o in applied}
            outcomes = [o for o in outcomes if id(o) not in kept]
        jobs, held_for = [], held_for + monotonic() - began
    if held_for >= LATE_AFTER and (recorded.stale or stale):
        taken = {j.id for j in recorded.stale} | lost
        _note_late(runtime, [o for o in outcomes if o.kind != "stale" and o.job.id in taken],
                   held_for)  # fmt: skip
    recorded.stale.extend(stale)
    report["claimed"] += len(jobs)
    tally(runtime, outcomes, recorded, report)
    return recorded, jobs


def _note_late(runtime: Runtime, late: list[Outcome], held: float) -> None:
    """Outcomes that waited ``held`` seconds for the database and found their job taken
    over meanwhile (rescued once the lease ran out): say so in that run's history row,
    instead of "crashed". Best effort: the outcome itself is gone either way."""
    if not late:
        return
    try:
        noted = runtime.store.note_late(late, held)
    except Exception as exc:  # a note: never worth failing the cycle for
        log.warning("tickq could not note %d late outcome(s) in the history: %s", len(late),
                    exc, extra={"event": "late_note_failed"})  # fmt: skip
        return
    for o in late:
        log.warning("tickq job %s %s attempt %s: outcome %s recorded late; the job had been "
                    "rescued after the lease ran out during a database outage of %.0fs%s",
                    o.job.id, o.job.type, o.job.attempts, o.kind, held,
                    "" if o.job.id in noted else " (its history row was not found)",
                    extra={"event": "recorded_late", "job_id": o.job.id, "job_type": o.job.type,
                           "attempt": o.job.attempts, "outcome": o.kind,
                           "outage_s": round(held, 1)})  # fmt: skip


def outbox_of(runtime: Runtime) -> Outbox:
    """The process's outbox: outcomes it records are tallied (logged, hooks run) as a
    cycle's are, and those found taken over meanwhile get their late note."""

    def settle(outcomes: list[Outcome], recorded: Recorded, waited: float) -> None:
        if waited >= LATE_AFTER and recorded.stale:
            taken = {j.id for j in recorded.stale}
            _note_late(runtime, [o for o in outcomes if o.job.id in taken], waited)
        tally(runtime, outcomes, recorded, new_report())

    return runtime.outbox(lambda: Outbox(runtime.store, lambda: runtime.owner,
                                         runtime.lease_keeper, settle))  # fmt: skip


def _record_again(
    runtime: Runtime,
    applied: list[Outcome],
    started: Sequence[Job],
    exc: Exception,
    patience: float = TICK_PATIENCE,
    outbox: Outbox | None = None,
) -> Recorded:
    """Send the outcomes again (without the claim): each is fenced by status, attempt and
    owner, so one that did reach the database counts as stale, never twice."""
    began = monotonic()
    give_up = began + _patience_seconds(runtime, patience)
    for delay in _record_delays():
        if monotonic() + delay > give_up:
            break
        if delay == RECORD_RETRIES[0]:
            log.warning("tickq could not record %d finished job(s) (%s); keeping the outcomes "
                        "and trying again for up to %gs", len(applied), exc,
                        _patience_seconds(runtime, patience),
                        extra={"event": "record_retry"})  # fmt: skip
        sleep(delay)
        try:
            store, owner = runtime.store, runtime.owner
            return store.record_and_claim(owner, applied, 0, 0.0, started=started)[0]
        except Exception as again:
            if not _worth_retrying(again):
                raise
            exc = again
    if outbox is None:
        log.warning("tickq gave up recording %d finished job(s) after %.0fs (%s): they stay "
                    "running until their lease runs out, then run again", len(applied),
                    monotonic() - began, exc, extra={"event": "record_given_up"})  # fmt: skip
    raise exc


def _patience_seconds(runtime: Runtime, patience: float) -> float:
    seconds = runtime.lease_seconds * patience
    return max(seconds, CALL_FLOOR) if patience >= CALL_PATIENCE else seconds


def _record_delays() -> Iterator[float]:
    yield from RECORD_RETRIES
    while True:
        yield RECORD_RETRIES[-1]


def release(
    runtime: Runtime,
    jobs: list[Job],
    report: dict[str, Any],
    ran: Collection[int] = (),
    grace: float | None = None,
) -> list[int]:
    """Put claimed-but-unfinished jobs back to pending; the attempt does not count. Those
    of ``ran`` (ids) had started and are cut short: each gets a ``released`` history row
    saying the ``grace`` ran out, so every run is on record."""
    released = runtime.store.release(runtime.owner, jobs, ran, grace)
    report["released"] += len(released)
    back = set(released)
    for job in jobs:
        if job.id in back:
            log.info("job %s %s attempt %s released back to pending (not counted)",
                     job.id, job.type, job.attempts,
                     extra={"event": "released", "job_id": job.id, "job_type": job.type,
                            "attempt": job.attempts})  # fmt: skip
    return released


def tally(
    runtime: Runtime, outcomes: list[Outcome], recorded: Recorded, report: dict[str, Any]
) -> None:
    for word in RECORDED_FIELDS:
        report[word] += len(getattr(recorded, word))
    stale = {j.id for j in recorded.stale}
    stopped = {j.id for j in recorded.cancelled}  # asked to stop: whatever the attempt did
    with held_lines():
        for o in outcomes:
            log_outcome(o, "stale" if o.job.id in stale else "cancelled" if o.job.id in stopped
                        else None)  # fmt: skip
    for job in recorded.failed:
        runtime.notify_failed(job)
    runtime.notify_finished((*recorded.succeeded, *recorded.failed, *recorded.cancelled))
    for job in recorded.retried:
        runtime.notify_retried(job)


def log_outcome(o: Outcome, override: str | None = None) -> None:
    word = override or o.kind
    level = INFO if word in QUIET_OUTCOMES else WARNING
    if not log.isEnabledFor(level):
        return
    job, ms = o.job, o.duration * 1000
    first_line = o.error.split("\n", 1)[0] if o.error else ""
    args = (job.id, job.type, job.attempts, job.max_attempts, word, ms,
            f": {first_line}" if first_line else "")  # fmt: skip
    extra = {"event": word, "job_id": job.id, "job_type": job.type, "attempt": job.attempts,
             "outcome": word, "duration_ms": round(ms, 3)}  # fmt: skip
    # What log.log() does, less its walk up the stack to name the caller: a line per job
    # is a worker's main cost after the database (the caller is this function anyway).
    record = log.makeRecord(log.name, level, __file__, LOG_LINE, OUTCOME_MESSAGE, args, None,
                            "log_outcome")  # fmt: skip
    record.__dict__.update(extra)  # what makeRecord(extra=) does, less checking our own keys
    log.handle(record)


QUIET_OUTCOMES = ("succeeded", "snoozed", "suspended")
"""Outcomes logged at INFO: neither is a failure (a snooze is a job waiting, on purpose)."""
OUTCOME_MESSAGE = "job %s %s attempt %s/%s %s in %.1fms%s"
LOG_LINE = log_outcome.__code__.co_firstlineno


def _spent(runtime: Runtime, deadline: float | None) -> bool:
    """The budget is read on the runtime's clock (a ``FrozenClock`` in tests)."""
    return deadline is not None and runtime.monotonic() >= deadline
