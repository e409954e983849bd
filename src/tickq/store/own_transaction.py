"""Find the caller's own open write transaction on a SQLite file (the forgotten ``conn=``).

SQLite has one writer at a time. Code that writes in its own transaction and then calls
``enqueue()`` without ``conn=`` makes tickq wait for a lock that its own thread holds and
cannot release until tickq returns: a wait that can only time out. When a write waits,
tickq looks through the calling thread's stack for a connection holding a transaction on
the same file: a ``sqlite3.Connection``, a SQLAlchemy ``Connection`` or ``Session``. Only
on that slow path; the cost is a few microseconds per frame.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from contextlib import suppress
from typing import Any


def own_transaction(path: str, ours: sqlite3.Connection) -> str | None:
    """``"conn in signup()"``: a variable on this thread's stack holding an open transaction
    on the SQLite file ``path`` (other than tickq's own ``ours``), or None."""
    try:
        target = _identity(path)
    except OSError:
        return None
    seen = {id(ours)}
    frame = sys._getframe(1)
    while frame is not None:
        for name, value in list(frame.f_locals.items()):
            conn = _sqlite_connection(value)
            if conn is None or id(conn) in seen:
                continue
            seen.add(id(conn))
            if _in_transaction(conn) and _file_of(conn) == target:
                return f"{name} in {frame.f_code.co_name}()"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _in_transaction(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.ProgrammingError:  # closed: it holds no lock
        return False


def _identity(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def _file_of(conn: sqlite3.Connection) -> tuple[int, int] | None:
    with suppress(sqlite3.Error, OSError):
        for _, name, file in conn.execute("PRAGMA database_list").fetchall():
            if name == "main" and file:
                return _identity(file)
    return None


def _sqlite_connection(value: Any) -> sqlite3.Connection | None:
    """The DB-API sqlite3 connection behind ``value``, if it is one or wraps one."""
    if isinstance(value, sqlite3.Connection):
        return value
    if not type(value).__module__.startswith("sqlalchemy."):
        return None
    with suppress(Exception):  # a closed or invalidated object holds no lock
        if callable(getattr(value, "get_bind", None)):  # a Session
            if not value.in_transaction():
                return None
            value = value.connection()
        if value.closed or value.invalidated:
            return None
        dbapi = value.connection.dbapi_connection
        return dbapi if isinstance(dbapi, sqlite3.Connection) else None
    return None
