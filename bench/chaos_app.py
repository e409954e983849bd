"""The app every chaos-suite process loads, and the enqueuer the suite kills and restarts.

Workers (``tickq worker chaos_app:q``) and ticks (``tickq tick chaos_app:q``) import it
with the database URL in ``TICKQ_CHAOS_URL`` and a folder in ``TICKQ_CHAOS_DIR``. Each run
of the ``chaos`` job appends two lines to ``<folder>/runs.log`` with one ``os.write`` each
(O_APPEND, so lines from every process interleave whole and survive ``kill -9``)::

    S <n> <job id> <attempt> <pid> <time>    when the run starts
    E <n> <job id> <attempt> <pid> <time>    when it ends

so the suite counts runs per job without trusting tickq's own bookkeeping (the times are
the real clock's, whatever clock tickq is given).

With ``TICKQ_CHAOS_CLOCKS`` (a folder; SQLite runs), each worker and tick reads one of two
``SharedClock`` files there (by its pid), which the fault injector steps forward and back
by more than a lease: processes' clocks then stand minutes apart and jump while jobs run.
The enqueuer keeps the real clock.

``python chaos_app.py enqueue N SECONDS`` enqueues jobs 0..N-1 at an even pace over
SECONDS, each with the unique key ``chaos-<n>`` (a retried or restarted enqueue can't add a
second copy), and logs ``ok <time> <next n>`` / ``err <call start> <call end> <error>`` to
``<folder>/enqueue.log``; restarted, it carries on after the last ``ok``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from chaos_fleet import BATCH, resume_point

from tickq import JobContext, Queue
from tickq.testing import SharedClock

FOLDER = Path(os.environ.get("TICKQ_CHAOS_DIR", "."))
LEASE = float(os.environ.get("TICKQ_CHAOS_LEASE", "10"))
LONG_EVERY = 200
"""Every LONG_EVERY-th job outlives its lease: only lease renewal keeps it from a rerun."""

CLOCK_FILES = ("clock-a", "clock-b")
"""The clocks processes read when ``TICKQ_CHAOS_CLOCKS`` is set, one by each pid's parity."""

q = Queue(os.environ.get("TICKQ_CHAOS_URL"), lease_seconds=LEASE)
if os.environ.get("TICKQ_CHAOS_CLOCKS") and __name__ != "__main__":
    q.clock = SharedClock(Path(os.environ["TICKQ_CHAOS_CLOCKS"]) / CLOCK_FILES[os.getpid() % 2])
_fd: list[int] = []


def note(line: str, name: str = "runs.log") -> None:
    """Append one whole line to a log in the chaos folder (one write: atomic, unbuffered)."""
    if not _fd or _fd[0] != os.getpid():
        path = FOLDER / name
        _fd[:] = [os.getpid(), os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)]
    os.write(_fd[1], (line + "\n").encode())


@q.job(max_attempts=10)
def chaos(n: int, ms: int, ctx: JobContext) -> None:
    """Record the run, take ``ms`` milliseconds, record its end."""
    fields = f"{n} {ctx.id} {ctx.attempt} {os.getpid()}"
    note(f"S {fields} {time.time():.6f}")
    time.sleep(ms / 1000)
    note(f"E {fields} {time.time():.6f}")


def duration_ms(n: int) -> int:
    """How long job ``n`` takes: mostly 5-50 ms, and every LONG_EVERY-th past its lease."""
    if n % LONG_EVERY == LONG_EVERY - 1:
        return int(LEASE * 1300)
    return 5 + (n * 7919) % 46


def enqueue(total: int, seconds: float) -> None:
    """Enqueue jobs ``resume_point .. total-1`` in batches at an even pace."""
    log = FOLDER / "enqueue.log"
    pace = seconds / max(total, 1)
    started, first = time.monotonic(), resume_point(log)
    n = first
    while n < total:
        batch = range(n, min(n + BATCH, total))
        rows = [("chaos", {"n": i, "ms": duration_ms(i)},
                 {"unique_key": f"chaos-{i}", "unique_scope": "all"}) for i in batch]  # fmt: skip
        began = time.time()
        try:
            q.enqueue_many(rows)
        except Exception as exc:  # the suite counts these: the database was down or cut
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            error = f"{type(exc).__name__}: {first_line}"
            note(f"err {began:.6f} {time.time():.6f} {error}", "enqueue.log")
            time.sleep(0.2)
            continue
        n = batch.stop
        note(f"ok {time.time():.6f} {n}", "enqueue.log")
        wait = started + (n - first) * pace - time.monotonic()
        if wait > 0:
            time.sleep(wait)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "enqueue":
        sys.exit("usage: python chaos_app.py enqueue N SECONDS")
    enqueue(int(sys.argv[2]), float(sys.argv[3]))
