"""Leases: renewed while a job runs, lost when someone else took the job over."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from tickq import FrozenClock, Queue
from tickq.lease import LeaseKeeper
from tickq.store import Outcome


def test_renewed_leases_keep_a_long_job_from_being_rescued(db_url: str) -> None:
    clock = FrozenClock()
    q = Queue(db_url, clock=clock, lease_seconds=60)
    q.migrate()
    q.job(name="long")(lambda: None)
    q.enqueue("long")
    (job,) = q.store.claim(q.owner, 1, q.lease_seconds)
    keeper = LeaseKeeper(q.store, q.owner, q.lease_seconds)
    keeper.hold([job])
    for _ in range(5):  # five minutes of running, renewed every 40 s
        clock.advance(seconds=40)
        keeper.renew()
        assert q.store.rescue_expired() == []
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
    (job,) = q.store.claim(q.owner, 1, q.lease_seconds)
    keeper = LeaseKeeper(q.store, q.owner, q.lease_seconds)
    keeper.hold([job])
    clock.advance(seconds=61)
    assert [j.id for j in q.store.rescue_expired()] == [job.id]  # as if we had stalled
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
    (job,) = q.store.claim(q.owner, 1, q.lease_seconds)
    keeper = LeaseKeeper(q.store, q.owner, q.lease_seconds)
    keeper.hold([job])
    keeper.finished([job])
    assert q.store.record(q.owner, [Outcome(job, "succeeded")]).succeeded
    with caplog.at_level(logging.WARNING, logger="tickq"):
        keeper.renew()
    assert keeper.lost() == set()
    assert "no longer ours" not in caplog.text
    keeper.drop([job])
    keeper.stop()
    q.close()
