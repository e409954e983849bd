"""An app whose only work is a schedule, for ``tickq worker`` without any tick."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from tickq import JobContext, Queue

q = Queue()


@q.schedule(every=timedelta(seconds=1))
def heartbeat(ctx: JobContext) -> None:
    with open(Path(os.environ["TICKQ_TEST_RUNS"]) / f"slots-{os.getpid()}.txt", "a") as f:
        f.write(f"{ctx.meta['slot']}\n")
