"""An idle worker wakes when a job another process put in line comes due, not at its next
poll: a retry recorded by ``process_jobs`` elsewhere, a job enqueued elsewhere with a
delay. Postgres tells it in the NOTIFY (the queue and the milliseconds until due); on
SQLite the commit wakes it and it sleeps until ``due_in``. Real worker processes, a poll
interval of 600 s: only a wake-up at the due time starts these jobs within the bound."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, tickq_env
from tickq import Queue
from workerproc import WorkerProcess, eventually

pytestmark = pytest.mark.timeout(120)

LATE = 0.6
"""How late after its due time the job may start: a wake-up takes milliseconds; the next
poll would be 600 s away (on main a retry waited 2.4-5.2 s with the 5 s default)."""


def elsewhere(url: str, code: str) -> subprocess.Popen[str]:
    """Run ``code`` with ``q`` (tests/apps/worker_app.py on ``url``) in another process."""
    prelude = "from apps.worker_app import q\n"
    return subprocess.Popen([sys.executable, "-c", prelude + code], text=True, cwd=str(ROOT),
                            env=tickq_env(TICKQ_DATABASE_URL=url))  # fmt: skip


def lateness(q: Queue, job_id: int) -> float:
    """Seconds between the job's due time and the start of its last attempt."""
    job = q.get_job(job_id)
    assert job is not None and job.attempted_at is not None
    return (job.attempted_at - job.run_after).total_seconds()


def idle_worker(url: str, runs: Path) -> WorkerProcess:
    w = WorkerProcess("--poll-interval", "600", TICKQ_DATABASE_URL=url, TICKQ_TEST_RUNS=str(runs))
    w.wait_for_line("listening for enqueues")  # logged after its first look: it is idle
    return w


def stop(w: WorkerProcess) -> None:
    w.send(signal.SIGTERM)
    assert w.wait() == 0, w.output


def test_a_retry_recorded_by_another_process_wakes_the_idle_worker_when_due(
    db_url: str, tmp_path: Path
) -> None:
    q = Queue(db_url, strict=False)
    q.migrate()
    gate = tmp_path / "gate"
    # process_jobs elsewhere claims the job first (no worker yet) and fails it on the gate.
    other = elsewhere(db_url, f"q.enqueue('fail_once', {{'gate': {str(gate)!r}}})\n"
                              "print(q.process_jobs())")  # fmt: skip
    try:
        eventually(lambda: q.stats()["by_status"].get("running") == 1, what="the first attempt")
        with idle_worker(db_url, tmp_path) as w:
            gate.touch()
            assert other.wait(60) == 0
            eventually(lambda: q.stats()["by_status"].get("done") == 1, what="the retry")
            stop(w)
    finally:
        if other.poll() is None:
            other.kill()
    [job] = q.list_jobs()
    assert job.attempts == 2
    assert lateness(q, job.id) < LATE, f"retried {lateness(q, job.id):.2f}s after its due time"
    q.close()


def test_a_job_enqueued_elsewhere_with_a_delay_starts_when_due(db_url: str, tmp_path: Path) -> None:
    q = Queue(db_url, strict=False)
    q.migrate()
    with idle_worker(db_url, tmp_path) as w:
        delayed = "q.enqueue('work', {}, run_after=timedelta(seconds=1))"
        other = elsewhere(db_url, f"from datetime import timedelta\n{delayed}")
        assert other.wait(60) == 0
        eventually(lambda: q.stats()["by_status"].get("done") == 1, what="the delayed job")
        stop(w)
    [job] = q.list_jobs()
    assert lateness(q, job.id) < LATE, f"started {lateness(q, job.id):.2f}s after its due time"
    q.close()
