"""Reads for people browsing jobs (the dashboard), and deleting one job by hand.

Additive to the store: the named queries live in ``sql/browse_<dialect>.sql`` and are
merged into the store's own on first use, so they run on its connection per thread. Pages
are keyset pages (``id < before``, newest first): never an ``OFFSET``, never an exact count
over the whole table.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..errors import InvalidTransition, JobNotFound
from ..job import Job, JobState
from .queries import JOB_COLUMNS, column_list, format_query, load_queries

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .base import SqlStore

OPEN_STATES = ("pending", "running", "failed", "cancelled")
SQLITE_STATUS_INDEX = {
    "pending": ("tickq_jobs_due", None),
    "running": ("tickq_jobs_lease", None),
    "failed": ("tickq_jobs_stopped", "status IN ('failed', 'cancelled')"),
    "cancelled": ("tickq_jobs_stopped", "status IN ('failed', 'cancelled')"),
}
"""SQLite: a page of jobs of one open status alone (a type or queue has an index of its
own) takes its ids from that status's partial index (sorting what it holds, newest first)
and reads only their rows, rather than walking the table newest first until a page
matched, as the planner does when few or none match or when ANALYZE left an empty index
no statistics. The second part repeats the index's predicate where SQLite cannot see
that the status implies it."""


def _ready(store: SqlStore) -> SqlStore:
    if "browse_active_counts" not in store._sql:
        store._sql.update(load_queries(f"browse_{store.dialect}", store.paramstyle, store._sql))
    return store


def list_page(
    store: SqlStore,
    status: str | None = None,
    type: str | None = None,
    queue: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> tuple[list[Job], bool]:
    """One page of jobs newest first, and whether older ones follow.

    Only the filters given appear in the statement, so each combination gets the plan that
    fits it (a status is a literal, checked against ``JobState``, so Postgres can use the
    partial index of open jobs).
    """
    if status is not None:
        status = JobState(status).value
    name = _list_query(_ready(store), status, type is not None, queue is not None,
                       before_id is not None)  # fmt: skip
    rows = store._query(name, type=type, queue=queue, before_id=before_id, limit=limit + 1)
    jobs = [store._job(r) for r in rows[:limit]]
    return jobs, len(rows) > limit


def _list_query(store: SqlStore, status: str | None, type: bool, queue: bool,
                before: bool) -> str:  # fmt: skip
    name = f"browse_list:{status}:{type:d}{queue:d}{before:d}"
    if name not in store._sql:
        where = [f"status = '{status}'"] if status else []
        where += ["type = :type"] if type else []
        where += ["queue = :queue"] if queue else []
        where += ["id < :before_id"] if before else []
        sql = (
            f"SELECT {column_list(JOB_COLUMNS)} FROM tickq_jobs "
            f"{'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY id DESC LIMIT :limit"
        )
        if status in SQLITE_STATUS_INDEX and store.dialect == "sqlite" and not (type or queue):
            index, implied = SQLITE_STATUS_INDEX[status]
            where += [implied] if implied else []
            sql = (  # the page's ids from the index alone, then only their rows
                f"SELECT {column_list(JOB_COLUMNS)} FROM tickq_jobs WHERE id IN ("
                f"SELECT id FROM tickq_jobs INDEXED BY {index} WHERE {' AND '.join(where)} "
                "ORDER BY id DESC LIMIT :limit) ORDER BY id DESC"
            )
        store._sql[name] = format_query(sql, store.paramstyle)
    return name


def by_unique_key(store: SqlStore, key: str, limit: int = 50) -> list[Job]:
    """Jobs holding ``key`` as their unique key, newest first."""
    rows = _ready(store)._query("browse_by_unique_key", key=key, limit=limit)
    return [store._job(r) for r in rows]


def open_counts(store: SqlStore, which: str = "both") -> list[tuple[str, str, str, int]]:
    """(status, queue, type, count) of jobs not done: ``active`` (pending, running),
    ``stopped`` (failed, cancelled) or both."""
    names = ["browse_active_counts", "browse_stopped_counts"]
    names = names if which == "both" else [f"browse_{which}_counts"]
    _ready(store)
    return [(s, q, t, int(n)) for name in names for s, q, t, n in store._query(name)]


def done_count(store: SqlStore) -> int:
    """Jobs done now, exact: from the counters the triggers keep (migration 24), reading
    no done row."""
    return int(_ready(store)._query("browse_count_done")[0][0])


def hourly(store: SqlStore, now: datetime, hours: int = 24) -> list[dict[str, Any]]:
    """Jobs done and attempts failed per hour (UTC), oldest first, ``hours`` buckets."""
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)
    slots = {start + timedelta(hours=i): {"done": 0, "failed": 0} for i in range(hours)}
    for kind, hour, count in _ready(store)._query("browse_hourly", since=store._ts(start)):
        at = _hour(hour)
        if at in slots:
            slots[at][kind] += int(count)
    return [{"hour": at, **counts} for at, counts in slots.items()]


def _hour(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite: '2026-01-02T03'
        return datetime.fromisoformat(f"{value}:00:00+00:00")
    return value  # type: ignore[no-any-return]


def failing_types(store: SqlStore, since: datetime, limit: int = 10) -> list[dict[str, Any]]:
    """Types with failed attempts since ``since``: attempts, jobs, last failure and error."""
    rows = _ready(store)._query("browse_failing_types", since=store._ts(since), limit=limit)
    ids = [int(r[4]) for r in rows if r[4] is not None]
    errors: dict[Any, Any] = {}
    if ids:
        errors = dict(store._query("browse_last_errors", ids=store._ids_param(ids)))
    return [
        {"type": t, "attempts": int(n), "jobs": int(j), "last_at": store._decode_ts(at),
         "last_job": last, "last_error": errors.get(last)}
        for t, n, j, at, last in rows
    ]  # fmt: skip


def delete(store: SqlStore, job_id: int) -> None:
    """Delete one finished job and its attempts (its totals are kept, as prune keeps them)."""
    _ready(store)
    if store.dialect == "sqlite":
        deleted = store._retire("browse_finished", {"id": job_id})  # type: ignore[attr-defined]
    else:
        deleted = len(store._query("browse_delete", id=job_id))
    if deleted:
        return
    job = store.get(job_id)
    if job is None:
        raise JobNotFound(f"job {job_id} does not exist (it may have been pruned)")
    raise InvalidTransition(
        f"cannot delete job {job_id}: it is {job.status.value}; only done, failed or "
        "cancelled jobs can be deleted (cancel it first)"
    )
