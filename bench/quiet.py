"""Figure 5b: what an idle worker sends its database, with its defaults and beside the same
worker looking every ``poll_interval`` (``--idle-check`` = the poll interval: the cadence of
every version before ``idle_check``), both idle at the same time over one ``WINDOW``.

- Postgres: transactions per minute from ``pg_stat_database`` (``xact_commit +
  xact_rollback``) of a database of each worker's own, read from a connection to another
  database (so the reads count for neither). The server flushes a backend's counts within
  about 10 s of its last transaction, so each worker first idles ``SETTLE`` seconds.
  A serverless Postgres (Neon) suspends after 5 minutes without a query: ~0 lets it.
- SQLite: statements per minute, counted in the worker process by a trace callback on every
  connection it opens (``sqlite_traced.py``).
One run each, whatever ``--runs`` says: these are counts, not timings.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import procs
from databases import Database
from figures import Figure, Series

WINDOW = 60.0
SETTLE = 12.0
BASELINE = {"postgres": "5", "sqlite": "1"}
"""The baseline's ``--idle-check``: the default poll interval, how often workers looked."""


def quiet_figures(db: Database, window: float = WINDOW) -> list[Figure]:
    """``window``: seconds both workers idle (``--quick``: 10; 60 otherwise)."""
    measure = _postgres if db.dialect == "postgres" else _sqlite
    try:
        ours, before = measure(db, window)
        tickq, floor = Series([ours]), Series([before])
    except Exception as exc:
        tickq = floor = Series(error=f"{type(exc).__name__}: {exc}")
    what = "transactions (pg_stat_database)" if db.dialect == "postgres" else "SQL statements"
    return [
        Figure(
            "idle_queries",
            f"Idle worker: {what} per minute",
            db.name,
            "per minute",
            tickq,
            floor,
            note=f"`tickq worker` defaults (idle_check 300 s) beside the same worker with "
            f"--idle-check {BASELINE[db.dialect]} (a look every poll interval, as before), "
            f"both idle over the same {window:g} s; target 0",
        )
    ]


def _spawn(url: str, folder: Path, idle_check: str | None, **env: str) -> object:
    args = ["-m", "tickq", "worker", env.pop("app", "bench_app:q")]
    if idle_check:
        args += ["--idle-check", idle_check]
    return procs.spawn(args, output=folder / "worker.out", TICKQ_BENCH_URL=url,
                       TICKQ_BENCH_LOG_DIR=str(folder), **env)  # fmt: skip


def _postgres(db: Database, window: float) -> tuple[float, float]:
    import bench_app
    import psycopg

    server = getattr(db, "server_url")  # noqa: B009 (PostgresDatabase only)
    names = [f"tickq_idle_{uuid.uuid4().hex[:8]}_{k}" for k in ("ours", "before")]
    parts = urlsplit(server)
    urls = [urlunsplit(parts._replace(path=f"/{n}")) for n in names]
    with psycopg.connect(server, autocommit=True) as admin:
        for name in names:
            admin.execute(f"CREATE DATABASE {name}")
        workers = []
        try:
            for url, idle_check in zip(urls, (None, BASELINE["postgres"]), strict=True):
                q = bench_app.make_queue(url)
                q.migrate()
                q.close()
                workers.append(_spawn(url, procs.scratch("quiet-"), idle_check))
            time.sleep(SETTLE)
            first, started = _xacts(admin, names), time.monotonic()
            time.sleep(window)
            last, elapsed = _xacts(admin, names), time.monotonic() - started
        finally:
            for w in workers:
                procs.stop(w)  # type: ignore[arg-type]
            for name in names:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    ours, before = ((last[n] - first[n]) * 60 / elapsed for n in names)
    return ours, before


def _xacts(conn: object, names: list[str]) -> dict[str, int]:
    conn.execute("SELECT pg_stat_clear_snapshot()")  # type: ignore[attr-defined]
    rows = conn.execute(  # type: ignore[attr-defined]
        "SELECT datname, xact_commit + xact_rollback FROM pg_stat_database "
        "WHERE datname = ANY(%s)", (names,),
    ).fetchall()  # fmt: skip
    return {name: int(count) for name, count in rows}


def _sqlite(db: Database, window: float) -> tuple[float, float]:
    import bench_app

    folder = procs.scratch("quiet-")
    workers, traces = [], []
    try:
        for kind, idle_check in (("ours", None), ("before", BASELINE["sqlite"])):
            url = f"sqlite:///{folder / kind}.db"
            q = bench_app.make_queue(url)
            q.migrate()
            q.close()
            trace = folder / f"{kind}.trace"
            traces.append(trace)
            logs = folder / kind
            logs.mkdir()
            workers.append(_spawn(url, logs, idle_check, app="sqlite_traced:q",
                                  TICKQ_BENCH_SQL_TRACE=str(trace)))  # fmt: skip
        time.sleep(3.0)  # started and idle
        first, started = [_lines(t) for t in traces], time.monotonic()
        time.sleep(window)
        last, elapsed = [_lines(t) for t in traces], time.monotonic() - started
    finally:
        for w in workers:
            procs.stop(w)  # type: ignore[arg-type]
    ours, before = ((b - a) * 60 / elapsed for a, b in zip(first, last, strict=True))
    return ours, before


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
