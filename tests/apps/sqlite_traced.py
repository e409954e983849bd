"""The worker tests' app (``apps.worker_app``) with every SQLite statement it sends noted.

Each connection this process opens gets a trace callback that appends ``<epoch> <sql>``
to ``$TICKQ_TEST_SQL_TRACE``, so a test can see exactly what an idle worker sends.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

_open = sqlite3.connect
_lock = threading.Lock()
_path = os.environ["TICKQ_TEST_SQL_TRACE"]


def _trace(sql: str) -> None:
    line = f"{time.time():.6f} {' '.join(sql.split())}\n"
    with _lock, open(_path, "a") as f:
        f.write(line)


def _connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _open(*args, **kwargs)
    conn.set_trace_callback(_trace)
    return conn


sqlite3.connect = _connect  # type: ignore[assignment]

from apps.worker_app import q  # noqa: E402

__all__ = ["q"]
