"""``snoozed``: a run that raised ``Snooze`` goes back to pending with its attempt given back,
is counted as a snooze (not an attempt, never a failure) and keeps its place in the history."""

from __future__ import annotations

from datetime import timedelta

from tickq import FrozenClock, Job, JobState
from tickq.store import Outcome, SqlStore

from .conftest import LEASE, OWNER, claim_ahead, job_in, new_job


def snooze(store: SqlStore, job: Job, seconds: float) -> Job:
    [back] = store.record(OWNER, [Outcome(job, "snoozed", None, seconds, 0.25)]).snoozed
    return back


def claim(store: SqlStore) -> Job:
    [job] = store.claim(OWNER, 1, LEASE)
    return job


def test_a_snooze_gives_the_attempt_back_and_waits_as_a_row(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, max_attempts=1)
    first = clock.now()
    back = snooze(store, job, 600)
    assert (back.status, back.attempts, back.snoozes) == (JobState.PENDING, 0, 1)
    assert back.run_after == first + timedelta(seconds=600)
    assert back.snoozed_since == first
    assert back.lease_owner is None and back.lease_expires_at is None
    assert back.finished_at is None and back.last_error is None
    assert store.claim(OWNER, 1, LEASE) == []  # not due yet
    clock.advance(seconds=600)
    again = claim(store)
    assert (again.attempts, again.snoozes, again.snoozed_since) == (1, 1, first)
    clock.advance(seconds=5)
    later = snooze(store, again, 60)
    assert later.snoozes == 2 and later.snoozed_since == first  # the first snooze stays


def test_snoozed_runs_are_in_the_history_before_the_attempt_they_share_a_number_with(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING)
    for _ in range(2):
        clock.advance(seconds=1)
        snooze(store, job, 0)
        job = claim(store)
    clock.advance(seconds=1)
    store.record(OWNER, [Outcome(job, "retried", "ValueError: boom", 0.0, 0.5)])
    job = claim(store)
    clock.advance(seconds=1)
    snooze(store, job, 0)
    job = claim(store)
    history = [(a.attempt, a.outcome) for a in store.attempts(job.id)]
    assert history == [(1, "snoozed"), (1, "snoozed"), (1, "error"), (2, "snoozed"),
                       (2, "running")]  # fmt: skip
    first = store.attempts(job.id)[0]
    assert first.error is None and first.seconds == 0.25
    assert store.record(OWNER, [Outcome(job, "succeeded")]).succeeded == [job]
    assert [a.outcome for a in store.attempts(job.id)][-1] == "done"


def test_a_snooze_is_counted_as_processed_but_never_as_a_failure(
    store: SqlStore, clock: FrozenClock
) -> None:
    start = clock.now()
    job = job_in(store, JobState.RUNNING)
    for _ in range(3):
        snooze(store, job, 0)
        job = claim(store)
    store.record(OWNER, [Outcome(job, "succeeded", None, 0.0, 0.1)])
    stats = store.stats()
    assert stats["processed"]["default"]["send"] == {"snoozed": 3, "done": 1}
    assert stats["failed_attempts_last_hour"] == 0
    window = store.failure_summary("send", start, clock.now() + timedelta(seconds=1))
    assert window["failed_attempts"] == 0 and window["failed_jobs"] == 0
    clock.advance(days=2)
    assert store.prune(timedelta(days=1)) == 1
    after = store.stats()["processed"]["default"]["send"]
    assert after == {"snoozed": 3, "done": 1}  # rolled up into the totals when pruned


def test_the_backlog_says_when_a_snoozed_job_comes_due(store: SqlStore, clock: FrozenClock) -> None:
    job = job_in(store, JobState.RUNNING)
    snooze(store, job, 900)
    due, earliest, _ = store.tick_backlog()
    assert due == 0 and earliest == clock.now() + timedelta(seconds=900)
    assert store.due_in() == 900


def test_a_retry_by_hand_starts_a_new_max_snooze_and_keeps_the_count(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, max_attempts=1)
    snooze(store, job, 0)
    job = claim(store)
    store.record(OWNER, [Outcome(job, "failed", "SnoozeLimitExceeded: too long")])
    again = store.retry(job.id)
    assert (again.snoozes, again.snoozed_since) == (1, None)
    job = claim(store)
    store.record(OWNER, [Outcome(job, "failed", "SnoozeLimitExceeded: too long")])
    [retried_id] = store.retry_failed()
    after = store.get(retried_id)
    assert after is not None and (after.snoozes, after.snoozed_since) == (1, None)


def test_a_job_once_refunded_is_still_never_claimed_ahead_after_a_snooze(
    store: SqlStore, clock: FrozenClock
) -> None:
    store.insert([new_job()])
    [job] = claim_ahead(store)
    clock.advance(seconds=LEASE + 1)
    assert job.id in store.rescue_expired().refunded
    job = claim(store)
    snooze(store, job, 0)
    assert store.record_and_claim(OWNER, [], 0, LEASE, ahead=1)[1] == []
    assert claim(store).id == job.id


def test_a_snoozed_job_claimed_ahead_may_be_claimed_ahead_again(store: SqlStore) -> None:
    store.insert([new_job()])
    [job] = claim_ahead(store)
    store.record_and_claim(OWNER, [], 0, LEASE, started=[job])
    snooze(store, job, 0)
    assert [j.id for j in claim_ahead(store)] == [job.id]


def test_jobs_enqueued_before_any_snooze_read_as_never_snoozed(store: SqlStore) -> None:
    [job_id] = store.insert([new_job()])
    job = store.get(job_id)
    assert job is not None and (job.snoozes, job.snoozed_since) == (0, None)
