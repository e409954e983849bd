"""Unconfirmed claims: a rescue refunds the attempt of a claimed job (ahead or to start at
once) whose start was never recorded, once, and keeps the refund in its history; a job once
refunded is never claimed ahead again; a late ``started`` changes nothing."""

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
    assert back.last_error is None  # no attempt was counted; the history keeps the refund:
    [refund] = store.attempts(job.id)
    assert (refund.attempt, refund.outcome) == (1, "refunded")
    assert refund.error is not None and "not counted" in refund.error and OWNER in refund.error
    assert claim_ahead(store, 10) == []  # never claimed ahead again
    [again] = store.claim(OWNER, 10, LEASE)  # but claimed to start at once, it runs
    assert (again.id, again.attempts) == (job.id, 1)
    moved, refunded = expire(store, clock)  # unconfirmed again, but refunded only once
    assert refunded == set() and [(j.id, j.status) for j in moved] == [(job.id, JobState.FAILED)]
    history = [(a.attempt, a.outcome) for a in store.attempts(job.id)]
    assert history == [(1, "refunded"), (1, "lease_expired")]


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


def test_a_claim_to_start_at_once_is_unconfirmed_until_started(
    store: SqlStore, clock: FrozenClock
) -> None:
    """The claim window: a process killed after its claim committed and before the job
    started spends no attempt."""
    store.insert([new_job(max_attempts=1), new_job(max_attempts=1)])
    first, second = store.claim(OWNER, 2, LEASE)
    assert started(store, [second]) == [second.id]
    assert started(store, [second]) == []  # once
    moved, refunded = expire(store, clock)
    assert refunded == {first.id}
    assert {j.id: (j.status, j.attempts) for j in moved} == {
        first.id: (JobState.PENDING, 0), second.id: (JobState.FAILED, 1)}  # fmt: skip
    assert [a.outcome for a in store.attempts(first.id)] == ["refunded"]
    assert [a.outcome for a in store.attempts(second.id)] == ["lease_expired"]


def test_a_job_started_then_rescued_is_counted(store: SqlStore, clock: FrozenClock) -> None:
    job = job_in(store, JobState.RUNNING)
    [back], refunded = expire(store, clock)
    assert refunded == set() and (back.id, back.attempts) == (job.id, 1)


def test_claims_for_free_slots_come_first_then_those_ahead(
    store: SqlStore, clock: FrozenClock
) -> None:
    ids = store.insert([new_job(priority=p) for p in (0, 9, 5, 1, 3)])
    recorded, jobs = store.record_and_claim(OWNER, [], 2, LEASE, ahead=2)
    assert [j.id for j in jobs] == [ids[1], ids[2], ids[4], ids[3]]  # claim order
    assert recorded.ahead == {ids[4], ids[3]}
    assert [j.attempts for j in jobs] == [1, 1, 1, 1]
    moved, refunded = expire(store, clock)
    assert refunded == set(ids[1:]) and len(moved) == 4  # none said it started


def test_a_released_job_claimed_ahead_can_be_claimed_ahead_again(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, ahead=True)
    assert store.release(OWNER, [job]) == [job.id]
    assert store.get(job.id).attempts == 0  # type: ignore[union-attr]
    [again] = claim_ahead(store)
    assert again.id == job.id and again.attempts == 1


def test_a_job_that_finished_unconfirmed_is_unconfirmed_again_on_its_next_claim(
    store: SqlStore, clock: FrozenClock
) -> None:
    job = job_in(store, JobState.RUNNING, ahead=True)
    store.record(OWNER, [Outcome(job, "retried", "E: x", 0.0)])  # its start never recorded
    clock.advance(seconds=1)
    [again] = store.claim(OWNER, 1, LEASE)
    [back], refunded = expire(store, clock)
    assert refunded == {job.id} and (again.attempts, back.attempts) == (2, 1)
    history = [(a.attempt, a.outcome) for a in store.attempts(job.id)]
    assert history == [(1, "error"), (2, "refunded")]
    assert started(store, [again]) == []  # too late: the refund stands


def test_a_lease_renewal_records_the_start_of_the_jobs_it_names(
    store: SqlStore, clock: FrozenClock
) -> None:
    store.insert([new_job(), new_job()])
    named, other = store.claim(OWNER, 2, LEASE)
    ids = [named.id, other.id]
    assert store.extend_leases("worker-b", ids, LEASE, started=ids) == set()  # not theirs
    assert store.extend_leases(OWNER, ids, LEASE, started=[named.id]) == set(ids)
    moved, refunded = expire(store, clock)
    assert refunded == {other.id}
    assert {j.id: j.attempts for j in moved} == {named.id: 1, other.id: 0}
