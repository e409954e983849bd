"""SQLite workers hear other processes' enqueues: a file watch (inotify on Linux, polling
``PRAGMA data_version`` without it) tells the listener when another connection committed.
Real files, real processes; nothing here times anything, the poll interval is just long."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickq import Queue
from tickq.store import filewatch
from workerproc import WorkerProcess, eventually, runs

pytestmark = pytest.mark.timeout(90)


class Heard:
    """What a listener called ``wake`` with, with a way to wait for more."""

    def __init__(self) -> None:
        self.calls: list[set[str] | None] = []
        self._changed = threading.Condition()

    def __call__(self, queues: set[str] | None) -> None:
        with self._changed:
            self.calls.append(queues)
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 10) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self.calls) >= count, timeout)


@pytest.fixture
def q(tmp_path: Path) -> Iterator[Queue]:
    queue = Queue(f"sqlite:///{tmp_path / 'app.db'}", strict=False)
    queue.migrate()
    yield queue
    queue.close()


@pytest.fixture
def listening(q: Queue) -> Iterator[Heard]:
    heard, stop = Heard(), threading.Event()
    thread = threading.Thread(target=q._store.listen, args=(heard, stop), daemon=True)
    thread.start()
    assert heard.wait_for(1), "the listener never said it was listening"
    yield heard
    stop.set()
    thread.join(10)
    assert not thread.is_alive(), "the listener did not stop"


def enqueue_from_another_process(q: Queue, count: int = 1) -> None:
    code = (
        "import sys; from tickq import Queue; q = Queue(sys.argv[1], strict=False); "
        f"q.enqueue_many([('work', {{}})] * {count})"
    )
    subprocess.run([sys.executable, "-c", code, q._store.url], check=True, timeout=60)


def test_listener_wakes_for_another_process_commit_and_not_otherwise(
    q: Queue, listening: Heard
) -> None:
    assert listening.calls == [None]
    rolled_back = 1.0  # long enough for the watch to hear the rollback's writes
    with q._store._connection() as conn:  # not wake on a transaction rolled back
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM tickq_jobs")
        conn.execute("ROLLBACK")
    assert not listening.wait_for(2, timeout=rolled_back)
    enqueue_from_another_process(q)
    assert listening.wait_for(2), "another process's commit went unheard"
    assert listening.calls[1] is None  # anything may be due: the worker looks


def test_without_inotify_the_listener_polls_data_version(
    q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filewatch.FileWatch, "_load", lambda self: None)
    heard, stop = Heard(), threading.Event()
    thread = threading.Thread(target=q._store.listen, args=(heard, stop), daemon=True)
    thread.start()
    try:
        assert heard.wait_for(1)
        enqueue_from_another_process(q)
        assert heard.wait_for(2), "polling data_version missed another process's commit"
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_the_watch_survives_a_checkpoint_truncating_the_wal(q: Queue, listening: Heard) -> None:
    q.close()  # the listener's own connection keeps the -wal; checkpoint and truncate it
    with q._store._connection() as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    enqueue_from_another_process(q)
    assert listening.wait_for(2)
    enqueue_from_another_process(q)
    assert listening.wait_for(3)


def test_idle_sqlite_worker_starts_another_process_job_before_its_poll(
    q: Queue, tmp_path: Path
) -> None:
    env = {"TICKQ_DATABASE_URL": q._store.url, "TICKQ_TEST_RUNS": str(tmp_path)}
    with WorkerProcess("--poll-interval", "600", **env) as w:
        w.wait_for_line("listening for enqueues")
        assert "PRAGMA data_version" in w.wait_for_line("wake-up on")
        # Only hearing the commit can start this job before the 600 s poll interval.
        enqueue_from_another_process(q)
        eventually(lambda: q.stats()["by_status"]["done"] == 1, what="the job to run")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output


def test_two_workers_on_one_file_each_hear_enqueues(q: Queue, tmp_path: Path) -> None:
    env = {"TICKQ_DATABASE_URL": q._store.url, "TICKQ_TEST_RUNS": str(tmp_path)}
    args = ("--poll-interval", "600", "--concurrency", "1")
    with WorkerProcess(*args, **env) as first, WorkerProcess(*args, **env) as second:
        for w in (first, second):
            w.wait_for_line("listening for enqueues")
        # A long job keeps one worker busy; the other must hear the next enqueue itself.
        busy = q.enqueue("work", {"seconds": 3})
        eventually(lambda: any(n["id"] == busy for n in runs(tmp_path)), what="the long job")
        enqueue_from_another_process(q, count=3)
        eventually(lambda: q.stats()["by_status"]["done"] == 4, what="every job to run")
        for w in (first, second):
            w.send(signal.SIGTERM)
            assert w.wait() == 0, w.output
            # Each heard the other's commits, and said it was listening once, not per commit.
            assert w.output.count("listening for enqueues") == 1, w.output
    starts = [(n["id"], n["pid"]) for n in runs(tmp_path) if n["event"] == "start"]
    assert len(starts) == 4 and len({i for i, _ in starts}) == 4  # each job ran once
    assert {pid for _, pid in starts} == {first.pid, second.pid}
