"""``q.cancel(id)`` on a running job: a request the job observes, heard across processes.

Real ``tickq worker`` processes on SQLite and Postgres: a sync job polling
``ctx.cancel_requested`` and an async job cancelled at its ``await`` both end cancelled with
an attempt row and are not retried; a job whose worker was killed ends cancelled when its
lease runs out. Then the inline drivers (``process_jobs``, the tick) and the outcome rules.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickq import Cancel, JobContext, JobState, Queue
from workerproc import WorkerProcess, eventually, runs

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def q(db_url: str) -> Iterator[Queue]:
    queue = Queue(db_url, strict=False)
    queue.migrate()
    yield queue
    queue.close()


@pytest.fixture
def env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_RUNS": str(tmp_path)}


def noted(folder: Path, event: str, job_id: int) -> bool:
    return any(n["event"] == event and n["id"] == job_id for n in runs(folder))


def ended(q: Queue, job_id: int) -> JobState | None:
    job = q.get_job(job_id)
    assert job is not None
    return job.status if job.status != "running" else None


def assert_cancelled_once(q: Queue, job_id: int, error_has: str) -> None:
    job = q.get_job(job_id)
    assert job is not None
    assert (job.status, job.attempts, job.lease_owner) == ("cancelled", 1, None)
    assert job.finished_at is not None and job.cancel_requested_at is not None
    [attempt] = q.attempts(job_id)  # one attempt, kept, and never a second one
    assert (attempt.attempt, attempt.outcome, attempt.error_type) == (1, "cancelled", "Cancel")
    assert error_has in (attempt.error or "")
    assert q.stats()["failed_attempts_last_hour"] == 0  # nothing to alert on


@pytest.mark.parametrize(
    ("job_type", "seen", "error_has"),
    [("patient", "cancel_seen", "Cancel: stopped on request"),
     ("awork", "cancelled", "was cancelled at an await")],
    ids=["sync-polls", "async-awaits"],
)  # fmt: skip
def test_a_worker_stops_a_running_job_on_request(
    q: Queue, env: dict[str, str], tmp_path: Path, job_type: str, seen: str, error_has: str
) -> None:
    job_id = q.enqueue(job_type, {"seconds": 60})
    with WorkerProcess(**env) as w:  # the default 60 s lease: renewals every 20 s
        eventually(lambda: noted(tmp_path, "start", job_id), what="the job to start")
        asked = time.monotonic()
        assert q.cancel(job_id).status == "running"
        eventually(lambda: ended(q, job_id), timeout=10, what="the job to end")
        latency = time.monotonic() - asked
        print(f"{job_type}: cancelled {latency:.2f}s after q.cancel")
        assert noted(tmp_path, seen, job_id)  # the job itself heard it
        w.wait_for_line(f"job {job_id}: cancel requested")
        w.wait_for_line(f"job {job_id} {job_type} attempt 1/4 cancelled")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    assert latency < 5, f"the cancel took {latency:.2f}s to be heard"  # ~1 s: CANCEL_CHECK
    assert_cancelled_once(q, job_id, error_has)
    assert not noted(tmp_path, "end", job_id)


@pytest.mark.parametrize("job_type", ["patient", "awork"])
def test_a_listening_worker_hears_a_cancel_at_once(
    q: Queue, env: dict[str, str], tmp_path: Path, backend: str, job_type: str
) -> None:
    # Postgres: the cancel's NOTIFY; SQLite: the worker's watch on the database file.
    job_id = q.enqueue(job_type, {"seconds": 60})
    with WorkerProcess(**env) as w:
        eventually(lambda: noted(tmp_path, "start", job_id), what="the job to start")
        w.wait_for_line("listening for enqueues")
        time.sleep(1.5)  # held past its first look: only the wake-up is quicker than 1 s
        asked = time.monotonic()
        q.cancel(job_id)
        eventually(lambda: ended(q, job_id), timeout=10, what="the job to end")
        latency = time.monotonic() - asked
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    print(f"{backend} {job_type} woken: cancelled {latency:.3f}s after q.cancel")
    assert latency < 0.6, f"the cancel took {latency:.2f}s: the wake-up went unheard"
    assert q.attempts(job_id)[0].outcome == "cancelled"


def test_a_job_whose_worker_was_killed_ends_cancelled_not_retried(
    q: Queue, env: dict[str, str], tmp_path: Path
) -> None:
    job_id = q.enqueue("work", {"seconds": 60})
    with WorkerProcess(TICKQ_TEST_LEASE="3", **env) as w:
        eventually(lambda: noted(tmp_path, "start", job_id), what="the job to start")
        w.send(signal.SIGKILL)
        assert w.wait() == -signal.SIGKILL
    assert q.cancel(job_id).status == "running"  # nobody left to hear it
    # Another worker rescues it once the dead one's lease has run out: cancelled, not rerun.
    with WorkerProcess("--poll-interval", "0.2", TICKQ_TEST_LEASE="3", **env) as rescuer:
        eventually(lambda: ended(q, job_id), timeout=20, what="the rescue")
        rescuer.wait_for_line(f"job {job_id} work: lease expired on attempt 1 after a cancel")
        rescuer.send(signal.SIGTERM)
        assert rescuer.wait() == 0, rescuer.output
    assert_cancelled_once(q, job_id, "which stopped renewing its lease")
    assert [n["event"] for n in runs(tmp_path) if n["id"] == job_id] == ["start"]


# -- the inline drivers: process_jobs and the tick ----------------------------------------
def cancel_when_started(q: Queue, started: threading.Event, job_id: int) -> threading.Thread:
    def cancel() -> None:
        if started.wait(10):
            q.cancel(job_id)

    thread = threading.Thread(target=cancel, daemon=True)
    thread.start()
    return thread


def test_a_tick_hears_a_cancel_for_the_job_it_runs_inline(queue: Queue) -> None:
    started = threading.Event()

    @queue.job()
    def export(ctx: JobContext) -> str:
        started.set()
        deadline = time.monotonic() + 20
        while not ctx.cancel_requested:
            assert time.monotonic() < deadline, "the cancel request never arrived"
            time.sleep(0.01)
        raise Cancel("export stopped")

    job_id = export.enqueue()
    cancel_when_started(queue, started, job_id)
    summary = queue.tick(time_budget=30)
    assert summary["jobs"]["cancelled"] == 1 and summary["jobs"]["retried"] == 0
    assert [a.outcome for a in queue.attempts(job_id)] == ["cancelled"]


def test_an_async_job_run_inline_is_cancelled_at_its_await(queue: Queue) -> None:
    started = threading.Event()

    @queue.job()
    async def crawl() -> None:
        started.set()
        await asyncio.sleep(20)

    job_id = crawl.enqueue()
    cancel_when_started(queue, started, job_id)
    began = time.monotonic()
    report = queue.process_jobs()
    assert report["cancelled"] == 1 and time.monotonic() - began < 10
    [attempt] = queue.attempts(job_id)
    assert attempt.outcome == "cancelled" and "cancelled at an await" in (attempt.error or "")


def test_a_job_that_ignores_the_request_and_returns_succeeds(queue: Queue) -> None:
    started = threading.Event()

    @queue.job()
    def report(ctx: JobContext) -> int:
        started.set()
        while not ctx.cancel_requested:
            time.sleep(0.01)
        return 42  # it finished the work anyway: its result is the truth

    job_id = report.enqueue()
    cancel_when_started(queue, started, job_id)
    assert queue.process_jobs()["succeeded"] == 1
    job = queue.get_job(job_id)
    assert job is not None and (job.status, job.result) == ("done", 42)
    assert job.cancel_requested_at is not None


def test_a_job_that_raises_anything_after_the_request_is_not_retried(queue: Queue) -> None:
    started = threading.Event()

    @queue.job(max_attempts=5)
    def upload(ctx: JobContext) -> None:
        started.set()
        while not ctx.cancel_requested:
            time.sleep(0.01)
        raise ConnectionError("socket closed while stopping")

    job_id = upload.enqueue()
    cancel_when_started(queue, started, job_id)
    assert queue.process_jobs()["cancelled"] == 1
    job = queue.get_job(job_id)
    assert job is not None and (job.status, job.attempts) == ("cancelled", 1)
    [attempt] = queue.attempts(job_id)
    assert attempt.error_type == "Cancel" and "ConnectionError" in (attempt.error or "")


def test_the_context_of_a_job_not_asked_says_no(queue: Queue) -> None:
    seen = []

    @queue.job()
    def quick(ctx: JobContext) -> None:
        seen.append(ctx.cancel_requested)

    quick.enqueue()
    queue.process_jobs()
    assert seen == [False]
