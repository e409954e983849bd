"""Internal: ``q.tick()``: what one scheduler call does on a host that sleeps.

record the tick -> enqueue the schedule slots that came due -> ``run_cycle`` (the pass every
driver shares) -> report what is left. An empty tick costs two round trips on Postgres:
the tick state, then the lease rescue with an empty claim.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime, timedelta
from time import monotonic

from .cycle import TICK_PATIENCE, run_cycle
from .job_options import EnqueueOptions
from .logger import log
from .pruning import prune_due
from .runtime import watching
from .store import ScheduleMove
from .store.ticks import DUE_COUNT_CAP

TYPE_CHECKING = False  # typing and schedule (dataclasses) cost a waking host its import
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from .alerts import Alerts
    from .job import NewJob
    from .runtime import Runtime
    from .schedule import Due, ScheduleDefinition
    from .store import TickState


def run_tick(
    runtime: Runtime,
    limit: int = 100,
    time_budget: float | None = 20.0,
    alerts: Alerts | None = None,
    patience: float = TICK_PATIENCE,
) -> dict[str, Any]:
    """Enqueue due schedule slots, process up to ``limit`` jobs, return the summary.

    A finished job's outcome the database can't take is retried for ``patience`` leases
    (an HTTP tick: half a lease, a request must end; ``tickq tick``, a process of its own:
    as long as ``process_jobs``); after that the process's outbox keeps it, renewing the
    job's lease and recording it once the database answers (``jobs.held`` counts them),
    and the next tick records it before anything else.

    With ``alerts`` (None: the log sink only), first alerts of the failures this tick
    records are delivered before it returns: on a sleeping host nothing else runs them."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if time_budget is not None and time_budget <= 0:
        raise ValueError(f"time_budget must be positive seconds, got {time_budget}")
    if not watching():
        return _tick(runtime, limit, time_budget, alerts, patience)
    from .observe import running

    return running("tickq tick", {"tickq.limit": limit},
                   lambda: _tick(runtime, limit, time_budget, alerts, patience))  # fmt: skip


def _tick(
    runtime: Runtime, limit: int, time_budget: float | None, alerts: Alerts | None,
    patience: float,
) -> dict[str, Any]:  # fmt: skip
    started, budget_started = monotonic(), runtime.monotonic()
    runtime.flush_outbox()  # outcomes an earlier tick had to leave: before anything else
    state = runtime.store.start_tick()
    enqueued = enqueue_due(runtime, state)
    budget = None
    if time_budget is not None:
        # What enqueueing used comes off the budget; a spent budget starts no job.
        budget = max(time_budget - (runtime.monotonic() - budget_started), 1e-6)
    with alerts.at_once() if alerts else nullcontext():
        jobs = run_cycle(runtime, limit, budget, None, patience)
    if alerts and jobs["failed"]:
        alerts.deliver(time_budget=5.0)  # its first alerts: nothing else runs until next call
    jobs.pop("duration_ms", None)
    pruned = prune_due(runtime, tick=True)
    summary = summarise(runtime, state, enqueued, jobs)
    summary["pruned"] = pruned
    summary["duration_ms"] = round((monotonic() - started) * 1000, 3)
    log.info(
        "tick: %d slot(s) enqueued, %d job(s) claimed, %d succeeded, %d retried, "
        "%d snoozed, %d failed, %d due left",
        len(enqueued),
        jobs["claimed"],
        jobs["succeeded"],
        jobs["retried"],
        jobs["snoozed"],
        jobs["failed"],
        summary["remaining_due"],
        extra={"tick": summary},
    )
    return summary


def enqueue_schedules(runtime: Runtime) -> list[dict[str, Any]]:
    """Enqueue every schedule slot that has come due; for drivers that run jobs themselves."""
    return enqueue_due(runtime, runtime.store.tick_state())


def enqueue_due(runtime: Runtime, state: TickState) -> list[dict[str, Any]]:
    """Insert one job per due slot, each (schedule, slot) once ever; report what went in."""
    planned = []
    for definition in runtime.schedules.values():
        plan = plan_move(runtime, definition, state.cursors.get(definition.name), state.now)
        if plan is not None:
            planned.append(plan)
    if not planned:
        return []
    results = insert_moves(runtime, [move for move, _ in planned])
    enqueued = []
    for (move, due), inserted in zip(planned, results, strict=True):
        if inserted is None:  # another tick moved this cursor first and enqueued the slots
            continue
        for i, (job, slot) in enumerate(zip(move.jobs, due.slots, strict=True)):
            if (job_id := inserted.get(str(job.unique_key))) is not None:
                entry = {"name": move.name, "slot": slot.isoformat(),
                         "missed": due.missed if i == 0 else 0, "job_id": job_id}  # fmt: skip
                log.info("schedule %(name)s enqueued slot %(slot)s as job %(job_id)s "
                         "(%(missed)s missed)", entry)  # fmt: skip
                enqueued.append(entry)
    return enqueued


def insert_moves(runtime: Runtime, moves: list[ScheduleMove]) -> list[dict[str, int] | None]:
    """``store.enqueue_schedules(moves)``, inside each watcher's ``sending`` scope when
    watched, so the slots' jobs carry the trace they were enqueued in (a tick's)."""
    watchers = watching()
    if not watchers or not any(move.jobs for move in moves):
        return runtime.store.enqueue_schedules(moves)
    from .observe import sent

    results: list[dict[str, int] | None] = []

    def insert(jobs: Sequence[NewJob]) -> list[int]:
        rows = iter(jobs)
        carried = [move._replace(jobs=[next(rows) for _ in move.jobs]) for move in moves]
        results.extend(runtime.store.enqueue_schedules(carried))
        return [job_id for inserted in results if inserted for job_id in inserted.values()]

    sent(watchers, [job for move in moves for job in move.jobs], insert)
    return results


def plan_move(
    runtime: Runtime, definition: ScheduleDefinition, cursor: datetime | None, now: datetime
) -> tuple[ScheduleMove, Due] | None:
    """The cursor move (with one job per due slot) a schedule needs at ``now``, or None."""
    due = first_sight(definition, now) if cursor is None else definition.due(cursor, now)
    if not due.slots:
        # First sight with nothing due: store the cursor anyway, or a later tick would look
        # back only max_delay again and could skip a slot in between.
        return (ScheduleMove(definition.name, None, now, None, []), due) if cursor is None else None
    jobs = [
        runtime.new_job(
            definition.job,
            {},
            EnqueueOptions(
                run_after=slot, unique_key=definition.slot_key(slot), unique_scope="all"
            ),
            {
                "schedule": definition.name,
                "slot": slot.isoformat(),
                "missed": due.missed if i == 0 else 0,
            },
        )
        for i, slot in enumerate(due.slots)
    ]
    return ScheduleMove(definition.name, cursor, due.slots[-1], due.slots[-1], jobs), due


def first_sight(definition: ScheduleDefinition, now: datetime) -> Due:
    """A schedule seen for the first time runs the latest slot that passed within its
    max_delay (the app was deployed just after it), whatever ``catch_up`` says; slots
    before that are history, from before the schedule existed: none counts as missed."""
    from .schedule import Due  # loaded already: ``definition`` is one of its classes

    return Due(definition.due(now - definition.effective_max_delay, now).slots[-1:], 0)


def summarise(
    runtime: Runtime, state: TickState, enqueued: list[dict[str, Any]], jobs: dict[str, Any]
) -> dict[str, Any]:
    """The tick's JSON summary; reads the backlog again only if the tick changed it."""
    quiet = not (enqueued or state.due or jobs["claimed"] or jobs["rescued"])
    if quiet:
        due, earliest, now = 0, state.earliest_pending, state.now
    else:
        due, earliest, now = runtime.store.tick_backlog()
    next_slots = [d.next_slot(now) for d in runtime.schedules.values()]
    upcoming = [t for t in (earliest, *next_slots) if t is not None]
    return {
        "schedules_enqueued": enqueued,
        "jobs": jobs,
        "remaining_due": due,
        "remaining_due_exact": due < DUE_COUNT_CAP,
        "next_due_at": min(upcoming).isoformat() if upcoming else None,
        "oldest_due_age_seconds": (
            round((now - earliest).total_seconds(), 3) if due and earliest else None
        ),
        "ticked_at": state.now.isoformat(),
    }


def strict_problems(summary: Mapping[str, Any], max_wait: timedelta) -> list[str]:
    """Why a strict tick should report failure: new permanent failures or stale work."""
    problems = []
    failed = summary["jobs"]["failed"]
    if failed:
        problems.append(f"{failed} job(s) failed permanently in this tick")
    age = summary.get("oldest_due_age_seconds")
    if age is not None and age > max_wait.total_seconds():
        problems.append(
            f"the oldest due job has waited {age:.0f}s, longer than max_wait "
            f"{max_wait.total_seconds():.0f}s: tick more often or raise the limit"
        )
    return problems


def tick_health(
    runtime: Runtime,
    expected_interval: timedelta,
    alert: bool = True,
    alerts: Callable[[], Alerts] | None = None,
) -> dict[str, Any]:
    """Is a scheduler still calling? Stale once the last tick is older than twice
    ``expected_interval``. Reveals no job data: safe to serve without a secret. With
    ``alert`` a stale tick also raises (and delivers) the overdue alert through
    ``alerts()`` (the Queue's, made on first need): work that only a trusted caller may
    cause."""
    last, ticks, now = runtime.store.last_tick()
    stale_after = expected_interval * 2
    report: dict[str, Any] = {
        "ok": False,
        "status": "no_tick_yet",
        "last_tick_at": None,
        "age_seconds": None,
        "ticks": ticks,
        "stale_after_seconds": stale_after.total_seconds(),
        "now": now.isoformat(),
        "database": _database(runtime.store.database_health(), alert),
    }
    if last is None:
        report["message"] = "no tick has been recorded yet: point a scheduler at the tick endpoint"
        return report
    age = now - last
    report.update(last_tick_at=last.isoformat(), age_seconds=round(age.total_seconds(), 3))
    if age > stale_after:
        report.update(
            status="stale",
            message=(
                f"no tick for {age.total_seconds():.0f}s (expected every "
                f"{expected_interval.total_seconds():.0f}s): the scheduler may have stopped "
                "(GitHub disables scheduled workflows in public repositories after 60 days "
                "without activity)"
            ),
        )
        if alert and alerts is not None:
            alert_overdue(alerts(), last, expected_interval, now)
    else:
        report.update(ok=True, status="ok")
    return report


def alert_overdue(alerts: Alerts, last: datetime, every: timedelta, now: datetime) -> None:
    """Raise the tick-overdue alert. Nothing runs jobs while the tick is missing, so the
    alert job is delivered right here, within a few seconds; neither step ever raises."""
    if alerts.tick_overdue(last, every, now=now) is not None:
        alerts.deliver(time_budget=5.0)


def _database(health: dict[str, Any], trusted: bool) -> dict[str, Any]:
    """What the health report says of the database: to an anonymous caller (not
    ``trusted``) how many transactions are held open and the oldest's age, not whose
    (their pids, application names and states stay with the operator)."""
    held = health.get("long_transactions")
    if trusted or held is None:
        return health
    oldest = max((t["age_seconds"] for t in held), default=None)
    rest = {k: v for k, v in health.items() if k != "long_transactions"}
    return {**rest, "long_transactions_count": len(held), "oldest_transaction_seconds": oldest}
