"""Enqueue in the caller's transaction: commit -> job, roll back -> no job."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tickq import ConfigurationError, Queue

JOB = "send_welcome_email"


@pytest.fixture
def q(queue: Queue) -> Queue:
    queue.job(name=JOB)(lambda user_id: None)
    return queue


def pending(q: Queue) -> int:
    return int(q.stats()["by_status"]["pending"])


def sqlalchemy_url(q: Queue, driver: str) -> str:
    scheme, rest = q.url.split("://", 1)
    return f"{'sqlite' if scheme == 'sqlite' else 'postgresql'}+{driver}://{rest}"


@contextmanager
def sqlite3_conn(q: Queue) -> Iterator[Any]:
    conn = sqlite3.connect(q._store.path)  # type: ignore[attr-defined]
    yield conn
    conn.close()


@contextmanager
def psycopg3_conn(q: Queue) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(q.url) as conn:
        yield conn


@contextmanager
def psycopg2_conn(q: Queue) -> Iterator[Any]:
    import psycopg2

    conn = psycopg2.connect(q.url)
    yield conn
    conn.close()


@contextmanager
def sqlalchemy_connection(q: Queue) -> Iterator[Any]:
    from sqlalchemy import create_engine

    engine = create_engine(
        sqlalchemy_url(q, "pysqlite" if q._store.dialect == "sqlite" else "psycopg")
    )
    with engine.connect() as conn:
        yield conn
    engine.dispose()


@contextmanager
def sqlalchemy_session(q: Queue) -> Iterator[Any]:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    engine = create_engine(
        sqlalchemy_url(q, "pysqlite" if q._store.dialect == "sqlite" else "psycopg")
    )
    with Session(engine) as session:
        yield session
    engine.dispose()


SYNC_KINDS: dict[str, tuple[str | None, Callable[[Queue], Any]]] = {
    "sqlite3": ("sqlite", sqlite3_conn),
    "psycopg3": ("postgres", psycopg3_conn),
    "psycopg2": ("postgres", psycopg2_conn),
    "sqlalchemy-connection": (None, sqlalchemy_connection),
    "sqlalchemy-session": (None, sqlalchemy_session),
}


SYNC_CASES = [
    (backend, kind)
    for kind, (only, _) in SYNC_KINDS.items()
    for backend in ("sqlite", "postgres")
    if only in (None, backend)
]


@pytest.mark.parametrize(("backend", "kind"), SYNC_CASES)
def test_sync_connections_commit_and_roll_back_with_the_caller(q: Queue, kind: str) -> None:
    with SYNC_KINDS[kind][1](q) as conn:
        job_id = q.enqueue(JOB, {"user_id": 1}, conn=conn)
        assert pending(q) == 0, "not visible before the caller commits"
        conn.commit()
        assert pending(q) == 1 and q.get_job(job_id) is not None
        q.enqueue(JOB, {"user_id": 2}, conn=conn)
        q.enqueue_many([(JOB, {"user_id": 3}), (JOB, {"user_id": 4})], conn=conn)
        conn.rollback()
        assert pending(q) == 1, "rolled back: no job"
        unique = q.enqueue(JOB, {"user_id": 5}, conn=conn, unique_key="u5")
        assert q.enqueue(JOB, {"user_id": 5}, conn=conn, unique_key="u5") == unique
        conn.commit()
    assert pending(q) == 2
    assert q.process_jobs()["succeeded"] == 2


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_guides_signup_rolls_back_user_and_job_together(q: Queue) -> None:
    with sqlite3_conn(q) as app:
        app.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT UNIQUE)")
        for _ in range(2):
            try:
                with app:
                    cur = app.execute("INSERT INTO users (email) VALUES ('a@example.com')")
                    q.enqueue(JOB, {"user_id": cur.lastrowid}, conn=app)
            except sqlite3.IntegrityError:
                pass
        assert app.execute("SELECT count(*) FROM users").fetchone()[0] == 1
    assert pending(q) == 1


async def _async_roundtrip(q: Queue, kind: str) -> None:
    if kind == "psycopg3-async":
        import psycopg

        conn = await psycopg.AsyncConnection.connect(q.url)
        try:
            await q.enqueue_async(JOB, {"user_id": 1}, conn=conn)
            await conn.commit()
            await q.enqueue_async(JOB, {"user_id": 2}, conn=conn)
            await conn.rollback()
        finally:
            await conn.close()
        return
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    driver = "aiosqlite" if q._store.dialect == "sqlite" else "asyncpg"
    url = sqlalchemy_url(q, driver)
    if driver == "asyncpg":  # asyncpg takes server settings, not libpq options
        url = url.split("?")[0]
        schema = q.url.split("search_path%3D")[1]
        engine = create_async_engine(url, connect_args={"server_settings": {"search_path": schema}})
    else:
        engine = create_async_engine(url)
    try:
        if kind == "sqlalchemy-async-connection":
            async with engine.connect() as aconn:
                await q.enqueue_async(JOB, {"user_id": 1}, conn=aconn)
                await aconn.commit()
                await q.enqueue_async(JOB, {"user_id": 2}, conn=aconn)
                await aconn.rollback()
        else:
            async with AsyncSession(engine) as session:
                await q.enqueue_async(JOB, {"user_id": 1}, conn=session)
                await session.commit()
                await q.enqueue_async(JOB, {"user_id": 2}, conn=session)
                await session.rollback()
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("backend", "kind"),
    [("postgres", "psycopg3-async")]
    + [(b, k) for b in ("sqlite", "postgres")
       for k in ("sqlalchemy-async-connection", "sqlalchemy-async-session")],
)  # fmt: skip
def test_async_connections_commit_and_roll_back_with_the_caller(q: Queue, kind: str) -> None:
    asyncio.run(_async_roundtrip(q, kind))
    assert pending(q) == 1


def test_enqueue_async_without_conn_uses_tickqs_connection(q: Queue) -> None:
    fn = q._definition(JOB)
    assert fn is not None
    job_id = asyncio.run(q.enqueue_async(JOB, {"user_id": 7}))
    assert q.get_job(job_id) is not None


def test_a_connection_to_the_other_database_kind_is_refused(q: Queue, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if q._store.dialect == "postgres":
        conn = sqlite3.connect(tmp_path / "other.db")
        with pytest.raises(
            ConfigurationError, match=r"sqlite connection .* stores jobs in postgres"
        ):
            q.enqueue(JOB, {"user_id": 1}, conn=conn)
    else:
        with pytest.raises(ConfigurationError, match=r"expected a sqlite3.Connection"):
            q.enqueue(JOB, {"user_id": 1}, conn=object())
