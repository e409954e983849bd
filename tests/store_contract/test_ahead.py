"""Jobs claimed ahead: a rescue refunds the attempt of one that never said it started, once;
a job once refunded is never claimed ahead again; a late ``started`` changes nothing."""

from __future__ import annotations

from tickq import FrozenClock, Job, JobState
from tickq.store import Outcome, SqlStore

from .conftest import LEASE, OWNER, claim_ahead, job_in, new_job


def expire(store: SqlStore, clock: FrozenClock) -> tuple[list[Job], set[int]]:
    clock.advance(seconds=LEASE + 1)
    moved = store.rescue_expired()
    return list(moved), moved.refunded


def started(store: SqlStore, jobs: list[Job], owner: str = OWNER) -> list[int]:
    return store.record_and_claim(owner, [], 0, LEASE, started=jobs)[0].started


def test_a_job_claimed_ahead_that_never_started_is_refunded_once(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, max_attempts=1, ahead=True)
    [back], refunded = expire(store, clock)
    assert refunded == {job.id}
    assert (back.status, back.attempts, back.lease_owner) == (JobState.PENDING, 0, None)
    assert back.last_error is None and store.attempts(job.id) == []  # no attempt happened
    assert claim_ahead(store, 10) == []  # never claimed ahead again
    [again] = store.claim(OWNER, 10, LEASE)  # but claimed to start at once, it runs
    assert (again.id, again.attempts) == (job.id, 1)
    moved, refunded = expire(store, clock)
    assert refunded == set() and [(j.id, j.status) for j in moved] == [(job.id, JobState.FAILED)]
    assert [a.outcome for a in store.attempts(job.id)] == ["lease_expired"]


def test_a_refunded_job_claimed_again_stays_out_of_claims_ahead(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, max_attempts=3, ahead=True)
    expire(store, clock)
    [again] = store.claim(OWNER, 1, LEASE)
    store.record(OWNER, [Outcome(again, "retried", "E: x", 0.0)])
    clock.advance(seconds=1)
    assert claim_ahead(store, 10) == []  # still pending, still marked
    assert store.release(OWNER, store.claim(OWNER, 1, LEASE)) == [job.id]
    assert claim_ahead(store, 10) == []  # a release keeps the mark too


def test_a_started_job_is_rescued_with_its_attempt_counted(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, ahead=True)
    assert started(store, [job]) == [job.id]
    assert started(store, [job]) == []  # once
    [back], refunded = expire(store, clock)
    assert refunded == set() and (back.status, back.attempts) == (JobState.PENDING, 1)
    assert [a.outcome for a in store.attempts(job.id)] == ["lease_expired"]


def test_a_late_start_after_a_rescue_changes_nothing(store: SqlStore, clock: FrozenClock) -> None:
    job = job_in(store, JobState.RUNNING, ahead=True)
    expire(store, clock)
    row, history = store.get(job.id), store.attempts(job.id)
    assert started(store, [job]) == []
    assert store.get(job.id) == row and store.attempts(job.id) == history
    # Claimed again by the same owner with the same attempt number: still not ours to mark.
    [again] = store.claim(OWNER, 1, LEASE)
    assert again.attempts == job.attempts
    assert started(store, [job]) == []
    assert started(store, [job], owner="worker-b") == []
    moved, refunded = expire(store, clock)
    assert refunded == set() and [j.attempts for j in moved] == [1]  # counted, not refunded


def test_only_the_holder_records_a_start(store: SqlStore, clock: FrozenClock) -> None:
    job = job_in(store, JobState.RUNNING, ahead=True)
    assert started(store, [job], owner="worker-b") == []
    assert started(store, [job._replace(attempts=job.attempts + 1)]) == []
    _, refunded = expire(store, clock)
    assert refunded == {job.id}


def test_a_normal_claim_is_never_refunded(store: SqlStore, clock: FrozenClock) -> None:
    job = job_in(store, JobState.RUNNING)
    assert started(store, [job]) == []  # nothing to mark
    [back], refunded = expire(store, clock)
    assert refunded == set() and back.attempts == 1


def test_claims_for_free_slots_come_first_then_those_ahead(
    store: SqlStore, clock: FrozenClock
) -> None:
    ids = store.insert([new_job(priority=p) for p in (0, 9, 5, 1, 3)])
    recorded, jobs = store.record_and_claim(OWNER, [], 2, LEASE, ahead=2)
    assert [j.id for j in jobs] == [ids[1], ids[2], ids[4], ids[3]]  # claim order
    assert recorded.ahead == {ids[4], ids[3]}
    assert [j.attempts for j in jobs] == [1, 1, 1, 1]
    moved, refunded = expire(store, clock)
    assert refunded == {ids[4], ids[3]} and len(moved) == 4


def test_a_released_job_claimed_ahead_can_be_claimed_ahead_again(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, ahead=True)
    assert store.release(OWNER, [job]) == [job.id]
    assert store.get(job.id).attempts == 0  # type: ignore[union-attr]
    [again] = claim_ahead(store)
    assert again.id == job.id and again.attempts == 1


def test_an_unconfirmed_job_that_finished_then_claimed_normally_is_counted(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, ahead=True)
    store.record(OWNER, [Outcome(job, "retried", "E: x", 0.0)])  # its start never recorded
    clock.advance(seconds=1)
    [again] = store.claim(OWNER, 1, LEASE)
    [back], refunded = expire(store, clock)
    assert refunded == set() and back.attempts == again.attempts == 2
