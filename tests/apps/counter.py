"""A tiny app for process tests: each job appends its number to a per-process file."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from tickq import JobContext, Queue

OUT = Path(os.environ.get("TICKQ_TEST_OUT", "."))
q = Queue(os.environ.get("TICKQ_DATABASE_URL"), lease_seconds=float(os.environ.get("LEASE", 60)))
_lock = threading.Lock()


@q.job(max_attempts=5, backoff=(0,))
def record(n: int) -> None:
    line = f"{n}\n"
    with _lock, open(OUT / f"executions-{os.getpid()}.txt", "a") as f:
        f.write(line)


@q.job(max_attempts=3, backoff=(0,))
def hang(ctx: JobContext) -> None:
    """Announce that attempt N started, then block forever on the first attempt."""
    (OUT / f"started-{ctx.attempt}").write_text(str(os.getpid()))
    if ctx.attempt == 1:
        time.sleep(3600)
