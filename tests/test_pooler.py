"""tickq through a real pgbouncer (transaction and session mode), started by the test."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import PG_URL, require_postgres, with_search_path
from pgbouncer import PgBouncer, create_schema_role, drop_schema_role
from tickq import ConfigurationError, Queue
from tickq.store.pooler import guess_pooler, split_pooler
from workerproc import WorkerProcess, eventually, runs

Start = Callable[..., tuple[PgBouncer, str]]


@pytest.fixture
def pooled() -> Iterator[Start]:
    """``start(pool_mode)`` -> (pgbouncer, schema): a fresh schema reached through it."""
    require_postgres()
    started: list[tuple[PgBouncer, str]] = []

    def start(pool_mode: str = "transaction", pool_size: int = 4) -> tuple[PgBouncer, str]:
        schema = f"p_{uuid.uuid4().hex[:12]}"
        create_schema_role(schema)
        started.append((PgBouncer(pool_mode, [schema], pool_size), schema))
        return started[-1]

    try:
        yield start
    finally:
        for bouncer, schema in started:
            bouncer.stop()
            drop_schema_role(schema)


def done_count(schema: str) -> Counter[str]:
    import psycopg

    with psycopg.connect(with_search_path(PG_URL, schema)) as conn:
        rows = conn.execute("SELECT status, count(*) FROM tickq_jobs GROUP BY status").fetchall()
    return Counter({status: n for status, n in rows})


# -- the option --------------------------------------------------------------------------
def test_pooler_option_is_taken_off_the_url_and_checked() -> None:
    url, mode = split_pooler("postgresql://u@h:6432/db?sslmode=require&pooler=transaction")
    assert (url, mode) == ("postgresql://u@h:6432/db?sslmode=require", "transaction")
    assert split_pooler("postgresql://u@h/db") == ("postgresql://u@h/db", None)
    kept = "postgresql://u:p%40ss@h/db?options=-c%20search_path%3Dx&pooler=session"
    assert split_pooler(kept) == (
        "postgresql://u:p%40ss@h/db?options=-c%20search_path%3Dx",
        "session",
    )
    with pytest.raises(ConfigurationError, match=r"pooler must be one of .* got 'txn'"):
        split_pooler("postgresql://u@h/db?pooler=txn")


def test_hosted_transaction_poolers_are_recognised() -> None:
    assert guess_pooler("postgresql://u@aws-0-eu-west-1.pooler.supabase.com:6543/p") == (
        "transaction"
    )
    assert guess_pooler("postgresql://u@aws-0-eu-west-1.pooler.supabase.com:5432/p") == "none"
    assert guess_pooler("postgresql://u@ep-cool-1-pooler.us-east-2.aws.neon.tech/db") == (
        "transaction"
    )
    assert guess_pooler("postgresql://u@ep-cool-1.us-east-2.aws.neon.tech/db") == "none"
    assert guess_pooler("postgresql://u@127.0.0.1:6432/db") == "none"


# -- transaction mode --------------------------------------------------------------------
def test_thousands_of_jobs_through_a_transaction_pooler_each_run_once(
    pooled: Start, tmp_path: Path
) -> None:
    bouncer, schema = pooled("transaction")
    url = bouncer.url(schema)
    assert Queue(url).migrate()
    folder = tmp_path / "runs"
    folder.mkdir()
    env = {"TICKQ_DATABASE_URL": url + "?pooler=transaction", "TICKQ_TEST_RUNS": str(folder)}
    workers = [WorkerProcess("--concurrency", "4", **env) for _ in range(3)]
    try:
        for w in workers:
            w.wait_for_line("worker")
        # Enqueued without ?pooler=: tickq finds the pooler out from the server's errors.
        errors: list[BaseException] = []
        q = Queue(url)

        @q.job(name="work")
        def work(seconds: float = 0.0) -> None: ...

        def enqueue(n: int) -> None:
            for _ in range(n):
                try:
                    work.enqueue()
                except Exception as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=enqueue, args=(550,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        eventually(lambda: done_count(schema)["done"] == 2200, 120, "2,200 jobs done")
        for w in workers:
            w.send(15)
        for w in workers:
            assert w.wait() == 0
    finally:
        for w in workers:
            w.__exit__()
    starts = Counter(n["id"] for n in runs(folder) if n["event"] == "start")
    assert len(starts) == 2200 and set(starts.values()) == {1}
    assert done_count(schema) == {"done": 2200}
    logs = "\n".join(w.output for w in workers)
    for trouble in ("trouble", "unreachable", "lease expired", "prepared statement", "/4 stale"):
        assert trouble not in logs
    assert "polling only (behind a transaction pooler" in logs


def test_a_transaction_pooler_is_found_out_by_the_first_lost_prepared_statement(
    pooled: Start, caplog: pytest.LogCaptureFixture
) -> None:
    # One server connection behind two clients: both name their first prepared statement
    # _pg3_0, so the second one to prepare it gets "already exists" (what mixed pools do).
    bouncer, schema = pooled("transaction", pool_size=1)
    url = bouncer.url(schema)
    first, second = Queue(url), Queue(url)
    first.migrate()
    ids = [_enqueue_work(q) for _ in range(8) for q in (first, second)]
    assert len(set(ids)) == 16
    assert second._store.transaction_pooled
    assert "Add ?pooler=transaction to the database URL" in caplog.text
    assert len(first.list_jobs(limit=100)) == 16
    assert second.process_jobs(limit=10)["succeeded"] == 10
    assert first.tick(limit=10)["jobs"]["succeeded"] == 6


def test_migrate_through_a_transaction_pooler_from_several_processes_at_once(
    pooled: Start,
) -> None:
    bouncer, schema = pooled("transaction")
    url = bouncer.url(schema) + "?pooler=transaction"
    applied: list[list[int]] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            applied.append(Queue(url).migrate())
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    versions = [v for one in applied for v in one]
    assert versions and len(versions) == len(set(versions))  # each applied exactly once
    assert Queue(url).migrate() == []


def test_worker_with_listen_url_hears_enqueues_past_the_pooler(pooled: Start) -> None:
    bouncer, schema = pooled("transaction")
    url = bouncer.url(schema) + "?pooler=transaction"
    q = Queue(url)
    q.migrate()
    direct = with_search_path(PG_URL, schema)
    with WorkerProcess(
        "--poll-interval", "60", "--listen-url", direct, TICKQ_DATABASE_URL=url
    ) as w:
        w.wait_for_line("LISTEN/NOTIFY on a direct connection to 127.0.0.1:5432/test")
        w.wait_for_line("listening for enqueues")
        time.sleep(0.3)  # past the worker's first look: only a NOTIFY can wake it now
        job_id = _enqueue_work(q)
        enqueued = time.monotonic()
        eventually(lambda: q.get_job(job_id).status == "done", 20, "the job done")  # type: ignore[union-attr]
        assert time.monotonic() - enqueued < 10  # well before the 60 s poll
        w.send(15)
        assert w.wait() == 0
    assert "prepared statement" not in w.output


def test_worker_behind_a_transaction_pooler_without_listen_url_polls_and_says_so(
    pooled: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKQ_LISTEN_URL", raising=False)
    bouncer, schema = pooled("transaction")
    url = bouncer.url(schema) + "?pooler=transaction"
    q = Queue(url)
    q.migrate()
    with WorkerProcess(TICKQ_DATABASE_URL=url) as w:
        line = w.wait_for_line("worker")
        assert "polling only (behind a transaction pooler" in line
        assert "poll every 1s" in line
        job_id = _enqueue_work(q)
        eventually(lambda: q.get_job(job_id).status == "done", 20, "the job done")  # type: ignore[union-attr]
        w.send(15)
        assert w.wait() == 0
    assert "listening for enqueues" not in w.output


def test_worker_that_finds_the_pooler_out_late_stops_listening_and_polls(
    pooled: Start, tmp_path: Path
) -> None:
    # One server connection: the test's enqueues prepare _pg3_0 on it, so the worker's own
    # fifth claim (its first prepared statement, also _pg3_0) meets "already exists". Jobs
    # of 30 ms are not claimed ahead: one claim each.
    bouncer, schema = pooled("transaction", pool_size=1)
    url = bouncer.url(schema)
    q = Queue(url)
    q.migrate()
    ids = [_enqueue_work(q, seconds=0.03) for _ in range(30)]
    folder = tmp_path / "runs"
    folder.mkdir()
    with WorkerProcess(
        "--concurrency", "1", TICKQ_DATABASE_URL=url, TICKQ_TEST_RUNS=str(folder)
    ) as w:
        w.wait_for_line("polling every 1s from now on")
        eventually(lambda: done_count(schema)["done"] == 30, 30, "30 jobs done")
        late = _enqueue_work(q)
        eventually(lambda: q.get_job(late).status == "done", 10, "a job enqueued later done")  # type: ignore[union-attr]
        w.send(15)
        assert w.wait() == 0
    starts = Counter(n["id"] for n in runs(folder) if n["event"] == "start")
    assert set(starts) == {*ids, late} and set(starts.values()) == {1}
    assert "trouble" not in w.output


# -- session mode ------------------------------------------------------------------------
def test_session_mode_pooler_keeps_listen_and_prepares_as_usual(pooled: Start) -> None:
    bouncer, schema = pooled("session")
    url = bouncer.url(schema)
    q = Queue(url)
    q.migrate()
    assert not q._store.transaction_pooled
    with WorkerProcess("--poll-interval", "60", TICKQ_DATABASE_URL=url) as w:
        w.wait_for_line("listening for enqueues")
        time.sleep(0.3)
        ids = [_enqueue_work(q) for _ in range(20)]  # past psycopg's prepare threshold
        eventually(lambda: all(q.get_job(i).status == "done" for i in ids), 20, "jobs done")  # type: ignore[union-attr]
        sql = "SELECT count(*) FROM pg_prepared_statements"
        assert (
            q._store._connection().execute(sql).fetchone()[0] > 0
        )  # session mode: psycopg's prepared statements stay on
        w.send(15)
        assert w.wait() == 0
    assert "trouble" not in w.output


def _enqueue_work(q: Queue, **payload: float) -> int:
    if q._definition("work") is None:

        @q.job(name="work")
        def work(seconds: float = 0.0) -> None: ...

    return q.enqueue("work", payload)


# -- what tickq leaves behind, and what it does when recording fails ---------------------
def test_enqueue_on_the_callers_psycopg_connection_prepares_nothing(pg_schema_url: str) -> None:
    import psycopg

    q = Queue(pg_schema_url)
    q.migrate()
    with psycopg.connect(pg_schema_url) as conn:
        for _ in range(10):  # psycopg prepares a query from its 5th run unless told not to
            _enqueue_on(q, conn)
        conn.commit()
        left = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert left == (0,)
    assert len(q.list_jobs()) == 10


def test_a_finished_job_is_recorded_even_when_the_connection_is_cut_under_it(
    pg_schema_url: str,
) -> None:
    import psycopg

    name = f"tickq_cut_{uuid.uuid4().hex[:8]}"
    q = Queue(f"{pg_schema_url}&application_name={name}")
    q.migrate()
    ran: list[int] = []

    @q.job()
    def cut_off() -> None:
        ran.append(1)  # done; now the connection that records it goes away
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (name,),
            )

    job_id = cut_off.enqueue()
    report = q.process_jobs(limit=5)
    assert ran == [1]
    assert report["succeeded"] == 1
    assert q.get_job(job_id).status == "done"  # type: ignore[union-attr]
    q.close()


def _enqueue_on(q: Queue, conn: object) -> int:
    if q._definition("work") is None:

        @q.job(name="work")
        def work(seconds: float = 0.0) -> None: ...

    return q.enqueue("work", {}, conn=conn)


def test_a_listen_url_that_is_not_a_postgres_url_is_refused_at_start(pg_schema_url: str) -> None:
    from tickq.worker import Worker

    with pytest.raises(ConfigurationError, match="listen_url must be a postgresql:// URL"):
        Worker(Queue(pg_schema_url)._runtime, listen_url="postgresql://h/db?nonsense=1")


def test_listen_url_comes_from_tickq_listen_url_when_not_given(
    pg_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tickq.worker import Worker

    monkeypatch.setenv("TICKQ_LISTEN_URL", "postgresql://postgres@db.internal:5432/app")
    w = Worker(Queue(pg_schema_url + "&pooler=transaction")._runtime)
    assert w.listens and w._wake_up() == (
        "LISTEN/NOTIFY on a direct connection to db.internal:5432/app"
    )
    monkeypatch.delenv("TICKQ_LISTEN_URL")
    w = Worker(Queue(pg_schema_url + "&pooler=transaction")._runtime)
    assert not w.listens and w.poll_interval == 1.0
    assert w._wake_up().startswith("polling only (behind a transaction pooler")


def test_a_statement_of_the_same_name_but_other_parameters_is_a_pooler_sign(
    pg_schema_url: str,
) -> None:
    # Behind a transaction pooler the server connection may hold another client's _pg3_0
    # with other parameters: "bind message supplies 10 parameters, but prepared statement
    # "_pg3_0" requires 2" (seen in the thousands-of-jobs test). Made here on one
    # connection: psycopg believes the name is its insert, the server has a 2-parameter one.
    q = Queue(pg_schema_url)
    q.migrate()
    ids = [_enqueue_work(q) for _ in range(8)]  # the insert gets prepared
    store: Any = q._store  # the store's own connection
    conn = store._connection()
    prepared = "SELECT name FROM pg_prepared_statements WHERE cardinality(parameter_types) > 2"
    [(insert,)] = conn.execute(prepared, prepare=False).fetchall()
    conn.execute(f"DEALLOCATE {insert}", prepare=False)
    conn.execute(f"PREPARE {insert} AS SELECT CAST($1 AS int) + CAST($2 AS int)", prepare=False)
    ids.append(_enqueue_work(q))
    assert q._store.transaction_pooled
    assert len(set(ids)) == 9 and len(q.list_jobs(limit=20)) == 9
    q.close()


def test_migrate_leaves_no_prepared_statement_behind(pg_schema_url: str) -> None:
    # Its bookkeeping insert runs once a version; past psycopg's threshold of 5 it would be
    # prepared, and behind a transaction pooler outlive the migration on a shared server
    # connection (another client's first statement of that name then fails).
    q = Queue(pg_schema_url)
    assert len(q.migrate()) >= 6
    store: Any = q._store
    rows = (
        store._connection()
        .execute("SELECT name FROM pg_prepared_statements", prepare=False)
        .fetchall()
    )
    assert rows == []
    q.close()


def test_concurrency_limit_holds_through_a_transaction_pooler(
    pooled: Start, tmp_path: Path
) -> None:
    """The limit's advisory lock is transaction-scoped: workers sharing two server
    connections through pgbouncer (transaction mode) still run at most 2 at once."""
    from test_controls_workers import intervals, most_at_once

    bouncer, schema = pooled("transaction", pool_size=2)
    url = bouncer.url(schema) + "?pooler=transaction"
    q = Queue(url, strict=False)
    q.migrate()
    env = {"TICKQ_DATABASE_URL": url, "TICKQ_TEST_RUNS": str(tmp_path)}
    workers = [
        WorkerProcess("--queues", f"q{i}", "--concurrency", "8", "--poll-interval", "0.1",
                      app="apps.controls_app:q", **env)
        for i in (1, 2, 3)
    ]  # fmt: skip
    try:
        for w in workers:
            w.wait_for_line("worker")
        q.enqueue_many([("capped", {"seconds": 0.1}, {"queue": f"q{i % 3 + 1}"})
                        for i in range(30)])  # fmt: skip
        eventually(lambda: done_count(schema)["done"] == 30, 90, "30 capped jobs done")
        for w in workers:
            w.send(15)
        for w in workers:
            assert w.wait() == 0, w.output
    finally:
        for w in workers:
            w.__exit__()
    spans = intervals(tmp_path, "capped")
    assert len(spans) == 30 and most_at_once(spans) == 2
    assert len({n["pid"] for n in runs(tmp_path)}) == 3


def test_a_limit_per_key_holds_through_a_transaction_pooler(pooled: Start, tmp_path: Path) -> None:
    """Per-key limits take the same transaction-scoped advisory lock and keep their cursor
    in a table, nothing in the session: through pgbouncer (transaction mode, two server
    connections for three workers) each key still runs one job at a time, keys side by side."""
    from test_keyed_workers import (
        assert_one_per_key_and_keys_in_parallel,
        keyed_queue,
        run_five_keys_of_twenty,
    )

    bouncer, schema = pooled("transaction", pool_size=2)
    url = bouncer.url(schema) + "?pooler=transaction"
    q = keyed_queue(url)
    try:
        sampler = run_five_keys_of_twenty(
            q, lambda: keyed_workers(url, tmp_path), tmp_path, lambda: done_count(schema)["done"]
        )
    finally:
        q.close()
    assert_one_per_key_and_keys_in_parallel(tmp_path, sampler)


def test_a_rate_limit_per_key_holds_through_a_transaction_pooler(
    pooled: Start, tmp_path: Path
) -> None:
    from test_keyed_workers import keyed_queue, run_rated_per_account

    bouncer, schema = pooled("transaction", pool_size=2)
    url = bouncer.url(schema) + "?pooler=transaction"
    q = keyed_queue(url)
    try:
        run_rated_per_account(q, lambda: keyed_workers(url, tmp_path), tmp_path)
    finally:
        q.close()


def keyed_workers(url: str, runs_dir: Path) -> list[WorkerProcess]:
    """Three workers of 8 slots through the pooler at ``url``, each on its own queue."""
    env = {"TICKQ_DATABASE_URL": url, "TICKQ_TEST_RUNS": str(runs_dir)}
    procs = [
        WorkerProcess("--queues", f"q{i}", "--concurrency", "8", "--poll-interval", "0.1",
                      app="apps.controls_app:q", **env)
        for i in (1, 2, 3)
    ]  # fmt: skip
    try:
        for w in procs:
            w.wait_for_line("worker")
    except BaseException:
        for w in procs:
            w.__exit__()
        raise
    return procs
