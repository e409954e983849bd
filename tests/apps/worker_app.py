"""A tickq app for the worker tests: ``python -m tickq worker apps.worker_app:q``.

Set by the environment: ``TICKQ_DATABASE_URL``; ``TICKQ_TEST_LEASE`` (lease seconds);
``TICKQ_TEST_RUNS`` (a folder where each job notes its start and end, one file per
process); ``TICKQ_TEST_STALL_AFTER`` (after this many starts, this process's next ``work``
job hangs, so a test can kill the process while it surely holds a job). ``die`` kills its
own worker process with SIGKILL every time it runs. ``fail_once`` fails its first attempt
(once the file ``gate`` exists, when given) and is retried 1 s later.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

from tickq import Cancel, JobContext, Queue, Snooze

q = Queue(lease_seconds=float(os.environ.get("TICKQ_TEST_LEASE", "60")))

_started = Counter[str]()
_met = Counter[str]()
_lock = threading.Lock()


def note(event: str, ctx: JobContext) -> None:
    folder = os.environ.get("TICKQ_TEST_RUNS")
    if not folder:
        return
    line = {"event": event, "id": ctx.id, "attempt": ctx.attempt, "pid": os.getpid(),
            "thread": threading.get_ident(), "at": time.time()}  # fmt: skip
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


def _should_stall() -> bool:
    limit = os.environ.get("TICKQ_TEST_STALL_AFTER")
    with _lock:
        _started["work"] += 1
        return limit is not None and _started["work"] == int(limit) + 1


@q.job()
def work(ctx: JobContext, seconds: float = 0.0) -> None:
    note("start", ctx)
    if _should_stall():
        note("stall", ctx)
        time.sleep(3600)
    time.sleep(seconds)
    note("end", ctx)


@q.job(backoff=(1,), max_attempts=2)
def fail_once(ctx: JobContext, gate: str = "") -> None:
    note("start", ctx)
    if ctx.attempt == 1:
        deadline = time.monotonic() + 60
        while gate and not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
        raise RuntimeError("the first attempt fails")
    note("end", ctx)


@q.job()
async def awork(ctx: JobContext, seconds: float = 0.0) -> None:
    note("start", ctx)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        note("cancelled", ctx)
        raise
    note("end", ctx)


def _arrive(key: str) -> None:
    with _lock:
        _met[key] += 1


def _all_here(key: str, parties: int, deadline: float) -> bool:
    if time.monotonic() > deadline:
        raise TimeoutError(f"only {_met[key]} of {parties} jobs ran at the same time")
    return _met[key] >= parties


@q.job()
def meet_sync(ctx: JobContext, key: str, parties: int) -> None:
    """Finishes only if ``parties`` meet_* jobs are running at the same time."""
    note("start", ctx)
    _arrive(key)
    deadline = time.monotonic() + 20
    while not _all_here(key, parties, deadline):
        time.sleep(0.01)
    note("end", ctx)


@q.job()
async def meet_async(ctx: JobContext, key: str, parties: int) -> None:
    note("start", ctx)
    _arrive(key)
    deadline = time.monotonic() + 20
    while not _all_here(key, parties, deadline):
        await asyncio.sleep(0.01)
    note("end", ctx)


@q.job(timeout=0.5, max_attempts=1)
def hang_sync(ctx: JobContext) -> None:
    note("start", ctx)
    time.sleep(30)
    note("end", ctx)


@q.job(timeout=0.5, max_attempts=1)
async def hang_async(ctx: JobContext) -> None:
    note("start", ctx)
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        note("cancelled", ctx)
        raise


@q.job()
def patient(ctx: JobContext, seconds: float = 60.0) -> None:
    """Works in small steps, stopping (``Cancel``) once asked to."""
    note("start", ctx)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ctx.cancel_requested:
            note("cancel_seen", ctx)
            raise Cancel("stopped on request")
        time.sleep(0.02)
    note("end", ctx)


@q.job(max_attempts=1)
def die(ctx: JobContext) -> None:
    """kill -9 of the worker running it, every time."""
    note("start", ctx)
    os.kill(os.getpid(), signal.SIGKILL)


@q.job(max_attempts=1)
def doze(ctx: JobContext, times: int, seconds: float) -> int:
    """Snoozes ``times`` times for ``seconds``, then returns how often it snoozed."""
    note("start", ctx)
    if ctx.snoozes < times:
        note("snooze", ctx)
        raise Snooze(seconds)
    note("end", ctx)
    return ctx.snoozes
