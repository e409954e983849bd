"""The figures a database queue should publish, at a million rows, on SQLite and Postgres.

    python bench/scale.py [--quick] [--backend sqlite|postgres|both] [--rows 1000000]
                          [--only SECTION[,SECTION]] [--minutes 1] [--rate 100]
                          [--postgres-url URL]

Sections (each prints its conditions, then one ``| section | backend | figure | value |
unit |`` row per figure):

- ``hot``: an empty tick, a claim of one due job, one enqueue and a one-job tick, p50/p95,
  at ``--rows`` (90 % finished 10 days ago, 1 % of them failed with 4 attempt rows each;
  10 % pending, due tomorrow) and at 1,000 rows of the same shape, alternated, with the
  ratio big/small (the target is <= 1.5x). Each round leaves its claimed job running
  (a lease of an hour) and one more job done, in the big database the next sections read.
- ``reads``: at ``--rows``: ``q.stats()``, ``tickq stats`` (in-process), ``q.health()`` and
  the dashboard's pages (overview, the job list with each filter, a failed job), p50/p95
  (target <= 100 ms at p95).
- ``due``: ``tick(limit=100)`` with the 10 % pending made due, and whether its
  ``remaining_due`` is the exact count of due rows (counting every due row costs with
  the backlog).
- ``drain``: completed jobs/s of ``process_jobs(limit=100)`` draining jobs from a backlog
  of 0, 100k and ``--rows`` due jobs.
- ``latency``: enqueue -> start p50/p99 at ``--rate`` jobs/s into a worker (a thread).
- ``wal`` (Postgres): WAL bytes (this database's records, read with pg_walinspect) and
  commits per completed job at that steady rate.
  tickq has no switch for NOTIFY (every enqueue statement sends one ``pg_notify`` per
  queue, sent once per transaction), so there is no on/off figure.
- ``bloat``: dead tuples, table and index sizes after ``--minutes`` at ``--rate`` with a
  worker and the default retention (Postgres: with the server's autovacuum settings;
  SQLite: file size and free pages).

Postgres runs in databases of its own (``scale_<random>``), created on the server of
``--postgres-url`` and dropped afterwards; SQLite in temporary files. Rows are written with
one INSERT ... SELECT per kind (generate_series / a recursive CTE), shaped as tickq writes
them, then ANALYZEd. The queues keep every job (``retention=None``) except in ``bloat``.
``--quick``: 2,000 rows, a few iterations, seconds in all (the CI smoke run).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tickq import Queue  # noqa: E402

SECTIONS = ("hot", "reads", "due", "drain", "latency", "wal", "bloat")
PG_URL = os.environ.get("TICKQ_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
SMALL = 1000
ERROR = "ValueError: provider unreachable\nTraceback (most recent call last):\n  ...\n"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def timed_ms(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


class Report:
    """Prints conditions and figures; keeps the figures for a caller (``run``)."""

    def __init__(self) -> None:
        self.figures: list[tuple[str, str, str, float, str]] = []

    def conditions(self, section: str, backend: str, text: str) -> None:
        print(f"\n## {section} on {backend}: {text}; load average {load()}", flush=True)

    def figure(self, section: str, backend: str, name: str, value: float, unit: str) -> None:
        self.figures.append((section, backend, name, value, unit))
        shown = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        print(f"| {section} | {backend} | {name} | {shown} | {unit} |", flush=True)

    def spread(self, section: str, backend: str, name: str, ms: list[float]) -> None:
        self.figure(section, backend, f"{name} p50", pct(ms, 50), "ms")
        self.figure(section, backend, f"{name} p95", pct(ms, 95), "ms")


# -- databases ----------------------------------------------------------------------------
class Backend:
    """Makes fresh, migrated databases of one kind and fills them as tickq would."""

    name = ""

    def fresh(self) -> str:
        raise NotImplementedError

    def drop_all(self) -> None:
        raise NotImplementedError

    def fill(self, url: str, finished: int, pending: int, pending_due: bool) -> None:
        raise NotImplementedError

    def sql(self, url: str, statement: str) -> list[tuple[Any, ...]]:
        raise NotImplementedError


def sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


class SQLiteBackend(Backend):
    name = "sqlite"

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="tickq-scale-"))

    def fresh(self) -> str:
        url = f"sqlite:///{self.folder / f'{uuid.uuid4().hex[:8]}.db'}"
        migrated(url)
        return url

    def drop_all(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def sql(self, url: str, statement: str) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(sqlite_path(url), isolation_level=None)) as conn:
            return conn.execute(statement).fetchall()

    # Times in tickq's SQLite text format (ISO-8601 UTC, microseconds) from epoch seconds.
    ISO = (
        "printf('%s.%06d+00:00', strftime('%Y-%m-%dT%H:%M:%S', {t}, 'unixepoch'), "
        "CAST(({t} - CAST({t} AS INTEGER)) * 1000000 AS INTEGER))"
    )

    def fill(self, url: str, finished: int, pending: int, pending_due: bool) -> None:
        iso = self.ISO.format
        now = time.time()
        finished_sql = f"""
            WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {finished}),
            s AS (SELECT n, n % 100 = 0 AS failed,
                         {now} - 11 * 86400 + n * (86400.0 / {finished}) AS t FROM g)
            INSERT INTO tickq_jobs (type, queue, payload, status, priority, attempts,
                max_attempts, run_after, last_error, created_at, updated_at, attempted_at,
                finished_at, duration, ahead, snoozes, lease_clock, lease_mono)
            SELECT CASE WHEN failed THEN 'flaky' ELSE 'noop' END, 'default',
                   '{{"n":' || n || '}}', CASE WHEN failed THEN 'failed' ELSE 'done' END, 0,
                   CASE WHEN failed THEN 4 ELSE 1 END, 4, {iso(t="t")},
                   CASE WHEN failed THEN '{ERROR}' END, {iso(t="t")}, {iso(t="t + 0.002")},
                   {iso(t="t + 0.001")}, {iso(t="t + 0.002")},
                   CASE WHEN failed THEN NULL ELSE 0.00005 END, 0, 0,
                   'boot:bench ' || {iso(t="t + 60.001")}, n + 60.0
            FROM s"""
        pending_at = now - 3600 if pending_due else now + 86400
        pending_sql = f"""
            WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {pending}),
            s AS (SELECT n, {now} - 60 + n * 0.0001 AS t FROM g)
            INSERT INTO tickq_jobs (type, queue, payload, status, priority, attempts,
                max_attempts, run_after, created_at, updated_at, ahead, snoozes)
            SELECT 'noop', 'default', '{{"n":' || n || '}}', 'pending', 0, 0, 4,
                   {iso(t=f"{pending_at} + n * 0.0001")}, {iso(t="t")}, {iso(t="t")}, 0, 0
            FROM s"""
        attempts_sql = """
            INSERT INTO tickq_attempts (job_id, attempt, snooze, started_at, finished_at,
                                        outcome, error, duration)
            SELECT id, a.n, 0, attempted_at, finished_at, 'error', last_error, 0.0002
            FROM tickq_jobs,
                 (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) AS a
            WHERE status = 'failed'"""
        with contextlib.closing(sqlite3.connect(sqlite_path(url), isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            if finished:
                conn.execute(finished_sql)
                conn.execute(attempts_sql)
            if pending:
                conn.execute(pending_sql)
            conn.execute("COMMIT")
            conn.execute("ANALYZE")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, server_url: str) -> None:
        import psycopg

        self.psycopg = psycopg
        self.server_url = server_url
        self.databases: list[str] = []
        self.admin(lambda conn: conn.execute("SELECT 1"))  # fails early when unreachable

    @staticmethod
    def psycopg_module() -> Any:
        import psycopg

        return psycopg

    def admin(self, action: Callable[[Any], Any]) -> Any:
        with self.psycopg.connect(self.server_url, autocommit=True, connect_timeout=5) as conn:
            return action(conn)

    def fresh(self) -> str:
        name = f"scale_{uuid.uuid4().hex[:10]}"
        self.admin(lambda conn: conn.execute(f"CREATE DATABASE {name}"))
        self.databases.append(name)
        parts = urlsplit(self.server_url)
        url = urlunsplit(parts._replace(path=f"/{name}"))
        migrated(url)
        return url

    def drop_all(self) -> None:
        for name in self.databases:
            self.admin(lambda conn, name=name: conn.execute(
                f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))  # fmt: skip
        self.databases.clear()

    def sql(self, url: str, statement: str) -> list[tuple[Any, ...]]:
        with self.psycopg.connect(url, autocommit=True) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def fill(self, url: str, finished: int, pending: int, pending_due: bool) -> None:
        finished_sql = f"""
            INSERT INTO tickq_jobs (type, queue, payload, status, priority, attempts,
                max_attempts, run_after, last_error, created_at, updated_at, attempted_at,
                finished_at, duration, ahead, snoozes)
            SELECT CASE WHEN failed THEN 'flaky' ELSE 'noop' END, 'default',
                   CAST('{{"n":' || g || '}}' AS json),
                   CASE WHEN failed THEN 'failed' ELSE 'done' END, 0,
                   CASE WHEN failed THEN 4 ELSE 1 END, 4, t,
                   CASE WHEN failed THEN %(error)s END, t, t + interval '2 ms',
                   t + interval '1 ms', t + interval '2 ms',
                   CASE WHEN failed THEN NULL ELSE 0.00005 END, 0, 0
            FROM generate_series(1, {finished}) AS g,
                 LATERAL (SELECT g %% 100 = 0 AS failed, now() - interval '11 days'
                                 + g * (interval '1 day' / {finished}) AS t) AS s"""
        pending_at = "now() - interval '1 hour'" if pending_due else "now() + interval '1 day'"
        pending_sql = f"""
            INSERT INTO tickq_jobs (type, queue, payload, status, priority, attempts,
                max_attempts, run_after, created_at, updated_at, ahead, snoozes)
            SELECT 'noop', 'default', CAST('{{"n":' || g || '}}' AS json), 'pending', 0, 0, 4,
                   {pending_at} + g * interval '100 us',
                   now() - interval '1 minute' + g * interval '100 us',
                   now() - interval '1 minute' + g * interval '100 us', 0, 0
            FROM generate_series(1, {pending}) AS g"""
        attempts_sql = """
            INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome,
                                        error, duration)
            SELECT id, a, attempted_at, finished_at, 'error', last_error, 0.0002
            FROM tickq_jobs, generate_series(1, 4) AS a WHERE status = 'failed'"""
        with self.psycopg.connect(url, autocommit=True) as conn:
            with conn.transaction():
                if finished:
                    conn.execute(finished_sql, {"error": ERROR})
                    conn.execute(attempts_sql)
                if pending:
                    conn.execute(pending_sql)
            conn.execute("VACUUM ANALYZE tickq_jobs")
            conn.execute("VACUUM ANALYZE tickq_attempts")


def migrated(url: str) -> None:
    q = Queue(url, retention=None)
    q.migrate()
    q.close()


def queue(url: str, retention: bool = False) -> Queue:
    kwargs: dict[str, Any] = {} if retention else {"retention": None}
    q = Queue(url, strict=False, **kwargs)

    @q.job(name="noop")
    def noop(n: int = 0) -> None: ...

    @q.job(name="flaky")
    def flaky(n: int = 0) -> None:
        raise ValueError("provider unreachable")

    return q


def filled(backend: Backend, rows: int, pending_due: bool = False) -> str:
    url = backend.fresh()
    started = time.perf_counter()
    backend.fill(url, finished=rows * 9 // 10, pending=rows - rows * 9 // 10,
                 pending_due=pending_due)  # fmt: skip
    print(f"(filled {rows:,} rows in {time.perf_counter() - started:.1f} s)", flush=True)
    return url


def shape(rows: int) -> str:
    finished = rows * 9 // 10
    return (f"{rows:,} rows: {finished:,} finished 10-11 days ago (1 % failed, 4 attempt rows "
            f"each), {rows - finished:,} pending due tomorrow; retention=None")  # fmt: skip


# -- sections -----------------------------------------------------------------------------
@dataclass
class Run:
    report: Report
    backend: Backend
    rows: int
    iterations: int
    rate: float
    seconds: float
    bloat_seconds: float
    big: str | None = None  # the --rows database of hot/reads/due, filled once

    def big_url(self) -> str:
        if self.big is None:
            self.big = filled(self.backend, self.rows)
        return self.big


def hot(run: Run) -> None:
    """Alternates the same four operations on the big and the small database."""
    small = filled(run.backend, SMALL)
    sizes = {"big": run.big_url(), "small": small}
    queues = {size: queue(url) for size, url in sizes.items()}
    ms: dict[tuple[str, str], list[float]] = {}
    for i in range(run.iterations + 3):  # 3 warm-up rounds; the order swaps every round
        for size, q in sorted(queues.items(), reverse=i % 2 == 1):
            for name, value in hot_round(q, i).items():
                if i >= 3:
                    ms.setdefault((size, name), []).append(value)
    for q in queues.values():
        q.close()
    name = run.backend.name
    run.report.conditions("hot", name, f"big: {shape(run.rows)}; small: {shape(SMALL)}; "
                          f"{run.iterations} rounds alternated, the first one swapped")  # fmt: skip
    for op in ("empty tick", "claim one", "enqueue one", "one-job tick"):
        for p in (50, 95):
            big, tiny = pct(ms["big", op], p), pct(ms["small", op], p)
            run.report.figure("hot", name, f"{op} p{p} at {run.rows:,}", big, "ms")
            run.report.figure("hot", name, f"{op} p{p} at {SMALL:,}", tiny, "ms")
            run.report.figure("hot", name, f"{op} p{p} ratio", big / tiny, "x")


def hot_round(q: Queue, i: int) -> dict[str, float]:
    store = q._runtime.store  # the claim alone, as a worker's loop makes it
    figures = {"empty tick": timed_ms(q.tick)}
    figures["enqueue one"] = timed_ms(lambda: q.enqueue("noop", {"n": -i}))
    figures["claim one"] = timed_ms(lambda: store.claim("bench-claimer", 1, 3600.0))
    q.enqueue("noop", {"n": -i})
    figures["one-job tick"] = timed_ms(q.tick)
    return figures


def reads(run: Run) -> None:
    from tickq.cli import main as cli
    from tickq.dashboard import Dashboard

    url = run.big_url()
    q = queue(url)
    failed = q.list_jobs(status="failed", limit=1)[0].id
    dashboard = Dashboard(q, password="bench-password")
    cli_out = io.StringIO()

    def tickq_stats() -> None:
        with contextlib.redirect_stdout(cli_out):
            if cli(["stats", "--url", url]) != 0:
                raise RuntimeError("tickq stats failed")

    calls: dict[str, Callable[[], Any]] = {
        "q.stats()": q.stats,
        "tickq stats": tickq_stats,
        "q.health()": lambda: q.health(timedelta(minutes=15), alert=False),
    }
    pages = ["/", "/jobs", "/jobs?status=pending", "/jobs?status=running",
             "/jobs?status=done", "/jobs?status=failed", "/jobs?status=cancelled",
             "/jobs?queue=default", "/jobs?queue=reports", "/jobs?type=flaky",
             "/jobs?status=failed&type=flaky", f"/jobs?q=%23{failed}",
             f"/jobs/{failed}"]  # fmt: skip
    for path in pages:
        calls[f"dashboard {path}"] = page_getter(dashboard, path)
    name = run.backend.name
    calls_each = max(5, run.iterations // 10)
    run.report.conditions("reads", name, f"{shape(run.rows)}; {calls_each} calls each after "
                          "2 warm-up calls; dashboard pages rendered in-process")  # fmt: skip
    for label, call in calls.items():
        ms = [timed_ms(call) for _ in range(calls_each + 2)][2:]
        run.report.spread("reads", name, label, ms)
    q.close()


def page_getter(dashboard: Any, path: str) -> Callable[[], None]:
    from tickq.dashboard.auth import SESSION_COOKIE
    from tickq.web.http import Headers, Request

    parts = urlsplit(path)
    cookies = {SESSION_COOKIE: dashboard.guard.open_session(), "tickq_csrf": "n"}
    headers = Headers([("cookie", "; ".join(f"{k}={v}" for k, v in cookies.items()))])

    def get() -> None:
        request = Request("GET", parts.path, "/tickq", query_string=parts.query, headers=headers)
        response = dashboard.handle(request)
        if response.status != 200:
            raise RuntimeError(f"{path} answered {response.status}: {response.body[:200]!r}")

    return get


def due(run: Run) -> None:
    url = run.big_url()
    pending = run.rows - run.rows * 9 // 10
    if run.backend.name == "sqlite":
        # tickq's text format: ISO with microseconds, due an hour ago.
        moved = ("UPDATE tickq_jobs SET run_after = strftime('%Y-%m-%dT%H:%M:%f000+00:00', "
                 "'now', '-1 hour') WHERE status = 'pending'")  # fmt: skip
    else:
        moved = (
            "UPDATE tickq_jobs SET run_after = now() - interval '1 hour' WHERE status = 'pending'"
        )
    run.backend.sql(url, moved)
    analyze = "ANALYZE" if run.backend.name == "sqlite" else "VACUUM ANALYZE tickq_jobs"
    run.backend.sql(url, analyze)
    q = queue(url)
    ms, exact, remaining = [], [], []
    for _ in range(max(3, run.iterations // 4)):
        started = time.perf_counter()
        summary = q.tick(limit=100)
        ms.append((time.perf_counter() - started) * 1000)
        (count,) = run.backend.sql(url, "SELECT count(*) FROM tickq_jobs WHERE "
                                   "status = 'pending'")[0]  # fmt: skip
        exact.append(summary["remaining_due"] == count)
        remaining.append(summary["remaining_due"])
    q.close()
    first_remaining = remaining[0]
    name = run.backend.name
    counts = "yes: remaining_due is the exact count" if all(exact) else (
        "no: remaining_due is not the exact count")  # fmt: skip
    run.report.conditions("due", name, f"{shape(run.rows)}, then its {pending:,} pending made "
                          f"due; {len(ms)} ticks of 100 no-op jobs; counts every due row: "
                          f"{counts}")  # fmt: skip
    run.report.spread("due", name, "tick(limit=100)", ms)
    run.report.figure("due", name, "remaining_due after the first tick", first_remaining, "jobs")


def drain(run: Run) -> None:
    name = run.backend.name
    jobs = 200 if run.rows < 100_000 else 5000
    backlogs = sorted({0, min(100_000, run.rows // 10), run.rows})
    run.report.conditions("drain", name, f"process_jobs(limit=100) in one thread draining "
                          f"{jobs:,} no-op jobs enqueued after a backlog of due pending "
                          "jobs (fresh database each, no finished rows)")  # fmt: skip
    for backlog in backlogs:
        url = run.backend.fresh()
        if backlog:
            run.backend.fill(url, finished=0, pending=backlog, pending_due=True)
        q = queue(url)
        q.enqueue_many([("noop", {"n": n}, {}) for n in range(jobs)])
        started, done = time.perf_counter(), 0
        while done < jobs:
            done += q.process_jobs(limit=min(100, jobs - done))["succeeded"]
        seconds = time.perf_counter() - started
        q.close()
        run.report.figure("drain", name, f"jobs/s at a backlog of {backlog:,}", jobs / seconds,
                          "jobs/s")  # fmt: skip


def steady(url: str, rate: float, seconds: float, retention: bool,
           before: Callable[[], Any] = lambda: None) -> tuple[dict[str, Any], Any]:  # fmt: skip
    """A worker thread (concurrency 4) and a producer enqueueing ``rate`` jobs/s, one at a
    time, for ``seconds``; returns {called, started: n -> epoch, wall} once every job has
    started and the worker stopped, and what ``before()`` (called once the worker ran a
    first job, just before the producer starts) returned."""
    q = queue(url, retention=retention)
    started: dict[int, float] = {}

    @q.job(name="timed")
    def timed(n: int) -> None:
        started[n] = time.time()

    producer = queue(url, retention=retention)
    stop = threading.Event()
    worker = threading.Thread(target=q.run_worker, kwargs={"stop": stop, "concurrency": 4},
                              daemon=True)  # fmt: skip
    worker.start()
    try:
        producer.enqueue("timed", {"n": -1})  # warm-up: the worker is up once it ran
        wait_for(lambda: -1 in started, 30)
        mark = before()
        called, begin, n = {}, time.monotonic(), 0
        while (elapsed := time.monotonic() - begin) < seconds:
            time.sleep(max(0.0, n / rate - elapsed))
            called[n] = time.time()
            producer.enqueue("timed", {"n": n})
            n += 1
        wait_for(lambda: all(k in started for k in called), 60)
        wall = time.monotonic() - begin
    finally:
        stop.set()
        worker.join(60)
        producer.close()
        q.close()
    return {"called": called, "started": started, "wall": wall}, mark


def wait_for(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s")
        time.sleep(0.01)


def latency(run: Run) -> None:
    name = run.backend.name
    url = run.backend.fresh()
    result, _ = steady(url, run.rate, run.seconds, retention=False)
    called, started = result["called"], result["started"]
    ms = [(started[n] - called[n]) * 1000 for n in called]
    run.report.conditions("latency", name, f"{len(ms):,} no-op jobs offered at {run.rate:g}/s "
                          "one enqueue at a time into an idle worker thread (concurrency 4), "
                          "same process; empty tables at the start")  # fmt: skip
    run.report.figure("latency", name, "enqueue -> start p50", pct(ms, 50), "ms")
    run.report.figure("latency", name, "enqueue -> start p99", pct(ms, 99), "ms")
    run.report.figure("latency", name, "completed jobs/s", len(ms) / result["wall"], "jobs/s")


# The WAL records of one database between two LSNs (pg_walinspect): those touching its
# relations, and those of the transactions that did (their commit records).
WAL_OF_DATABASE = """
    WITH r AS (SELECT CAST(xid AS text) AS x, record_length, block_ref
               FROM pg_get_wal_records_info(CAST(%(start)s AS pg_lsn), CAST(%(end)s AS pg_lsn))),
         mine AS (SELECT DISTINCT x FROM r WHERE block_ref LIKE %(rel)s AND x <> '0')
    SELECT coalesce(sum(record_length) FILTER (WHERE block_ref LIKE %(rel)s
                                               OR m.x IS NOT NULL), 0)
    FROM r LEFT JOIN mine AS m ON m.x = r.x"""


def wal(run: Run) -> None:
    """WAL and commits per completed job at a steady rate. The server's WAL holds every
    database's writes, so the figure is this database's WAL records, read back with
    pg_walinspect; a temporary physical slot keeps the run's WAL until it is read."""
    name = run.backend.name
    if name != "postgres":
        return
    url = run.backend.fresh()
    # The flush LSN: pg_walinspect refuses an end past it (others' writes may be unflushed).
    counters = ("SELECT CAST(pg_current_wal_flush_lsn() AS text), xact_commit "
                "FROM pg_stat_database WHERE datname = current_database()")  # fmt: skip

    def read() -> tuple[str, int]:
        time.sleep(1.1)  # pg_stat_database is flushed by each backend within a second
        lsn, commits = run.backend.sql(url, counters)[0]
        return str(lsn), int(commits)

    psycopg = PostgresBackend.psycopg_module()
    with psycopg.connect(url, autocommit=True) as admin:
        inspect = walinspect(admin)
        result, before = steady(url, run.rate, run.seconds, retention=False, before=read)
        after = read()
        lsn_bytes = admin.execute("SELECT pg_wal_lsn_diff(%s, %s)", (after[0], before[0]))
        server = float(lsn_bytes.fetchone()[0])
        ours = inspect(before[0], after[0]) if inspect else server
    jobs = len(result["called"])
    measured = (
        "the sum of this database's WAL records (pg_walinspect)"
        if inspect
        else "the server's LSN difference (pg_walinspect or a replication slot not allowed "
        "here), other databases' writes included"
    )
    run.report.conditions("wal", name, f"{jobs:,} jobs at {run.rate:g}/s (one enqueue each, "
                          f"a worker thread, concurrency 4, its idle polls included); WAL: "
                          f"{measured}; the server wrote {server / result['wall']:,.0f} bytes/s "
                          "meanwhile; commits: pg_stat_database.xact_commit of this database; "
                          "NOTIFY: tickq has no switch for it (one pg_notify per queue per "
                          "enqueue statement, identical ones sent once a transaction): no "
                          "on/off figure")  # fmt: skip
    run.report.figure("wal", name, "WAL bytes per completed job", ours / jobs, "bytes")
    run.report.figure("wal", name, "commits per completed job", (after[1] - before[1]) / jobs,
                      "commits")  # fmt: skip


def walinspect(admin: Any) -> Callable[[str, str], float] | None:
    """A reader of this database's WAL bytes between two LSNs, or None where pg_walinspect
    or a temporary physical slot (which keeps the run's WAL until it is read) is refused."""
    psycopg = PostgresBackend.psycopg_module()
    try:
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        slot = f"tickq_scale_{uuid.uuid4().hex[:8]}"  # dropped when admin's session ends
        admin.execute("SELECT pg_create_physical_replication_slot(%s, true, true)", (slot,))
    except psycopg.Error as exc:
        print(f"(WAL of this database not readable: {str(exc).strip()})", flush=True)
        return None
    (oid,) = admin.execute("SELECT oid FROM pg_database "
                           "WHERE datname = current_database()").fetchone()  # fmt: skip

    def read(start: str, end: str) -> float:
        params = {"start": start, "end": end, "rel": f"%/{oid}/%"}
        return float(admin.execute(WAL_OF_DATABASE, params).fetchone()[0])

    return read


def bloat(run: Run) -> None:
    name = run.backend.name
    url = run.backend.fresh()
    seconds = run.bloat_seconds
    result, _ = steady(url, run.rate, seconds, retention=True)
    jobs = len(result["called"])
    if name == "postgres":
        time.sleep(1.5)  # the worker's statistics reach pg_stat_user_tables
        settings = run.backend.sql(url, "SELECT string_agg(name || '=' || setting, ', ' "
                                   "ORDER BY name) FROM pg_settings WHERE name IN "
                                   "('autovacuum', 'autovacuum_naptime', "
                                   "'autovacuum_vacuum_scale_factor', "
                                   "'autovacuum_vacuum_threshold')")[0][0]  # fmt: skip
        options = run.backend.sql(
            url,
            "SELECT coalesce(array_to_string(reloptions, ', '), "
            "'none') FROM pg_class WHERE relname = 'tickq_jobs'",
        )[0][0]
        run.report.conditions("bloat", name, f"{jobs:,} jobs at {run.rate:g}/s for "
                              f"{seconds:g} s, worker (concurrency 4), default retention; "
                              f"server: {settings}; tickq_jobs options: {options}")  # fmt: skip
        for table in ("tickq_jobs", "tickq_attempts"):
            live, dead, vacuums = run.backend.sql(url, "SELECT n_live_tup, n_dead_tup, "
                                                  "autovacuum_count FROM pg_stat_user_tables "
                                                  f"WHERE relname = '{table}'")[0]  # fmt: skip
            heap, total = run.backend.sql(url, f"SELECT pg_relation_size('{table}'), "
                                          f"pg_total_relation_size('{table}')")[0]  # fmt: skip
            print(f"({table}: {live:,} live and {dead:,} dead tuples, autovacuumed "
                  f"{vacuums} time(s))")  # fmt: skip
            if table == "tickq_jobs":
                run.report.figure("bloat", name, f"{table} live tuples", live, "rows")
                run.report.figure("bloat", name, f"{table} dead tuples", dead, "rows")
                run.report.figure("bloat", name, f"{table} table bytes", heap, "bytes")
            run.report.figure("bloat", name, f"{table} table + index bytes", total, "bytes")
    else:
        path = sqlite_path(url)
        pages, free, size = (run.backend.sql(url, f"PRAGMA {p}")[0][0]
                             for p in ("page_count", "freelist_count", "page_size"))  # fmt: skip
        wal_file = path.with_name(path.name + "-wal")
        run.report.conditions(
            "bloat",
            name,
            f"{jobs:,} jobs at {run.rate:g}/s for "
            f"{seconds:g} s, worker (concurrency 4), default retention; "
            f"{pages:,} pages of {size:,} bytes, {free:,} of them free",
        )
        run.report.figure("bloat", name, "database file bytes", path.stat().st_size, "bytes")
        if wal_file.exists() and wal_file.stat().st_size:
            run.report.figure("bloat", name, "WAL file bytes", wal_file.stat().st_size, "bytes")


RUNNERS: dict[str, Callable[[Run], None]] = {
    "hot": hot, "reads": reads, "due": due, "drain": drain, "latency": latency, "wal": wal,
    "bloat": bloat,
}  # fmt: skip


# -- main ---------------------------------------------------------------------------------
def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--rows", type=int, help="rows of the big database (default 1,000,000)")
    parser.add_argument("--only", help=f"comma-separated sections of {', '.join(SECTIONS)}")
    parser.add_argument("--minutes", type=float, default=1.0, help="the bloat run's length")
    parser.add_argument("--rate", type=float, help="offered jobs/s (default 100; quick 50)")
    parser.add_argument("--iterations", type=int, help="timed calls each (default 200)")
    parser.add_argument("--postgres-url", default=PG_URL, help="a server to create databases on")
    args = parser.parse_args(argv)
    only = [s.strip() for s in (args.only or ",".join(SECTIONS)).split(",") if s.strip()]
    unknown = [s for s in only if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {unknown}: choose from {', '.join(SECTIONS)}")
    args.only = only
    args.rows = args.rows or (2000 if args.quick else 1_000_000)
    if args.rows < 20:
        parser.error("--rows must be at least 20")
    args.rate = args.rate or (50.0 if args.quick else 100.0)
    args.iterations = args.iterations or (8 if args.quick else 200)
    return args


def run(argv: list[str] | None = None) -> list[tuple[str, str, str, float, str]]:
    """Runs the sections asked for; returns (section, backend, figure, value, unit) rows."""
    args = parse(argv)
    report = Report()
    names = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    print(f"tickq scale bench: {os.cpu_count()} CPUs, SQLite {sqlite3.sqlite_version}, "
          f"Python {sys.version.split()[0]}, load average {load()}", flush=True)  # fmt: skip
    for backend_name in names:
        backend: Backend = (SQLiteBackend() if backend_name == "sqlite"
                            else PostgresBackend(args.postgres_url))  # fmt: skip
        if isinstance(backend, PostgresBackend):
            (version,) = backend.admin(lambda c: c.execute("SHOW server_version").fetchone())
            print(f"PostgreSQL {version} at {urlsplit(args.postgres_url).netloc}", flush=True)
        this = Run(
            report,
            backend,
            args.rows,
            args.iterations,
            args.rate,
            2.0 if args.quick else 20.0,
            2.0 if args.quick else args.minutes * 60,
        )
        try:
            for section in args.only:
                RUNNERS[section](this)
        finally:
            backend.drop_all()
    return report.figures


if __name__ == "__main__":
    run()
