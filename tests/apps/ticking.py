"""A tiny app with schedules for process tests; ``TICKQ_TEST_NOW`` freezes its clock."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from tickq import FrozenClock, JobContext, Queue

OUT = Path(os.environ.get("TICKQ_TEST_OUT", "."))
NOW = os.environ.get("TICKQ_TEST_NOW")
q = Queue(clock=FrozenClock(datetime.fromisoformat(NOW)) if NOW else None)


def record(ctx: JobContext) -> None:
    with open(OUT / f"executions-{os.getpid()}.txt", "a") as f:
        f.write(f"{ctx.meta['schedule']} {ctx.meta['slot']}\n")


@q.schedule("*/15 * * * *")
def quarter(ctx: JobContext) -> None:
    record(ctx)


@q.schedule("0 9 * * *", tz="Europe/London")  # 09:00 London is 08:00 UTC in May
@q.schedule("0 9 * * *", name="daily")
@q.job()
def daily_digest(ctx: JobContext) -> None:
    record(ctx)


@q.job(max_attempts=1)
def explode() -> None:
    raise RuntimeError("boom")


if os.environ.get("TICKQ_TEST_EXPLODE"):
    explode.enqueue()
