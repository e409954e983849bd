"""``bench_app`` with every SQLite statement this process sends counted: each connection
gets a trace callback appending one line per statement to ``$TICKQ_BENCH_SQL_TRACE``
(``tickq worker sqlite_traced:q``; see ``quiet.py``)."""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any

_open = sqlite3.connect
_lock = threading.Lock()
_path = os.environ["TICKQ_BENCH_SQL_TRACE"]


def _trace(sql: str) -> None:
    with _lock, open(_path, "a") as f:
        f.write(" ".join(sql.split())[:200] + "\n")


def _connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _open(*args, **kwargs)
    conn.set_trace_callback(_trace)
    return conn


sqlite3.connect = _connect  # type: ignore[assignment]

from bench_app import q  # noqa: E402

__all__ = ["q"]
