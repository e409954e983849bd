"""Forgetting ``conn=`` inside your own SQLite write transaction fails fast and says so.

The lock is the caller's own: no wait can end it. tickq finds the transaction on the
calling thread's stack and refuses at once, naming the variable; a lock held by another
thread or process is still waited for, as before.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tickq import ConfigurationError, DatabaseUnavailable, Queue

FAST = 10.0  # seconds: far below the 30 s busy timeout an unnoticed own lock would cost


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    queue = Queue(f"sqlite:///{tmp_path / 'app.db'}")  # the default 30 s busy timeout
    queue.migrate()
    with sqlite3.connect(queue._store.path) as conn:  # type: ignore[attr-defined]
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
    queue.job(name="welcome")(lambda user_id: None)
    return queue


def refused(q: Queue) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as caught:
        q.enqueue("welcome", {"user_id": 1})  # conn= forgotten
    return str(caught.value), time.monotonic() - started


def test_a_sqlite3_transaction_of_the_caller_is_named_at_once(q: Queue) -> None:
    conn = sqlite3.connect(q._store.path)  # type: ignore[attr-defined]
    conn.execute("INSERT INTO users (email) VALUES ('ada@example.com')")  # opens a write txn
    message, took = refused(q)
    assert took < FAST, took
    assert "(conn in test_a_sqlite3_transaction_of_the_caller_is_named_at_once())" in message
    assert "pass conn=" in message and "conn=conn" in message
    conn.rollback()
    conn.close()
    assert q.enqueue("welcome", {"user_id": 1}) > 0, "nothing stuck afterwards"


def test_a_sqlalchemy_connection_and_session_are_found(q: Queue) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    engine = create_engine(f"sqlite:///{q._store.path}")  # type: ignore[attr-defined]
    with engine.begin() as db:
        db.execute(text("INSERT INTO users (email) VALUES ('ada@example.com')"))
        message, took = refused(q)
        assert took < FAST and "(db in test_a_sqlalchemy" in message, message
        db.rollback()
    with Session(engine) as session, session.begin():
        session.execute(text("INSERT INTO users (email) VALUES ('bob@example.com')"))
        message, took = refused(q)
        assert took < FAST and "(session in test_a_sqlalchemy" in message, message
        session.rollback()
    engine.dispose()
    assert q.stats()["by_status"]["pending"] == 0


def test_another_threads_lock_is_waited_for(q: Queue) -> None:
    """Not the caller's: the enqueue waits for the other thread's commit, then succeeds."""
    locked, release = threading.Event(), threading.Event()

    def writer() -> None:
        conn = sqlite3.connect(q._store.path)  # type: ignore[attr-defined]
        conn.execute("INSERT INTO users (email) VALUES ('ada@example.com')")
        locked.set()
        release.wait(30)
        conn.commit()
        conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    assert locked.wait(30)
    threading.Timer(0.5, release.set).start()
    assert q.enqueue("welcome", {"user_id": 1}) > 0
    thread.join(30)


def test_a_closed_connection_of_the_caller_is_no_lock(q: Queue) -> None:
    """A caller's connection closed but still in a variable holds nothing: a write that
    waits on another thread's lock looks past it (it used to raise ProgrammingError)."""
    closed = sqlite3.connect(q._store.path)  # type: ignore[attr-defined]
    closed.close()
    test_another_threads_lock_is_waited_for(q)
    assert closed is not None


def test_another_processes_lock_past_the_timeout_is_an_outage(tmp_path: Path) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'app.db'}?timeout=0.5")
    q.migrate()
    q.job(name="welcome")(lambda user_id: None)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
         "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.read()",
         q._store.path],  # type: ignore[attr-defined]
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(DatabaseUnavailable, match=r"locked by another writer for 0\.5s"):
            q.enqueue("welcome", {"user_id": 1})
    finally:
        holder.kill()
        holder.wait(10)
    assert q.enqueue("welcome", {"user_id": 1}) > 0
