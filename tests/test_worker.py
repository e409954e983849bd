"""``tickq worker``: real worker processes against real SQLite files and a real Postgres."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import run_tickq
from tickq import JobState, Queue
from tickq.store import Outcome
from workerproc import WorkerProcess, eventually, runs

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def q(db_url: str) -> Iterator[Queue]:
    """The test's own handle on the worker's database (types are the app's, not ours)."""
    queue = Queue(db_url, strict=False)
    queue.migrate()
    yield queue
    queue.close()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


@pytest.fixture
def env(db_url: str, notes: Path) -> dict[str, str]:
    return {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_RUNS": str(notes)}


def status(q: Queue, job_id: int) -> JobState:
    job = q.get_job(job_id)
    assert job is not None
    return job.status


def finished(q: Queue, ids: list[int]) -> bool:
    return all(status(q, i) in ("done", "failed", "cancelled") for i in ids)


def started(notes: Path, job_id: int) -> bool:
    return any(n["event"] == "start" and n["id"] == job_id for n in runs(notes))


def test_sync_and_async_jobs_run_side_by_side(
    q: Queue, env: dict[str, str], notes: Path, backend: str
) -> None:
    # Six jobs that can only finish if all six run at the same time: three sync, three async.
    key = uuid.uuid4().hex
    ids = q.enqueue_many(
        [("meet_sync", {"key": key, "parties": 6})] * 3
        + [("meet_async", {"key": key, "parties": 6})] * 3
    )
    with WorkerProcess("--concurrency", "6", "--log-format", "json", **env) as w:
        eventually(lambda: finished(q, ids), what="the six jobs to finish")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output

    assert [status(q, i) for i in ids] == ["done"] * 6
    threads = {n["id"]: n["thread"] for n in runs(notes) if n["event"] == "end"}
    sync_threads = {threads[i] for i in ids[:3]}
    async_threads = {threads[i] for i in ids[3:]}
    assert len(sync_threads) == 3, "each sync job has a thread of its own"
    assert len(async_threads) == 1, "async jobs share one event loop"
    assert not sync_threads & async_threads

    lines = w.json_lines()  # every line is JSON
    banner = next(ln for ln in lines if ln.get("event") == "worker_started")
    assert banner["concurrency"] == 6 and banner["backend"] == backend
    assert banner["version"] and banner["queues"] == []
    outcomes = [ln for ln in lines if ln.get("event") == "succeeded"]
    assert sorted(ln["job_id"] for ln in outcomes) == sorted(ids)
    assert all({"job_type", "attempt", "duration_ms"} <= ln.keys() for ln in outcomes)
    if backend == "postgres":  # one claim took all six: one statement, one timestamp
        assert len({q.get_job(i).attempted_at for i in ids}) == 1  # type: ignore[union-attr]


def test_timeouts_fail_the_attempt_and_free_the_slot(
    q: Queue, env: dict[str, str], notes: Path
) -> None:
    hung = [q.enqueue("hang_sync", max_attempts=1), q.enqueue("hang_async", max_attempts=1)]
    after = q.enqueue_many([("work", {})] * 2)
    # Two slots: the later jobs can only run once the timed-out ones gave theirs back.
    with WorkerProcess("--concurrency", "2", **env) as w:
        eventually(lambda: finished(q, hung + after), what="all jobs to finish")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output

    for job_id in hung:
        job = q.get_job(job_id)
        assert job is not None and job.status == "failed"
        assert job.last_error and job.last_error.startswith("JobTimeout:")
        assert "0.5s" in job.last_error
    assert [status(q, i) for i in after] == ["done", "done"]
    assert {"event": "cancelled", "id": hung[1]}.items() <= _note(notes, "cancelled").items()
    assert "hang_sync attempt 1/1 failed" in w.output


def _note(notes: Path, event: str) -> dict[str, object]:
    return next(n for n in runs(notes) if n["event"] == event)


def test_sigterm_lets_a_running_job_finish(q: Queue, env: dict[str, str], notes: Path) -> None:
    job_id = q.enqueue("work", {"seconds": 1.0})
    with WorkerProcess(**env) as w:
        eventually(lambda: started(notes, job_id), what="the job to start")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    job = q.get_job(job_id)
    assert job is not None and job.status == "done" and job.attempts == 1
    assert "got SIGTERM: claiming no more jobs" in w.output


def test_sigterm_puts_back_jobs_still_running_after_grace(
    q: Queue, env: dict[str, str], notes: Path
) -> None:
    job_id = q.enqueue("work", {"seconds": 60})
    waiting = q.enqueue("work", {}, run_after=None, priority=-1)
    with WorkerProcess("--grace", "0.5", "--concurrency", "1", **env) as w:
        eventually(lambda: started(notes, job_id), what="the job to start")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    job = q.get_job(job_id)
    assert job is not None
    assert (job.status, job.attempts, job.lease_owner) == ("pending", 0, None)
    # Released, not a failed attempt; the cut-short run is on record all the same.
    assert [(a.attempt, a.outcome) for a in q.attempts(job_id)] == [(1, "released")]
    assert status(q, waiting) == "pending"  # nothing new was claimed after the signal
    assert f"job {job_id} work attempt 1 released back to pending" in w.output


def test_second_signal_exits_at_once(q: Queue, env: dict[str, str], notes: Path) -> None:
    job_id = q.enqueue("work", {"seconds": 60})
    with WorkerProcess("--grace", "60", **env) as w:
        eventually(lambda: started(notes, job_id), what="the job to start")
        w.send(signal.SIGINT)
        w.wait_for_line("got SIGINT")
        w.send(signal.SIGINT)
        assert w.wait(timeout=10) == 128 + signal.SIGINT
    # Still running with the dead worker's lease: its expiry brings the job back.
    assert status(q, job_id) == "running"
    assert "SIGINT again: exiting now" in w.output


def test_lost_lease_stops_the_worker_treating_the_job_as_its_own(
    q: Queue, env: dict[str, str], notes: Path
) -> None:
    job_id = q.enqueue("awork", {"seconds": 60})
    with WorkerProcess(TICKQ_TEST_LEASE="3", **env) as w:
        eventually(lambda: started(notes, job_id), what="the job to start")
        # Taken from under the worker (as a rescue would): retried by hand, due in an hour.
        held = q.get_job(job_id)
        assert held is not None and held.lease_owner is not None
        taken = q._store.record(held.lease_owner, [Outcome(held, "retried", "E: taken", 3600)])
        assert [j.id for j in taken.retried] == [job_id]
        w.wait_for_line(f"job {job_id} is no longer ours")  # the next renewal (every 1s)
        w.wait_for_line(f"job {job_id} awork attempt 1/4 stale")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    assert _note(notes, "cancelled")["id"] == job_id  # the async job was stopped
    assert status(q, job_id) == "pending"


def test_in_process_enqueue_wakes_an_idle_sqlite_worker(tmp_path: Path) -> None:
    import threading

    q = Queue(f"sqlite:///{tmp_path / 'app.db'}")
    q.migrate()
    ran = []

    @q.job()
    def remember(n: int) -> None:
        ran.append(n)

    remember.enqueue(n=1)
    stop = threading.Event()
    totals: dict[str, int] = {}
    thread = threading.Thread(
        target=lambda: totals.update(q.run_worker(poll_interval=600, stop=stop)), daemon=True
    )
    thread.start()
    try:
        eventually(lambda: ran == [1], what="the first job")
        # The worker has looked and found nothing else: only a wake-up can start this
        # job before the 600 s poll interval passes.
        remember.enqueue(n=2)
        eventually(lambda: ran == [1, 2], what="the second job")
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert totals["succeeded"] == 2 and totals["claimed"] == 2
    q.close()


def test_notify_wakes_an_idle_postgres_worker(pg_schema_url: str, tmp_path: Path) -> None:
    import psycopg

    q = Queue(pg_schema_url, strict=False)
    q.migrate()
    env = {"TICKQ_DATABASE_URL": pg_schema_url, "TICKQ_TEST_RUNS": str(tmp_path)}
    with WorkerProcess("--poll-interval", "600", **env) as w:
        w.wait_for_line("listening for enqueues")
        # Enqueued from this process, in this test's own transaction: only the NOTIFY sent
        # at commit can wake a worker that otherwise looks again in 600 s.
        with psycopg.connect(pg_schema_url) as conn:
            rolled_back = q.enqueue("work", {}, conn=conn)
            conn.rollback()
            job_id = q.enqueue("work", {}, conn=conn)
        eventually(lambda: status(q, job_id) == "done", what="the notified job to run")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    assert q.get_job(rolled_back) is None
    q.close()


def test_reconnects_after_its_connections_are_terminated(
    pg_schema_url: str, tmp_path: Path
) -> None:
    import psycopg

    from conftest import PG_URL

    name = f"tickq-test-{uuid.uuid4().hex[:12]}"
    worker_url = f"{pg_schema_url}&application_name={name}"
    q = Queue(pg_schema_url, strict=False)
    q.migrate()
    env = {"TICKQ_DATABASE_URL": worker_url, "TICKQ_TEST_RUNS": str(tmp_path)}
    with WorkerProcess("--poll-interval", "1", **env) as w:
        w.wait_for_line("listening for enqueues")
        job_id = q.enqueue("work", {"seconds": 1.5})
        eventually(lambda: started(tmp_path, job_id), what="the job to start")
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s", (name,),
            ).fetchone()  # fmt: skip
        assert killed and killed[0] >= 2  # the worker's main and LISTEN connections at least
        # The job finishes while the connection is gone; the worker replaces the dead
        # connection before recording its outcome (no failed try needed).
        eventually(lambda: status(q, job_id) == "done", what="the outcome to be recorded")
        w.wait_for_line("LISTEN connection reachable again")
        later = q.enqueue("work", {})
        eventually(lambda: status(q, later) == "done", what="a job after reconnecting")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    job = q.get_job(job_id)
    assert job is not None and job.attempts == 1
    assert [a.outcome for a in q.attempts(job_id)] == ["done"]  # no failed attempt
    q.close()


def test_unreachable_database_is_logged_and_retried_not_fatal(tmp_path: Path) -> None:
    env = {"TICKQ_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nowhere"}
    with WorkerProcess("--log-format", "json", **env) as w:
        w.wait_for_line('"failures": 1')
        time.sleep(1.0)  # backed off, tried again (0.25 s, 0.5 s), still running
        assert w.proc.poll() is None
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    trouble = [ln for ln in w.json_lines() if ln.get("event") == "database_unavailable"]
    assert "127.0.0.1:1/nowhere is unreachable" in trouble[0]["message"]
    assert len(trouble) == 1, trouble  # one line for the episode, not one per try


def test_missing_tables_are_a_one_line_error(tmp_path: Path) -> None:
    result = run_tickq(
        "worker", "apps.worker_app:q", TICKQ_DATABASE_URL=f"sqlite:///{tmp_path / 'new.db'}"
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("tickq: error: tickq's tables are missing")
    assert "tickq migrate" in last


def test_postgres_worker_on_an_unmigrated_database_says_migrate_in_one_line(
    pg_schema_url: str,
) -> None:
    """No traceback from the LISTEN thread: it starts only once the schema is there."""
    result = run_tickq("worker", "apps.worker_app:q", TICKQ_DATABASE_URL=pg_schema_url)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "trouble" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("tickq: error: tickq's tables are missing") and "migrate" in last


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "0"], "concurrency must be a whole number >= 1, got 0"),
        (
            ["--queues", "a,,b"],
            "queues must be non-empty names separated by commas, e.g. 'default,emails'; got 'a,,b'",
        ),
        (["--grace", "-1"], "grace must be seconds >= 0, got -1.0"),
        (["--poll-interval", "0"], "poll_interval must be seconds > 0, got 0.0"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    result = run_tickq("worker", "apps.worker_app:q", *args, TICKQ_DATABASE_URL=url)
    assert (result.returncode, result.stderr.strip()) == (1, f"tickq: error: {message}")


def test_docs_worker_example_runs() -> None:
    import re
    import subprocess
    import sys

    from conftest import ROOT, tickq_env

    page = (ROOT / "docs" / "workers.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", page, re.S)
    result = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, timeout=60,
        env=tickq_env(), cwd=str(ROOT),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "'claimed': 2, 'succeeded': 2" in result.stdout


def test_worker_enqueues_schedule_slots_itself(
    db_url: str, env: dict[str, str], notes: Path
) -> None:
    Queue(db_url).migrate()

    def slots() -> list[str]:
        return [s for p in notes.glob("slots-*.txt") for s in p.read_text().split()]

    # Two workers, no tick: each slot of the every-second schedule runs exactly once.
    with (
        WorkerProcess(app="apps.worker_schedules:q", **env) as first,
        WorkerProcess(app="apps.worker_schedules:q", **env) as second,
    ):
        eventually(lambda: len(slots()) >= 3, what="three slots to run")
        for w in (first, second):
            w.send(signal.SIGTERM)
        assert (first.wait(), second.wait()) == (0, 0)
    ran = slots()
    assert len(ran) == len(set(ran)), f"a slot ran twice: {sorted(ran)}"
    assert "1 schedule(s)" in first.output
