"""Leases: renewed while a job runs, lost when someone else took the job over."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from tickq import FrozenClock, JobContext, Queue
from tickq.lease import LeaseKeeper
from tickq.store import Outcome


def test_renewed_leases_keep_a_long_job_from_being_rescued(db_url: str) -> None:
    clock = FrozenClock()
    q = Queue(db_url, clock=clock, lease_seconds=60)
    q.migrate()
    q.job(name="long")(lambda: None)
    q.enqueue("long")
    (job,) = q._store.claim(q._runtime.owner, 1, q.lease_seconds)
    keeper = LeaseKeeper(q._store, q._runtime.owner, q.lease_seconds)
    keeper.hold([job])
    for _ in range(5):  # five minutes of running, renewed every 40 s
        clock.advance(seconds=40)
        keeper.renew()
        assert q._store.rescue_expired() == []
    assert keeper.lost() == set()
    renewed = q.get_job(job.id)
    assert renewed is not None and renewed.lease_expires_at == clock.now() + timedelta(seconds=60)
    keeper.stop()


def test_a_job_taken_over_is_reported_lost(db_url: str) -> None:
    clock = FrozenClock()
    q = Queue(db_url, clock=clock)
    q.migrate()
    q.job(name="long")(lambda: None)
    q.enqueue("long")
    (job,) = q._store.claim(q._runtime.owner, 1, q.lease_seconds)
    keeper = LeaseKeeper(q._store, q._runtime.owner, q.lease_seconds)
    keeper.hold([job])
    clock.advance(seconds=61)
    assert [j.id for j in q._store.rescue_expired()] == [job.id]  # as if we had stalled
    keeper.renew()
    assert keeper.lost() == {job.id}
    keeper.drop([job])
    assert keeper.lost() == set()
    keeper.stop()


def test_a_job_recorded_while_its_lease_is_renewed_is_not_reported_lost(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The race: the keeper reads the held ids, the job's outcome is recorded (its lease
    # ends), then the keeper's renewal finds it gone. That is no loss to warn about.
    q = Queue(db_url, clock=FrozenClock())
    q.migrate()
    q.job(name="quick")(lambda: None)
    q.enqueue("quick")
    (job,) = q._store.claim(q._runtime.owner, 1, q.lease_seconds)
    keeper = LeaseKeeper(q._store, q._runtime.owner, q.lease_seconds)
    keeper.hold([job])
    keeper.finished([job])
    assert q._store.record(q._runtime.owner, [Outcome(job, "succeeded")]).succeeded
    with caplog.at_level(logging.WARNING, logger="tickq"):
        keeper.renew()
    assert keeper.lost() == set()
    assert "no longer ours" not in caplog.text
    keeper.drop([job])
    keeper.stop()
    q.close()


def test_a_renewal_confirms_the_start_of_a_long_job(db_url: str) -> None:
    """A long job's start is recorded by its lease's renewal when no round trip comes
    first: once confirmed, a kill counts its attempt (lease_expired) instead of refunding
    it; a job held but not started (waiting in line) stays refundable."""
    clock = FrozenClock()
    q = Queue(db_url, clock=clock, lease_seconds=60)
    q.migrate()
    q.job(name="long")(lambda: None)
    q.enqueue_many([("long", {})] * 3)
    running, waiting, later = q._store.claim(q._runtime.owner, 3, q.lease_seconds)
    keeper = LeaseKeeper(q._store, q._runtime.owner, q.lease_seconds)
    keeper.hold([running, waiting])
    keeper.hold([later], started=True)  # how process_jobs and ticks hold the job they run
    keeper.started(running)  # how the worker's pool reports a start
    keeper.started(waiting._replace(attempts=2))  # not the attempt held: ignored
    clock.advance(seconds=40)
    keeper.renew()
    keeper.stop()  # the process dies
    clock.advance(seconds=61)
    moved = q._store.rescue_expired()
    assert moved.refunded == {waiting.id}
    assert {j.id: j.attempts for j in moved} == {running.id: 1, waiting.id: 0, later.id: 1}
    for job, outcome in (
        (running, "lease_expired"),
        (waiting, "refunded"),
        (later, "lease_expired"),
    ):
        assert [a.outcome for a in q.attempts(job.id)] == [outcome]


def test_the_keeper_tells_a_held_job_it_was_asked_to_stop(db_url: str) -> None:
    q = Queue(db_url, clock=FrozenClock(), strict=False)
    q.migrate()
    q.enqueue("long")
    (job,) = q._store.claim(q._runtime.owner, 1, q.lease_seconds)
    ctx = JobContext.of(job)
    keeper = LeaseKeeper(q._store, q._runtime.owner, q.lease_seconds)
    keeper.hold([job])
    keeper.renew()
    assert not ctx.cancel_requested
    q.cancel(job.id)
    keeper.check_cancels()  # held for less than CANCEL_CHECK: not looked at yet
    assert not ctx.cancel_requested
    keeper.check_cancels(everything=True)  # what a NOTIFY or a file change prompts
    assert ctx.cancel_requested and keeper.lost() == set()  # still ours: it may stop
    keeper.drop([job])
    assert not ctx.cancel_requested  # the attempt is over: forgotten
    keeper.hold([job])
    keeper.renew()  # a renewal reports the request too
    assert ctx.cancel_requested
    keeper.drop([job])
    keeper.stop()
    q.close()
