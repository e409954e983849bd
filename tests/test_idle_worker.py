"""An idle worker lets its database sleep: no query for ``idle_check`` seconds, yet a new
job starts at once (NOTIFY, or SQLite's file watch), a job due later starts on time, an
expired lease is rescued within its bound, and a connection the server closed meanwhile
is noticed when next needed. Real worker processes, real Postgres and SQLite; what the
worker sends is read from ``pg_stat_activity`` (every backend's last query start) and,
on SQLite, from a trace callback on every connection of the worker process."""

from __future__ import annotations

import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tickq import ConfigurationError, Queue
from workerproc import WorkerProcess, eventually, runs

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def pg_app(pg_schema_url: str) -> tuple[str, str, str]:
    """The schema's URL (the test's own), the same tagged with an application_name for
    the worker (its connections are then told apart), and that name."""
    name = f"idle_{uuid.uuid4().hex[:10]}"
    return pg_schema_url, pg_schema_url + f"&application_name={name}", name


def last_query(url: str, app_name: str) -> tuple[float, int]:
    """When the worker's connections last started a query (epoch seconds), and how many
    it has open; read from another connection (its own query is not the worker's)."""
    import psycopg

    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        row = conn.execute(
            "SELECT EXTRACT(EPOCH FROM max(query_start)), count(*) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (app_name,),
        ).fetchone()
    assert row is not None
    return float(row[0] or 0.0), int(row[1])


def settled(url: str, app_name: str, quiet: float = 0.7) -> float:
    """Wait until the worker has sent nothing for ``quiet`` s; its last query's time."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        at, count = last_query(url, app_name)
        if count >= 2 and at and time.time() - at >= quiet:
            return at
        time.sleep(0.1)
    raise AssertionError("the worker never fell idle")


def started_at(folder: Path) -> list[float]:
    return [n["at"] for n in runs(folder) if n["event"] == "start"]


def pg_worker(url: str, folder: Path, *args: str, **env: str) -> WorkerProcess:
    return WorkerProcess(
        *args, TICKQ_DATABASE_URL=url, TICKQ_TEST_RUNS=str(folder), TICKQ_LOG_FORMAT="text", **env
    )


def test_idle_check_is_validated_with_a_clear_message(tmp_path: Path) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}", strict=False)
    with pytest.raises(ConfigurationError, match=r"idle_check must be seconds > 0, got 0"):
        q.run_worker(idle_check=0)
    with pytest.raises(ConfigurationError, match=r"idle_check must be seconds > 0, got 'x'"):
        q.run_worker(idle_check="x")  # type: ignore[arg-type]
    q.close()


def test_cli_refuses_a_bad_idle_check(tmp_path: Path) -> None:
    from conftest import run_tickq

    db = tmp_path / "q.db"
    done = run_tickq("worker", "apps.worker_app:q", "--idle-check", "-1",
                     TICKQ_DATABASE_URL=f"sqlite:///{db}", timeout=30)  # fmt: skip
    assert done.returncode != 0
    assert "idle_check must be seconds > 0, got -1.0" in done.stderr


def test_idle_postgres_worker_sends_nothing_for_idle_check_then_looks_once(
    pg_app: tuple[str, str, str], tmp_path: Path
) -> None:
    own, url, name = pg_app
    Queue(own, strict=False).migrate()
    with pg_worker(url, tmp_path, "--idle-check", "3") as worker:
        line = worker.wait_for_line("worker listening")
        assert line
        quiet_since = settled(url, name)
        time.sleep(max(0.0, quiet_since + 2.2 - time.time()))
        assert last_query(url, name)[0] == quiet_since, "an idle worker sent a query"
        looked = eventually(lambda: last_query(url, name)[0] > quiet_since and
                            last_query(url, name)[0], timeout=5, what="the idle look")  # fmt: skip
        assert 2.8 <= looked - quiet_since <= 4.0, looked - quiet_since
        assert "idle look every 3s" in worker.wait_for_line("worker ")


def test_a_job_enqueued_while_idle_starts_at_once(
    pg_app: tuple[str, str, str], tmp_path: Path
) -> None:
    own, url, name = pg_app
    q = Queue(own, strict=False)
    q.migrate()
    with pg_worker(url, tmp_path, "--idle-check", "30") as worker:
        worker.wait_for_line("worker listening")
        settled(url, name)
        sent = time.time()
        q.enqueue("work", {})
        starts = eventually(lambda: started_at(tmp_path), timeout=5, what="the job's start")
        assert starts[0] - sent < 0.5, f"started {starts[0] - sent:.3f}s after the enqueue"
    q.close()


def test_a_job_due_later_starts_on_time_without_polling(
    pg_app: tuple[str, str, str], tmp_path: Path
) -> None:
    own, url, name = pg_app
    q = Queue(own, strict=False)
    q.migrate()
    with pg_worker(url, tmp_path, "--idle-check", "30") as worker:
        worker.wait_for_line("worker listening")
        settled(url, name)
        due = time.time() + 1.5
        q.enqueue("work", {}, run_after=timedelta(seconds=1.5))
        time.sleep(1.2)
        assert last_query(url, name)[0] < due - 1.5, "the worker looked before the job was due"
        starts = eventually(lambda: started_at(tmp_path), timeout=5, what="the job's start")
        assert due - 0.05 <= starts[0] <= due + 0.5, starts[0] - due
    q.close()


def test_an_idle_worker_rescues_a_killed_workers_job_within_the_lease(
    pg_app: tuple[str, str, str], tmp_path: Path
) -> None:
    own, url, name = pg_app
    q = Queue(own, strict=False)
    q.migrate()
    env = {"TICKQ_TEST_LEASE": "3"}
    q.enqueue("work", {})
    other = tmp_path / "other"
    other.mkdir()
    with pg_worker(url, other, TICKQ_TEST_STALL_AFTER="0", **env) as doomed:
        eventually(
            lambda: any(n["event"] == "stall" for n in runs(other)), timeout=10, what="the stall"
        )
        with pg_worker(url, tmp_path, "--idle-check", "30", **env) as idle:
            idle.wait_for_line("worker listening")
            settled(url, name, quiet=0.3)
            doomed.proc.send_signal(signal.SIGKILL)
            doomed.wait(10)
            killed = time.time()
            starts = eventually(lambda: started_at(tmp_path), timeout=8, what="the rescue")
            # The lease (3 s) ran out at most 3 s after the kill; the idle worker woke then.
            assert starts[0] - killed <= 3 + 1.0, starts[0] - killed
            assert "rescued" in idle.wait_for_line("rescued")
    q.close()


def _terminate(url: str, app_name: str) -> int:
    import psycopg

    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app_name,),
        ).fetchall()
    return len(rows)


def test_connections_closed_while_idle_are_reopened_when_needed(
    pg_app: tuple[str, str, str], tmp_path: Path
) -> None:
    own, url, name = pg_app
    q = Queue(own, strict=False)
    q.migrate()
    with pg_worker(url, tmp_path, "--idle-check", "3") as worker:
        worker.wait_for_line("worker listening")
        settled(url, name)
        assert _terminate(url, name) >= 2  # the loop's connection and the LISTEN one
        worker.wait_for_line("LISTEN connection closed")
        time.sleep(0.5)
        assert last_query(url, name)[1] == 0, "the worker reconnected before it needed to"
        sent = time.time()
        q.enqueue("work", {})  # nobody hears its NOTIFY
        starts = eventually(lambda: started_at(tmp_path), timeout=6, what="the job")
        assert starts[0] - sent <= 3 + 1.0, starts[0] - sent
        worker.wait_for_line("reconnected")
        eventually(lambda: last_query(url, name)[1] >= 2, timeout=5, what="LISTEN again")
        settled(url, name, quiet=0.3)
        sent = time.time()
        q.enqueue("work", {})
        starts = eventually(lambda: len(started_at(tmp_path)) == 2 and started_at(tmp_path),
                            timeout=5, what="the second job")  # fmt: skip
        assert starts[1] - sent < 0.5, "LISTEN was not opened again"
    q.close()


def test_behind_a_transaction_pooler_the_log_says_how_often_it_looks(
    pg_schema_url: str, tmp_path: Path
) -> None:
    url = pg_schema_url + "&pooler=transaction"
    Queue(url, strict=False).migrate()
    with pg_worker(url, tmp_path, "--idle-check", "300") as worker:
        line = worker.wait_for_line("worker ")
        assert "polling only" in line
        assert "poll every 1s, idle look every 1s" in line


def sql_trace(path: Path) -> list[tuple[float, str]]:
    if not path.exists():
        return []
    lines = [ln.split(" ", 1) for ln in path.read_text().splitlines() if ln]
    return [(float(at), sql) for at, sql in lines]


def test_idle_sqlite_worker_sends_no_statement_for_idle_check(tmp_path: Path) -> None:
    db, trace = tmp_path / "q.db", tmp_path / "trace.txt"
    q = Queue(f"sqlite:///{db}", strict=False)
    q.migrate()
    env: dict[str, Any] = {
        "TICKQ_DATABASE_URL": f"sqlite:///{db}",
        "TICKQ_TEST_RUNS": str(tmp_path),
        "TICKQ_TEST_SQL_TRACE": str(trace),
    }
    with WorkerProcess("--idle-check", "3", app="apps.sqlite_traced:q", **env) as worker:
        worker.wait_for_line("worker listening")
        eventually(lambda: sql_trace(trace) and time.time() - sql_trace(trace)[-1][0] > 0.7,
                   timeout=10, what="an idle worker")  # fmt: skip
        quiet_since = sql_trace(trace)[-1][0]
        time.sleep(max(0.0, quiet_since + 2.2 - time.time()))
        assert sql_trace(trace)[-1][0] == quiet_since, sql_trace(trace)[-3:]
        sent = time.time()
        q.enqueue("work", {})  # another process's commit: the file watch hears it
        starts = eventually(lambda: started_at(tmp_path), timeout=5, what="the job's start")
        assert starts[0] - sent < 0.5, f"started {starts[0] - sent:.3f}s after the enqueue"
    q.close()
