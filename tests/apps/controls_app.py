"""A tickq app for the queue-controls tests: ``python -m tickq worker apps.controls_app:q``.

Set by the environment: ``TICKQ_DATABASE_URL``; ``TICKQ_TEST_LEASE`` (lease seconds);
``TICKQ_TEST_RUNS`` (a folder where each job notes its start and end with the wall-clock
time, one file per process).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from tickq import JobContext, Queue

q = Queue(lease_seconds=float(os.environ.get("TICKQ_TEST_LEASE", "60")))


def note(event: str, ctx: JobContext, key: str | None = None) -> None:
    folder = os.environ["TICKQ_TEST_RUNS"]
    line = {"event": event, "id": ctx.id, "type": ctx.type, "attempt": ctx.attempt,
            "pid": os.getpid(), "thread": threading.get_ident(), "at": time.time(),
            "key": key}  # fmt: skip
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


@q.job(concurrency=2)
def capped(ctx: JobContext, seconds: float = 0.05) -> None:
    """At most two run at once, across every worker."""
    note("start", ctx)
    time.sleep(seconds)
    note("end", ctx)


@q.job(rate_limit="5/s")
def throttled(ctx: JobContext) -> None:
    """At most five start within any second."""
    note("start", ctx)
    note("end", ctx)


@q.job(concurrency=1)
def solo(ctx: JobContext, hang_first: bool = False) -> None:
    """One at a time; with ``hang_first`` its first attempt hangs (to be killed)."""
    note("start", ctx)
    if hang_first and ctx.attempt == 1:
        time.sleep(3600)
    note("end", ctx)


@q.job(queue="emails")
def email(ctx: JobContext, seconds: float = 0.01) -> None:
    note("start", ctx)
    time.sleep(seconds)
    note("end", ctx)


@q.job()
def chore(ctx: JobContext) -> None:
    note("start", ctx)
    note("end", ctx)


@q.job(concurrency=1, concurrency_key="account")
def per_account(
    ctx: JobContext, account: str, seconds: float = 0.05, hang_first: bool = False
) -> None:
    """One at a time per account, across every worker; with ``hang_first`` its first
    attempt hangs (to be killed)."""
    note("start", ctx, account)
    if hang_first and ctx.attempt == 1:
        time.sleep(3600)
    time.sleep(seconds)
    note("end", ctx, account)


@q.job(rate_limit="3/s", concurrency_key=lambda payload: f"acct-{payload['account']}")
def rated_per_account(ctx: JobContext, account: int) -> None:
    """At most three start within any second per account (the key computed by a function)."""
    note("start", ctx, str(account))
    note("end", ctx, str(account))


@q.job(concurrency=8)
def brisk(ctx: JobContext, seconds: float = 0.004) -> None:
    """Short, at most eight at once across every worker (started, or waiting in a worker's
    line): more than the slots of the tests' workers, so they claim these ahead of their
    free slots, within the room the limit leaves."""
    note("start", ctx)
    time.sleep(seconds)
    note("end", ctx)


@q.job(rate_limit="100/s")
def paced(ctx: JobContext, seconds: float = 0.004) -> None:
    """Short, at most a hundred start within any second: the workers' slots fill up before
    the window does, so they claim these ahead too."""
    note("start", ctx)
    time.sleep(seconds)
    note("end", ctx)
