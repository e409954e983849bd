"""``tickq jobs | show | retry | cancel | prune | stats``: look at jobs and act on them.

Each reads APP (module:attribute) or ``--url`` (or $TICKQ_APP / $TICKQ_DATABASE_URL),
prints a table for people or JSON with ``--json``, and turns user errors (a missing job,
retrying a done one) into one line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..errors import ConfigurationError
from ..job import Attempt, Job, JobState
from ..queue import Queue
from .app import load_app
from .names import check_queue, check_type
from .tables import Progress, age, first_line, parse_duration, table, when

STATUSES = [s.value for s in JobState]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    jobs = _command(subparsers, "jobs", "list jobs, newest first", run_jobs)
    jobs.add_argument("--status", choices=STATUSES, help="only jobs in this status")
    jobs.add_argument("--type", help="only jobs of this type")
    jobs.add_argument("--queue", help="only jobs in this queue")
    jobs.add_argument("--limit", type=int, default=50, help="jobs per page (default 50)")
    jobs.add_argument("--before", type=int, metavar="ID", help="the page after job ID")

    _command(subparsers, "show", "show one job: payload and every attempt", run_show, "ID")

    retry = _command(subparsers, "retry", "put failed or cancelled jobs back to pending",
                     run_retry, "ID", id_required=False)  # fmt: skip
    retry.add_argument("--failed", action="store_true", help="retry every failed job")
    retry.add_argument("--type", help="with --failed: only jobs of this type")
    retry.add_argument("--batch", type=int, default=500, help="jobs per transaction")

    _command(subparsers, "cancel", "cancel a pending or running job", run_cancel, "ID")

    prune = _command(subparsers, "prune", "delete finished jobs (done, failed, cancelled)",
                     run_prune)  # fmt: skip
    prune.add_argument("--older-than", default="7d", metavar="AGE",
                       help="finished longer ago than this, e.g. 7d, 12h (default 7d)")  # fmt: skip
    prune.add_argument("--batch", type=int, default=5000, help="jobs per transaction")

    _command(subparsers, "stats", "counts by status and type, backlog, recent failures",
             run_stats)  # fmt: skip


def _command(
    subparsers: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    help_text: str,
    handler: Any,
    id_metavar: str | None = None,
    id_required: bool = True,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    metavar = f"[APP] {id_metavar}" if id_metavar else "APP"
    parser.add_argument("targets", nargs="*", metavar=metavar,
                        help="APP is module:attribute naming your Queue (default: $TICKQ_APP)"
                        + (f"; {id_metavar} is a job id" if id_metavar else ""))  # fmt: skip
    parser.add_argument("--url", help="database URL instead of APP (or $TICKQ_DATABASE_URL)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.set_defaults(handler=handler, id_metavar=id_metavar, id_required=id_required)
    return parser


def resolve(args: argparse.Namespace) -> tuple[Queue, int | None]:
    """The Queue (from APP, --url or the environment) and the job id, if any."""
    app, job_id = None, None
    for value in args.targets:
        if ":" in value and app is None:
            app = value
        elif args.id_metavar and value.isdigit() and job_id is None:
            job_id = int(value)
        else:
            expected = "APP (module:attribute)" + (" or a job ID" if args.id_metavar else "")
            raise ConfigurationError(f"unexpected argument {value!r}: expected {expected}")
    if job_id is None and args.id_metavar and args.id_required:
        raise ConfigurationError(f"give the job's {args.id_metavar}, e.g. tickq {args.command} 42")
    return open_queue(app, args.url), job_id


def open_queue(app: str | None, url: str | None) -> Queue:
    if url or (not app and not os.environ.get("TICKQ_APP")):
        url = url or os.environ.get("TICKQ_DATABASE_URL")
        if not url:
            raise ConfigurationError(
                "no database given: pass APP (module:attribute) or set TICKQ_APP, or give "
                "the database with --url or TICKQ_DATABASE_URL"
            )
        return Queue(url, strict=False)
    return load_app(app or os.environ.get("TICKQ_APP"))


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


# -- jobs and show -------------------------------------------------------------------------
def run_jobs(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise ConfigurationError(f"--limit must be >= 1, got {args.limit}")
    q, _ = resolve(args)
    jobs = q.list_jobs(args.status, args.type, args.queue, args.limit, args.before)
    if not jobs:
        check_type(q, args.type)
        check_queue(q, args.queue)
    more = jobs[-1].id if len(jobs) == args.limit else None
    if args.json:
        _print_json({"jobs": [j.to_dict() for j in jobs], "next_before": more})
        return 0
    if not jobs:
        print("no jobs match")
        return 0
    rows = [
        (j.id, j.status.value, j.type, j.queue, f"{j.attempts}/{j.max_attempts}",
         when(j.finished_at or j.run_after),
         "" if j.status == JobState.DONE else first_line(j.last_error))
        for j in jobs
    ]  # fmt: skip
    print(table(["ID", "STATUS", "TYPE", "QUEUE", "TRIES", "DUE/FINISHED (UTC)", "LAST ERROR"],
                rows))  # fmt: skip
    if more:
        print(f"\nmore: tickq jobs --before {more}" + _filters(args))
    return 0


def _filters(args: argparse.Namespace) -> str:
    parts = [f"--{k} {getattr(args, k)}" for k in ("status", "type", "queue") if getattr(args, k)]
    return "".join(f" {p}" for p in parts)


def run_show(args: argparse.Namespace) -> int:
    q, job_id = resolve(args)
    job = _get(q, job_id)
    attempts = q.attempts(job.id)
    if args.json:
        _print_json({"job": job.to_dict(), "attempts": [a.to_dict() for a in attempts]})
        return 0
    print(describe(job))
    for a in attempts:
        print(describe_attempt(a))
    if not attempts:
        print("\nno attempts yet")
    return 0


def _get(q: Queue, job_id: int | None) -> Job:
    from ..errors import JobNotFound

    job = q.get_job(job_id) if job_id is not None else None
    if job is None:
        raise JobNotFound(f"job {job_id} does not exist (wrong id, or pruned); "
                          "list jobs with: tickq jobs")  # fmt: skip
    return job


def describe(job: Job) -> str:
    fields = [
        ("status", job.status.value), ("queue", f"{job.queue} (priority {job.priority})"),
        ("attempts", f"{job.attempts} of {job.max_attempts}"
         + (f", snoozed {job.snoozes} time(s)" if job.snoozes else "")),
        ("created", f"{when(job.created_at)} UTC"), ("run after", f"{when(job.run_after)} UTC"),
        ("finished", f"{when(job.finished_at)} UTC" if job.finished_at else "-"),
        ("unique key", job.unique_key or "-"),
        ("lease", f"{job.lease_owner} until {when(job.lease_expires_at)} UTC"
         if job.lease_owner else "-"),
    ]  # fmt: skip
    if job.cancel_requested_at:
        fields.append(("cancel", f"requested {when(job.cancel_requested_at)} UTC"))
    lines = [f"job {job.id}  {job.type}"]
    lines += [f"  {name:<11}{value}" for name, value in fields]
    payload = json.dumps(job.payload, indent=2, sort_keys=True).replace("\n", "\n    ")
    lines += ["  payload", f"    {payload}"]
    if job.meta:
        lines.append(f"  meta       {json.dumps(job.meta, sort_keys=True)}")
    return "\n".join(lines)


def describe_attempt(a: Attempt) -> str:
    took = f" ({age(a.duration)})" if a.duration is not None else ""
    end = when(a.finished_at) if a.finished_at else "still running"
    lines = [f"\nattempt {a.attempt}  {a.outcome}  {when(a.started_at)} -> {end}{took}"]
    if a.error:
        lines += [f"  {line}" for line in a.error.rstrip().splitlines()]
    return "\n".join(lines)


# -- retry, cancel, prune -----------------------------------------------------------------
def run_retry(args: argparse.Namespace) -> int:
    q, job_id = resolve(args)
    if args.failed == (job_id is not None):
        raise ConfigurationError("give either a job ID or --failed (with optional --type T)")
    if args.type and not args.failed:
        raise ConfigurationError("--type works with --failed only")
    if job_id is not None:
        job = q.retry(job_id)
        _report(args, job.to_dict(), f"job {job.id} ({job.type}) is pending again, due now; "
                f"attempt {job.attempts + 1} of {job.max_attempts} comes next")  # fmt: skip
        return 0
    check_type(q, args.type)
    progress = Progress("retried", enabled=not args.json)
    retried = q.retry_failed(args.type, batch=args.batch, progress=progress)
    progress.finish()
    left = q._store.count_failed(args.type)
    of_type = f" of type {args.type!r}" if args.type else ""
    text = f"retried {retried} failed job{'s' * (retried != 1)}{of_type}"
    if left:
        text += f"; {left} left failed (an active job holds their unique_key)"
    _report(args, {"retried": retried, "left_failed": left}, text)
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    q, job_id = resolve(args)
    job = q.cancel(_get(q, job_id).id)
    text = f"job {job.id} ({job.type}) cancelled"
    if job.status == JobState.RUNNING:
        text = (f"job {job.id} ({job.type}) is running attempt {job.attempts} on "
                f"{job.lease_owner}: asked it to stop; it ends cancelled once its worker "
                "hears (within about a second)")  # fmt: skip
    _report(args, job.to_dict(), text)
    return 0


def run_prune(args: argparse.Namespace) -> int:
    older_than = parse_duration(args.older_than, "--older-than")
    if args.batch < 1:
        raise ConfigurationError(f"--batch must be >= 1, got {args.batch}")
    q, _ = resolve(args)
    progress = Progress("deleted", enabled=not args.json)
    deleted = q._store.prune(older_than, batch=args.batch, progress=progress)
    progress.finish()
    text = (f"deleted {deleted} finished job{'s' * (deleted != 1)} (and their attempts) "
            f"that finished more than {age(older_than.total_seconds())} ago")  # fmt: skip
    _report(args, {"deleted": deleted, "older_than_seconds": older_than.total_seconds()}, text)
    return 0


def _report(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    if args.json:
        _print_json(data)
    else:
        print(text)


# -- stats --------------------------------------------------------------------------------
def run_stats(args: argparse.Namespace) -> int:
    q, _ = resolve(args)
    stats = q.stats()
    if args.json:
        _print_json(stats)
        return 0
    print(render_stats(stats))
    return 0


def render_stats(stats: dict[str, Any]) -> str:
    rows = [(t, *(counts.get(s, 0) for s in STATUSES)) for t, counts in
            sorted(stats["by_type"].items())]  # fmt: skip
    rows.append(("(all)", *(stats["by_status"][s] for s in STATUSES)))
    queues = ", ".join(
        f"{name} ({', '.join(f'{k} {v}' for k, v in sorted(c.items()))})"
        for name, c in sorted(stats["by_queue"].items())
    )
    processed: dict[str, int] = {}
    for types in stats["processed"].values():
        for outcomes in types.values():
            for outcome, n in outcomes.items():
                processed[outcome] = processed.get(outcome, 0) + n
    lines = [
        table(["TYPE", *(s.upper() for s in STATUSES)], rows, stretch=0), "",
        f"queues: {queues or '-'}",
        f"due now: {stats['due']}; oldest due job waiting {age(stats['oldest_due_age_seconds'])}",
        f"failed in the last hour: {stats['failed_last_hour']} job(s), "
        f"{stats['failed_attempts_last_hour']} failed attempt(s)",
        "attempts so far: " + (", ".join(f"{k} {v}" for k, v in sorted(processed.items()))
                               or "none"),
        "paused queues: " + (", ".join(stats.get("paused_queues", ())) or "none"),
        "limited types: " + (", ".join(f"{t} ({_limit_text(v)})" for t, v in
                                       sorted(stats.get("limits", {}).items())) or "none"),
        "workflow runs: " + (", ".join(
            f"{name} ({', '.join(f'{k} {v}' for k, v in sorted(c.items()))})"
            for name, c in sorted(stats.get("workflow_runs", {}).items())) or "none"),
        *database_lines(stats.get("database", {})),
    ]  # fmt: skip
    return "\n".join(lines)


def database_lines(database: dict[str, Any]) -> list[str]:
    """SQLite's write-ahead log and free space; Postgres's long-open transactions."""
    lines = []
    if "wal_bytes" in database:
        free = database.get("disk_free_bytes")
        lines.append(f"write-ahead log: {_mb(database['wal_bytes'])} (truncated past "
                     f"{_mb(database['wal_bound_bytes'])}); disk free: "
                     f"{'unknown' if free is None else _mb(free)}")  # fmt: skip
    for t in database.get("long_transactions", ()):
        lines.append(f"transaction open {t['age_seconds']:.0f}s: pid {t['pid']} "
                     f"({t['application_name'] or 'no application_name'}, {t['state']})"
                     + ("; it holds back vacuum and slows every tick"
                        if t.get("holds_snapshot", True) else "; no snapshot held"))  # fmt: skip
    return lines


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _limit_text(limit: dict[str, Any]) -> str:
    parts = [f"concurrency {limit['concurrency']}"] if limit.get("concurrency") else []
    parts += [f"rate {limit['rate_limit']}"] if limit.get("rate_limit") else []
    return ", ".join(parts) + (" per key" if limit.get("per_key") else "")
