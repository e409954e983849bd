"""An app whose processes read a clock the test steps: ``tickq worker apps.clock_app:q``
(the small-disk tests use it too: ``carry`` jobs take room on the disk).

Set by the environment: ``TICKQ_DATABASE_URL``; ``TICKQ_TEST_CLOCK`` (a ``SharedClock``
file: real time plus the offset the test writes there, so one process's clock can run
ahead of another's or step while it runs); ``TICKQ_TEST_LEASE`` (lease seconds);
``TICKQ_TEST_RUNS`` (a folder where each run notes its start and end, with the real time);
``TICKQ_TEST_EVERY`` (seconds: a schedule ``beat`` fires that often, each slot noting when
it really ran).
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from tickq import JobContext, Queue
from tickq.testing import SharedClock

q = Queue(lease_seconds=float(os.environ.get("TICKQ_TEST_LEASE", "60")))
if os.environ.get("TICKQ_TEST_CLOCK"):
    q.clock = SharedClock(os.environ["TICKQ_TEST_CLOCK"])


def note(event: str, ctx: JobContext, **more: Any) -> None:
    line = {"event": event, "id": ctx.id, "attempt": ctx.attempt, "pid": os.getpid(),
            "real": time.time(), **more}  # fmt: skip
    with open(Path(os.environ["TICKQ_TEST_RUNS"]) / f"{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


@q.job()
def work(ctx: JobContext, seconds: float = 0.0) -> None:
    note("start", ctx)
    time.sleep(seconds)
    note("end", ctx)


@q.job()
def carry(ctx: JobContext, blob: str) -> None:
    """A job whose payload takes room on the disk (``blob``)."""
    note("start", ctx)
    note("end", ctx)


if os.environ.get("TICKQ_TEST_EVERY"):

    @q.schedule(every=timedelta(seconds=float(os.environ["TICKQ_TEST_EVERY"])))
    def beat(ctx: JobContext) -> None:
        note("slot", ctx, slot=ctx.meta["slot"])
