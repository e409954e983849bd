"""The store's figures: counts, processed totals, the duration histogram, and the failure
windows the alert rules read. Reads only; no transition lives here."""

from __future__ import annotations

from datetime import timedelta

from ..controls import Limit
from ..job import JobState
from .plumbing import Plumbing
from .queries import DURATION_BUCKETS, bucket_label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime
    from typing import Any

    TotalsRow = tuple[str, str, str, str, int, float]


class StatsQueries(Plumbing):
    """What the queue holds and has done, as ``Queue.stats``, metrics and alerts read it."""

    def stats(self) -> dict[str, Any]:
        """Counts by status, queue and type; due backlog; recent failures; processed totals
        by outcome and the duration histogram (the figures ``tickq.metrics`` exports)."""
        now = self.now()
        by_status = {s.value: 0 for s in JobState}
        by_queue: dict[str, dict[str, int]] = {}
        by_type: dict[str, dict[str, int]] = {}
        for queue, status, type_, count in self._query("counts"):
            by_status[status] += count
            by_queue.setdefault(queue, {}).setdefault(status, 0)
            by_queue[queue][status] += count
            by_type.setdefault(type_, {}).setdefault(status, 0)
            by_type[type_][status] += count
        due, oldest = self._query("due_summary", now=self._ts(now))[0]
        oldest_ts = self._decode_ts(oldest)
        since = self._ts(now - timedelta(hours=1))
        processed, durations = summarise_totals(self.totals())
        return {
            "by_status": by_status, "by_queue": by_queue, "by_type": by_type,
            "due": due,
            "oldest_due_age_seconds": (now - oldest_ts).total_seconds() if oldest_ts else None,
            "failed_last_hour": self._query("failed_since", since=since)[0][0],
            "failed_attempts_last_hour": self._query("failed_attempts_since", since=since)[0][0],
            "processed": processed, "duration_seconds": durations,
            "paused_queues": sorted(r[0] for r in self._query("paused")),
            "limits": {t: {"concurrency": c, "rate_limit": Limit(c, r, p).rate_text,
                           "per_key": bool(k)}
                       for t, c, r, p, k in self._query("limits")},
            "workflow_runs": self.stats_workflow_runs(),
            "database": self.database_health(), "now": now.isoformat(),
        }  # fmt: skip

    def stats_workflow_runs(self) -> dict[str, dict[str, int]]:
        """Workflow runs by workflow, then status (``store.workflows``)."""
        counts: dict[str, dict[str, int]] = {}
        for workflow, status, count in self._query("wf_counts"):
            counts.setdefault(workflow, {})[status] = int(count)
        return counts

    def database_health(self) -> dict[str, Any]:
        """What the database itself is up to that slows or stops tickq: on SQLite the
        write-ahead log's size and the disk's free space; on Postgres transactions held
        open long (``long_transactions``)."""
        return {}

    watches_horizon = False
    """Whether ``long_transactions`` asks the database anything (Postgres: it does)."""

    def long_transactions(self) -> list[dict[str, Any]]:
        """Postgres: the transactions held open longer than a minute (see
        ``store.horizon``); elsewhere none, and no query."""
        return []

    def totals(self) -> list[TotalsRow]:
        """Finished attempts as (queue, type, outcome, le, attempts, seconds), one row per
        duration bucket (not cumulative): the live table plus what pruning rolled up."""
        merged: dict[tuple[str, str, str, str], list[float]] = {}
        for queue, type_, outcome, le, count, seconds in self._query("totals"):
            entry = merged.setdefault((queue, type_, outcome, le), [0, 0.0])
            entry[0] += int(count)
            entry[1] += float(seconds or 0)
        return [(*key, int(v[0]), v[1]) for key, v in sorted(merged.items())]

    def count_failed(self, job_type: str | None = None) -> int:
        """How many jobs are failed (of ``job_type``, when given)."""
        return int(self._query("count_failed", type=job_type)[0][0])

    def failure_summary(
        self, job_type: str, start: datetime, end: datetime, sample: int = 10
    ) -> dict[str, Any]:
        """Failures of ``job_type`` in [start, end): jobs that reached failed and failed
        attempts (``Retry`` on purpose excluded), with recent job ids and the latest error."""
        window = {"type": job_type, "start": self._ts(start), "end": self._ts(end)}
        failed_jobs = self._query("failed_in_window", **window)[0][0]
        attempts = self._query("failed_attempts_in_window", **window)[0][0]
        if failed_jobs:
            rows = self._query("failed_sample_in_window", limit=sample, **window)
        else:
            rows = self._query("failed_attempts_sample_in_window", limit=sample, **window)
        return {
            "failed_jobs": int(failed_jobs),
            "failed_attempts": int(attempts),
            "job_ids": list(dict.fromkeys(int(r[0]) for r in rows)),
            "last_error": rows[0][1] if rows else None,
        }

    def due_summary(self) -> tuple[int, datetime | None]:
        """(number of pending jobs due now, when the next pending job comes due)."""
        due = self._query("due_summary", now=self._now())[0][0]
        return int(due), self._decode_ts(self._query("next_due")[0][0])

    def queue_gauges(self) -> list[tuple[str, int, int]]:
        """(queue, jobs due now, jobs running) for each queue holding pending or running
        jobs: the OpenTelemetry gauges' reading."""
        return [(q, int(due), int(running))
                for q, due, running in self._query("queue_gauges", now=self._now())]  # fmt: skip


def summarise_totals(rows: Sequence[TotalsRow]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(processed[queue][type][outcome] = attempts, duration_seconds[queue][type] =
    {count, sum, buckets: {le: cumulative count}}) from ``totals()`` rows."""
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
