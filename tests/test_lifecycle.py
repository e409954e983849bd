"""A Queue closed and used again comes back whole: its leases are still renewed.

Each job here outlives its lease (the injected clock jumps past it mid-job); a second Queue
(another owner, as another process would be) then looks for expired leases. The job must
run once, with no "stopped renewing its lease" attempt recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tickq import FrozenClock, Queue

pytestmark = pytest.mark.timeout(60)
LEASE = 3.0


def _long_job_run(db_url: str, during: Callable[[Queue], None]) -> tuple[Queue, int, list[int]]:
    clock = FrozenClock()
    q = Queue(db_url, clock=clock, lease_seconds=LEASE)
    q.migrate()
    other = Queue(db_url, clock=clock, lease_seconds=LEASE)
    ran: list[int] = []

    @q.job(max_attempts=3)
    def warm_up() -> None: ...

    @q.job(max_attempts=3)
    def long() -> None:
        ran.append(1)
        if len(ran) > 1:
            return  # run again by the other Queue: the bug; the asserts below catch it
        during(q)
        clock.advance(seconds=LEASE + 1)  # past the lease taken at the claim
        _wait_for_renewal(other, job_id, clock)
        other.process_jobs()  # another worker rescuing expired leases

    warm_up.enqueue()
    assert q.process_jobs()["succeeded"] == 1  # the lease keeper exists from here on
    q.close()
    job_id = long.enqueue()
    q.process_jobs()
    other.close()
    return q, job_id, ran


def _wait_for_renewal(other: Queue, job_id: int, clock: FrozenClock) -> None:
    """Until the keeper pushed the lease past now (it renews every LEASE / 3 seconds)."""
    deadline = time.monotonic() + 2 * LEASE
    while time.monotonic() < deadline:
        job = other.get_job(job_id)
        if job is not None and job.lease_expires_at and job.lease_expires_at > clock.now():
            return
        time.sleep(0.05)


def _ran_once(q: Queue, job_id: int, ran: list[int]) -> None:
    attempts = q.attempts(job_id)
    assert len(ran) == 1, f"the job ran {len(ran)} times: {attempts}"
    assert [a.outcome for a in attempts] == ["done"], attempts
    assert not any("stopped renewing" in (a.error or "") for a in attempts)
    q.close()


def test_a_closed_queue_still_renews_leases_when_used_again(db_url: str) -> None:
    q, job_id, ran = _long_job_run(db_url, lambda q: None)
    _ran_once(q, job_id, ran)


def test_close_from_another_thread_mid_job_keeps_renewing(db_url: str) -> None:
    def close_elsewhere(q: Queue) -> None:
        closer = threading.Thread(target=q.close)
        closer.start()
        closer.join(10)

    q, job_id, ran = _long_job_run(db_url, close_elsewhere)
    _ran_once(q, job_id, ran)


def test_close_lets_an_idle_lease_keeper_thread_end(tmp_path: object) -> None:
    q = Queue(f"sqlite:///{tmp_path}/idle.db", lease_seconds=LEASE)
    q.migrate()
    q.job(name="quick")(lambda: None)
    q.enqueue("quick")
    q.process_jobs()
    q.close()
    deadline = time.monotonic() + 5
    while q._runtime.lease_keeper._thread is not None:
        assert time.monotonic() < deadline, "the idle lease keeper thread did not end"
        time.sleep(0.02)
    q.enqueue("quick")
    assert q.process_jobs()["succeeded"] == 1
    q.close()
