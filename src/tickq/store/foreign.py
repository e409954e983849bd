"""Enqueue inside the caller's own transaction, on the caller's own connection.

Accepted: ``sqlite3.Connection``; psycopg 3 ``Connection`` / ``AsyncConnection``; psycopg2
connections; Django's ``connection`` / ``connections[alias]`` (its DB-API connection is
used, inside ``transaction.atomic()`` or in autocommit); SQLAlchemy ``Connection`` /
``Session`` and ``AsyncConnection`` / ``AsyncSession``. tickq never commits or rolls back a
connection it did not open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..job import NewJob
from .base import SqlStore
from .queries import load_queries

if TYPE_CHECKING:
    from .plumbing import Rows

    SyncRun = Callable[[str, dict[str, Any]], Rows]
    AsyncRun = Callable[[str, dict[str, Any]], Awaitable[Rows]]


@lru_cache
def _queries(dialect: str, paramstyle: str) -> dict[str, str]:
    return load_queries(dialect, paramstyle)


def _module(conn: Any) -> str:
    """The top-level package of the connection's class: psycopg, psycopg2, sqlalchemy..."""
    return type(conn).__module__.split(".")[0]


def _check_dialect(store: SqlStore, dialect: str, conn: Any) -> None:
    if dialect != store.dialect:
        raise ConfigurationError(
            f"conn is a {dialect} connection ({type(conn).__name__}) but this Queue stores "
            f"jobs in {store.dialect}; pass a connection to the same database as the Queue"
        )


def _unsupported(conn: Any, async_: bool) -> ConfigurationError:
    kinds = (
        "a psycopg AsyncConnection or a SQLAlchemy AsyncConnection/AsyncSession"
        if async_
        else "a sqlite3.Connection, a psycopg/psycopg2 connection, Django's connection, or a "
        "SQLAlchemy Connection/Session"
    )
    return ConfigurationError(
        f"conn= got {type(conn).__module__}.{type(conn).__name__}; expected {kinds}"
    )


def sync_runner(store: SqlStore, conn: Any) -> SyncRun:
    """A function running tickq's named queries on ``conn``, in its open transaction."""
    if _module(conn) == "django":
        conn = django_dbapi(conn)
    if isinstance(conn, sqlite3.Connection):
        _check_dialect(store, "sqlite", conn)
        q = _queries("sqlite", "named")
        return lambda name, p: conn.execute(q[name], p).fetchall()
    module = _module(conn)
    if module in ("psycopg", "psycopg2"):
        _check_dialect(store, "postgres", conn)
        q = _queries("postgres", "pyformat")

        # Never prepare on the caller's connection: behind a transaction pooler a prepared
        # statement left there would break the caller's later queries (psycopg2 never does).
        no_prepare = {"prepare": False} if module == "psycopg" else {}

        def run_psycopg(name: str, params: dict[str, Any]) -> Rows:
            with conn.cursor() as cur:
                cur.execute(q[name], params, **no_prepare)
                return cur.fetchall() if cur.description else []

        return run_psycopg
    if module == "sqlalchemy":
        return _sqlalchemy_runner(store, conn)
    raise _unsupported(conn, async_=False)


def django_dbapi(conn: Any) -> Any:
    """The DB-API connection under Django's ``connection`` (a ``ConnectionProxy``) or
    ``connections[alias]``, connected if need be; it carries Django's open transaction."""
    wrapper = getattr(conn, "_connections", None)
    if wrapper is not None:  # django.utils.connection.ConnectionProxy
        conn = wrapper[conn._alias]
    if not hasattr(conn, "ensure_connection"):
        raise _unsupported(conn, async_=False)
    conn.ensure_connection()
    return conn.connection


def _sqlalchemy_runner(store: SqlStore, conn: Any) -> SyncRun:
    from sqlalchemy import text

    connection = conn.connection() if hasattr(conn, "get_bind") else conn
    dialect = _sqlalchemy_dialect(connection.dialect.name)
    _check_dialect(store, dialect, conn)
    q = _queries(dialect, "named")
    return lambda name, p: [tuple(r) for r in connection.execute(text(q[name]), p).fetchall()]


def _sqlalchemy_dialect(name: str) -> str:
    return {"postgresql": "postgres", "sqlite": "sqlite"}.get(name, name)


def async_runner(store: SqlStore, conn: Any) -> AsyncRun:
    module = _module(conn)
    if module == "psycopg":
        _check_dialect(store, "postgres", conn)
        q = _queries("postgres", "pyformat")

        async def run_psycopg(name: str, params: dict[str, Any]) -> Rows:
            async with conn.cursor() as cur:
                await cur.execute(q[name], params, prepare=False)  # as in sync_runner
                return await cur.fetchall() if cur.description else []

        return run_psycopg
    if module == "sqlalchemy":
        from sqlalchemy import text

        async def run_sqlalchemy(name: str, params: dict[str, Any]) -> Rows:
            connection = await conn.connection() if hasattr(conn, "get_bind") else conn
            dialect = _sqlalchemy_dialect(connection.dialect.name)
            _check_dialect(store, dialect, conn)
            result = await connection.execute(text(_queries(dialect, "named")[name]), params)
            return [tuple(r) for r in result.fetchall()]

        return run_sqlalchemy
    raise _unsupported(conn, async_=True)


def insert_on(store: SqlStore, conn: Any, jobs: Sequence[NewJob]) -> list[int]:
    """Insert ``jobs`` on the caller's connection; unique clashes yield the existing id."""
    run = sync_runner(store, conn)
    ids = []
    for job in jobs:
        params = store._insert_params(job)
        rows = run("insert", params)
        for _ in range(5):
            if rows:
                break
            rows = run("find_unique", params) or run("insert", params)
        ids.append(int(rows[0][0]))
    store._announce(jobs)
    return ids


def created_at_on(store: SqlStore, conn: Any, job_id: int) -> Any:
    """When job ``job_id`` was stored (its ``created_at``), read on the caller's connection,
    where the row may not be committed yet; None if there is no such job."""
    rows = sync_runner(store, conn)("created_at", {"id": job_id})
    return store._decode_ts(rows[0][0]) if rows else None


async def insert_on_async(store: SqlStore, conn: Any, jobs: Sequence[NewJob]) -> list[int]:
    """The async twin of ``insert_on``."""
    run = async_runner(store, conn)
    ids = []
    for job in jobs:
        params = store._insert_params(job)
        rows = await run("insert", params)
        for _ in range(5):
            if rows:
                break
            rows = await run("find_unique", params) or await run("insert", params)
        ids.append(int(rows[0][0]))
    store._announce(jobs)
    return ids
