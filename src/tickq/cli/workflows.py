"""``tickq workflows``: list workflow runs, or show one run's steps in execution order."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigurationError
from .inspection import _command, _print_json, resolve
from .tables import first_line, table, when

RUN_STATUSES = ["running", "waiting", "done", "failed", "cancelled"]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    runs = _command(subparsers, "workflows", "list workflow runs, newest first; with an ID, "
                    "one run's steps", run_workflows, "ID", id_required=False)  # fmt: skip
    runs.add_argument("--status", choices=RUN_STATUSES, help="only runs in this status")
    runs.add_argument("--workflow", help="only runs of this workflow")
    runs.add_argument("--limit", type=int, default=50, help="runs per page (default 50)")
    runs.add_argument("--before", type=int, metavar="ID", help="the page after run ID")


def run_workflows(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise ConfigurationError(f"--limit must be >= 1, got {args.limit}")
    q, run_id = resolve(args)
    if run_id is not None:
        return _show(q.workflow_run(run_id), args.json)
    found = q.workflow_runs(status=args.status, workflow=args.workflow, limit=args.limit,
                            before_id=args.before)  # fmt: skip
    more = found[-1].id if len(found) == args.limit else None
    if args.json:
        _print_json({"runs": [r.to_dict() for r in found], "next_before": more})
        return 0
    if not found:
        print("no workflow runs match")
        return 0
    rows = [(r.id, r.status, r.workflow, when(r.created_at), when(r.finished_at),
             first_line(r.error)) for r in found]  # fmt: skip
    print(table(["ID", "STATUS", "WORKFLOW", "STARTED (UTC)", "FINISHED (UTC)", "ERROR"], rows))
    if more:
        print(f"\nmore: tickq workflows --before {more}")
    return 0


def _show(run: Any, as_json: bool) -> int:
    if as_json:
        _print_json(run.to_dict())
        return 0
    print(f"run {run.id} {run.workflow}: {run.status}")
    if run.error:
        print(f"error: {first_line(run.error)}")
    rows = [(s.seq, s.kind, s.name, s.status, s.job_id or "-", s.attempts,
             when(s.wake_at) if s.wake_at else "-", first_line(s.error))
            for s in run.steps]  # fmt: skip
    print(table(["#", "KIND", "NAME", "STATUS", "JOB", "TRIES", "WAKE AT (UTC)", "ERROR"], rows))
    return 0
