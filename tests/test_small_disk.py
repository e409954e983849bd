"""SQLite on a small disk that fills up recovers once space is freed: the write-ahead log
is checkpointed and truncated instead of keeping the space it took (issue 23, 5).

A real tmpfs of 8 MB (mounting it needs root; in CI a non-root run fails instead of
skipping), a real ``tickq worker`` process."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickq import DatabaseUnavailable, Queue
from tickq.cli.inspection import render_stats
from tickq.store.wal import JOURNAL_SIZE_LIMIT
from workerproc import WorkerProcess, eventually, runs

APP = "apps.clock_app:q"
BLOB = "x" * 2000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the small-disk tests mount a tmpfs: run them as root in CI")
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(q: Queue) -> list[int]:
    """Enqueue ``carry`` jobs 50 at a time, then one at a time, until not even one fits
    (tickq refuses a write the disk has no room to checkpoint); their ids."""
    ids: list[int] = []
    for batch in (50, 1):
        while True:
            try:
                ids += q.enqueue_many([("carry", {"blob": BLOB})] * batch)
            except DatabaseUnavailable as exc:
                assert "full" in str(exc), exc
                break
    return ids


def free_bytes(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


@pytest.mark.timeout(120)
def test_a_worker_on_a_full_disk_drains_once_space_is_freed(
    small_disk: Path, tmp_path: Path
) -> None:
    (tmp_path / "runs").mkdir()
    url = f"sqlite:///{small_disk / 'q.db'}"
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * 1_500_000)
    q = Queue(url, strict=False, lease_seconds=60)
    q.migrate()
    ids = fill(q)
    assert free_bytes(small_disk) < 100_000 and len(ids) > 500
    env = {"TICKQ_DATABASE_URL": url, "TICKQ_TEST_RUNS": str(tmp_path / "runs"),
           "TICKQ_TEST_LEASE": "60"}  # fmt: skip
    with WorkerProcess("--concurrency", "4", "--poll-interval", "0.2", app=APP, **env) as w:
        w.wait_for_line("worker")
        filler.unlink()  # the operator frees 1.5 MB
        eventually(lambda: q.stats()["by_status"]["done"] == len(ids), timeout=60,
                   what="every job enqueued before the disk filled to be done")  # fmt: skip
        # The log gave back what it took: the freed room takes 200 more, 50 at a time.
        more = [i for _ in range(4) for i in q.enqueue_many([("carry", {"blob": BLOB})] * 50)]
        eventually(lambda: q.stats()["by_status"]["done"] == len(ids) + 200, timeout=60,
                   what="the jobs enqueued after recovery to be done")  # fmt: skip
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    assert "unexpected" not in w.output and "Traceback" not in w.output, w.output
    ran = Counter(n["id"] for n in runs(tmp_path / "runs") if n["event"] == "start")
    assert ran == Counter(dict.fromkeys(ids + more, 1)), "a job ran twice, or never"
    database = q.stats()["database"]
    assert database["wal_bytes"] <= JOURNAL_SIZE_LIMIT + 1_000_000, database
    assert database["disk_free_bytes"] == pytest.approx(free_bytes(small_disk), abs=500_000)
    assert "write-ahead log: 0." in render_stats(q.stats())  # what `tickq stats` prints
    q.close()


@pytest.mark.timeout(120)
def test_a_write_the_freed_room_cannot_checkpoint_is_refused_and_the_queue_goes_on(
    small_disk: Path, tmp_path: Path
) -> None:
    """One batch of jobs that fits in the freed room once (in the log) but not twice (the
    checkpoint copies it into the database file) would, committed, wait in the log for a
    checkpoint that can never finish, and no write after it could succeed. It is refused."""
    (tmp_path / "runs").mkdir()
    url = f"sqlite:///{small_disk / 'q.db'}"
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * 1_500_000)
    q = Queue(url, strict=False, lease_seconds=60)
    q.migrate()
    ids = fill(q)
    env = {"TICKQ_DATABASE_URL": url, "TICKQ_TEST_RUNS": str(tmp_path / "runs"),
           "TICKQ_TEST_LEASE": "60"}  # fmt: skip
    with WorkerProcess("--concurrency", "4", "--poll-interval", "0.2", app=APP, **env) as w:
        w.wait_for_line("worker")
        filler.unlink()
        eventually(lambda: q.stats()["by_status"]["done"] == len(ids), timeout=60,
                   what="every job enqueued before the disk filled to be done")  # fmt: skip
        # A job takes a 4 KiB page: this batch needs 3/4 of the free room, in the log and
        # again in the database file.
        big = int(0.75 * free_bytes(small_disk) / 4096)
        with pytest.raises(DatabaseUnavailable, match=r"disk full \(nearly"):
            q.enqueue_many([("carry", {"blob": BLOB})] * big)
        more = [i for _ in range(2) for i in q.enqueue_many([("carry", {"blob": BLOB})] * 50)]
        eventually(lambda: q.stats()["by_status"]["done"] == len(ids) + 100, timeout=60,
                   what="the jobs enqueued after the refused batch to be done")  # fmt: skip
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    ran = Counter(n["id"] for n in runs(tmp_path / "runs") if n["event"] == "start")
    assert ran == Counter(dict.fromkeys(ids + more, 1)), "a job ran twice, or never"
    assert q.stats()["by_status"].get("queued", 0) == 0  # nothing of the refused batch
    q.close()
