"""A process has one lease owner and one lease keeper, whichever threads ask first.

Two threads starting ``process_jobs`` at once each made an owner of their own: one claimed
a job under its owner, the other recorded its outcome under the other, the finish's fence
refused it as stale, and the job stayed running until its lease ran out (found by
tests/test_workflows.py's racing-events test, which then timed out now and then).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tickq.runtime
from tickq import Queue


def slow_hostname(real: Any) -> Any:
    def slow() -> str:
        time.sleep(0.05)  # wide open: every thread that looks now finds no owner yet
        return str(real())

    return slow


def at_once(count: int, work: Callable[[], None]) -> None:
    """Run ``work`` on ``count`` threads that start it together; wait for them all."""
    start = threading.Barrier(count)

    def together() -> None:
        start.wait(5)
        work()

    threads = [threading.Thread(target=together) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)


@pytest.mark.timeout(30)
def test_threads_asking_at_once_get_one_owner_and_one_keeper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tickq.runtime, "_hostname", slow_hostname(tickq.runtime._hostname))
    q = Queue(f"sqlite:///{tmp_path / 'one.db'}")
    runtime = q._runtime
    owners: list[str] = []
    keepers: list[Any] = []

    def ask() -> None:
        keepers.append(runtime.lease_keeper)
        owners.append(runtime.owner)

    at_once(4, ask)
    assert len(owners) == 4 and len(set(owners)) == 1, owners
    assert len({id(k) for k in keepers}) == 1
    assert keepers[0].owner == owners[0]
    q.close()


@pytest.mark.timeout(60)
def test_two_threads_processing_from_the_start_finish_every_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tickq.runtime, "_hostname", slow_hostname(tickq.runtime._hostname))
    q = Queue(f"sqlite:///{tmp_path / 'two.db'}")
    q.migrate()
    ran: list[int] = []

    @q.job()
    def note(n: int) -> None:
        ran.append(n)

    q.enqueue_many([("note", {"n": i}) for i in range(20)])
    at_once(2, lambda: q.process_jobs(limit=20) and None)
    assert sorted(ran) == list(range(20))
    counts = q.stats()["by_status"]
    assert counts["done"] == 20 and counts["running"] == 0, counts
    q.close()
