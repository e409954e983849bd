"""What each page shows, read through the Queue and the store's browse queries."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from ..job import JobState, split_error
from ..store import browse
from ..store.ticks import DUE_COUNT_CAP

if TYPE_CHECKING:
    from ..job import Job
    from ..store import SqlStore
    from .host import Queue

ALERT_DELIVERY = "tickq.alert_delivery"
STATUSES = [s.value for s in JobState]
PAGE = 50
CHART = {"width": 720, "height": 160, "top": 10, "bottom": 22}


def overview(q: Queue, expected_interval: timedelta) -> dict[str, Any]:
    """Counts, the 24-hour chart, backlog, tick health, failing types, recent alerts.

    The chart with the failing types, and the stopped jobs' counts, are read on two helper
    threads (each with its own connection) while this one reads the rest: the page costs
    its longest part, not the sum.
    """
    store = q._store
    start = store.now()
    activity = _helper().submit(_activity, store, start)
    stopped = _helper().submit(browse.open_counts, store, "stopped")
    due, earliest, now = store.tick_backlog()
    counts = browse.open_counts(store, "active") + stopped.result(timeout=60)
    by_status = {s: 0 for s in STATUSES}
    by_queue: dict[str, dict[str, int]] = {}
    for status, queue, _type, n in counts:
        by_status[status] += n
        by_queue.setdefault(queue, {}).setdefault(status, 0)
        by_queue[queue][status] += n
    paused = store.paused()
    for queue in paused:
        by_queue.setdefault(queue, {})
    by_status["done"] = browse.done_count(store)
    alerts = browse.list_page(store, type=ALERT_DELIVERY, limit=10)[0]
    hours, failing = activity.result(timeout=60)
    return {
        "now": now, "by_status": by_status,
        "by_queue": dict(sorted(by_queue.items())), "chart": chart(hours), "hours": hours,
        "due": due, "due_exact": due < DUE_COUNT_CAP,
        "oldest_due": earliest if earliest and earliest <= now else None,
        "next_due": earliest if earliest and earliest > now else None,
        "tick": tick_health(q, now, expected_interval),
        "next_slot": next_slot(q, now),
        "failing": failing, "alerts": [alert_row(j) for j in alerts],
        "paused": paused, "limits": sorted(store.limits().items()),
    }  # fmt: skip


def _activity(store: SqlStore, now: datetime) -> tuple[list[dict[str, Any]], list[Any]]:
    return browse.hourly(store, now), browse.failing_types(store, now - timedelta(hours=24))


@cache
def _helper() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=2, thread_name_prefix="tickq-dashboard")


def tick_health(q: Queue, now: datetime, expected_interval: timedelta) -> dict[str, Any]:
    """When the scheduler last called; stale after twice ``expected_interval``. Read only:
    unlike ``q.health()`` it raises no alert."""
    last, ticks, _ = q._store.last_tick()
    if last is None:
        return {"status": "no_tick_yet", "ok": False, "last": None, "ticks": ticks}
    stale = now - last > expected_interval * 2
    return {"status": "stale" if stale else "ok", "ok": not stale, "last": last, "ticks": ticks}


def next_slot(q: Queue, now: datetime) -> dict[str, Any] | None:
    rows = schedules(q, now)
    upcoming = [r for r in rows if r["next"] is not None]
    return min(upcoming, key=lambda r: r["next"]) if upcoming else None


def schedules(q: Queue, now: datetime) -> list[dict[str, Any]]:
    """Each declared schedule with its stored cursor; stored ones no longer declared too."""
    states = {s["name"]: s for s in q._store.schedule_states()}
    rows = []
    for name, definition in sorted(q._schedules.items()):
        state = states.pop(name, None)
        after = state["handled_until"] if state else now
        upcoming = definition.next_slot(after)
        rows.append({
            "name": name, "job": definition.job,
            "expression": definition.cron or f"every {definition.every}",
            "tz": definition.tz if definition.cron else "UTC", "declared": True,
            "last": state["last_slot"] if state else None, "next": upcoming,
            "overdue": upcoming < now,
        })  # fmt: skip
    for name, state in sorted(states.items()):
        rows.append({"name": name, "job": None, "expression": None, "tz": None,
                     "declared": False, "last": state["last_slot"], "next": None,
                     "overdue": False})  # fmt: skip
    return rows


def alert_row(job: Job) -> dict[str, Any]:
    alert = job.payload.get("alert") if isinstance(job.payload, dict) else None
    title = alert.get("title") if isinstance(alert, dict) else None
    return {
        "job": job, "title": str(title or "(untitled alert)"),
        "sink": str(job.payload.get("sink", "")), "at": job.finished_at or job.created_at,
    }  # fmt: skip


def jobs(q: Queue, query: dict[str, str]) -> dict[str, Any]:
    """A page of jobs for the filters in ``query``, or the jobs a search finds."""
    filters = {k: query[k] for k in ("status", "type", "queue") if query.get(k)}
    for name in ("type", "queue", "q"):
        if "\x00" in query.get(name, ""):
            raise ValueError(
                f"{name} contains a NUL character, which no job's type, queue or unique key "
                "can hold: remove it"
            )
    if filters.get("status") not in (None, *STATUSES):
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {filters['status']!r}")
    search = query.get("q", "").strip()
    if search:
        return {"filters": filters, "search": search, "jobs": find(q, search), "more": False,
                "before": None}  # fmt: skip
    before = _positive_int(query.get("before"), "before")
    found, more = browse.list_page(q._store, before_id=before, limit=PAGE, **filters)
    return {"filters": filters, "search": "", "jobs": found, "more": more, "before": before,
            "next_before": found[-1].id if more else None}  # fmt: skip


def find(q: Queue, text: str) -> list[Job]:
    """The job with this id (``123`` or ``#123``), then jobs holding it as unique key."""
    found = []
    digits = text.removeprefix("#")
    if digits.isdigit() and len(digits) < 19:
        job = q.get_job(int(digits))
        found += [job] if job else []
    return found + browse.by_unique_key(q._store, text)


def _positive_int(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or len(value) > 18:
        raise ValueError(f"{name} must be a job id (a positive whole number), got {value!r}")
    return int(value)


def job_detail(q: Queue, job_id: int) -> dict[str, Any] | None:
    job = q.get_job(job_id)
    if job is None:
        return None
    attempts = [
        {"a": a, "error_type": et, "message": msg, "traceback": tb}
        for a in q.attempts(job_id)
        for et, msg, tb in [split_error(a.error)]
    ]
    return {
        "job": job, "attempts": attempts, "timeline": timeline(job, attempts),
        "payload": pretty(job.payload), "meta": pretty(job.meta) if job.meta else None,
        "attempts_note": attempts_note(q, job),
    }  # fmt: skip


def attempts_note(q: Queue, job: Job) -> str | None:
    """Why a job may make more attempts than its type allows ("3 of 4"), or None."""
    definition = q._definition(job.type)
    if definition is None or job.max_attempts <= definition.max_attempts:
        return None
    return (
        f"{job.type} allows {definition.max_attempts} attempts; a retry by hand (Retry here, "
        "tickq retry or q.retry) lets a job that used them all make one more"
    )


def timeline(job: Job, attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dated events of a job's life, oldest first."""
    events = [{"at": job.created_at, "what": "enqueued", "kind": "pending"}]
    for row in attempts:
        a = row["a"]
        if a.started_at:
            events.append({"at": a.started_at, "what": f"attempt {a.attempt} started",
                           "kind": "running"})  # fmt: skip
        if a.finished_at:
            events.append({"at": a.finished_at, "what": f"attempt {a.attempt}: {a.outcome}",
                           "kind": EVENT_KINDS.get(a.outcome, "failed")})  # fmt: skip
    if job.status == JobState.PENDING and (job.attempts or job.snoozes):
        events.append({"at": job.run_after, "what": "next attempt due", "kind": "pending"})
    elif job.status in (JobState.FAILED, JobState.CANCELLED) and job.finished_at:
        events.append({"at": job.finished_at, "what": job.status.value, "kind": "failed"})
    return sorted(events, key=lambda e: e["at"])


EVENT_KINDS = {"done": "done", "snoozed": "pending", "refunded": "pending", "released": "pending"}
"""How the timeline marks an attempt's end (any other outcome is a failure); a snooze is a
wait the job asked for, a refund a run its process never confirmed, a release a run cut
short by its worker's shutdown (neither counted)."""


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def chart(hours: list[dict[str, Any]]) -> dict[str, Any]:
    """Bar geometry for the 24-hour SVG chart: done and failed side by side per hour."""
    width, height, top, bottom = CHART["width"], CHART["height"], CHART["top"], CHART["bottom"]
    peak = max([h["done"] for h in hours] + [h["failed"] for h in hours] + [1])
    slot = width / max(len(hours), 1)
    plot = height - top - bottom
    bars = []
    for i, h in enumerate(hours):
        for j, kind in enumerate(("done", "failed")):
            size = plot * h[kind] / peak
            bars.append({
                "x": round(i * slot + 2 + j * (slot - 4) / 2, 1), "w": round((slot - 4) / 2, 1),
                "y": round(top + plot - size, 1), "h": round(size, 1), "kind": kind,
                "count": h[kind], "hour": h["hour"],
            })  # fmt: skip
    labels = [{"x": round(i * slot + slot / 2, 1), "text": h["hour"].strftime("%H")}
              for i, h in enumerate(hours) if i % 3 == 0]  # fmt: skip
    return {"width": width, "height": height, "bars": bars, "labels": labels, "peak": peak,
            "base": height - bottom}  # fmt: skip


WORKFLOW_STATUSES = ["running", "waiting", "done", "failed", "cancelled"]


def workflows(q: Queue, query: dict[str, str]) -> dict[str, Any]:
    """One page of workflow runs, newest first, filtered by status and workflow."""
    status = query.get("status") or None
    if status is not None and status not in WORKFLOW_STATUSES:
        raise ValueError(f"status must be one of {', '.join(WORKFLOW_STATUSES)}, got {status!r}")
    workflow = query.get("workflow") or None
    before = query.get("before", "")
    before_id = int(before) if before.isdigit() and len(before) < 19 else None
    runs = q.workflow_runs(status=status, workflow=workflow, limit=PAGE + 1, before_id=before_id)
    filters = {k: v for k, v in (("status", status), ("workflow", workflow)) if v}
    return {
        "runs": runs[:PAGE], "more": len(runs) > PAGE, "filters": filters,
        "next_before": runs[PAGE - 1].id if len(runs) > PAGE else None, "before": before_id,
        "counts": q._store.stats_workflow_runs(),
    }  # fmt: skip


def workflow_detail(q: Queue, run_id: int) -> dict[str, Any] | None:
    """A run and the timeline of its steps: each job's attempts and error, each sleep's
    and wait's time."""
    run = q._store.workflow_run(run_id)
    if run is None:
        return None
    steps = [
        {"s": step, "error_type": et, "message": msg, "result": _short_json(step.result)}
        for step in run.steps
        for et, msg, _ in [split_error(step.error)]
    ]
    kind, message, trace = split_error(run.error)
    return {"run": run, "steps": steps, "payload": pretty(run.payload),
            "result": pretty(run.result) if run.result is not None else None,
            "error_type": kind, "message": message, "traceback": trace}  # fmt: skip


def _short_json(value: Any) -> str:
    if value is None:
        return ""
    text = json.dumps(value, default=str)
    return text if len(text) <= 120 else text[:117] + "..."
