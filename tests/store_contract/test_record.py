"""Recording outcomes: each applies once, under the lease it was claimed with; a late finish
(after a rescue, a release or another claim) is stale and changes no row. (A cancel of a
running job is a request its worker records: see test_cancel.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tickq import FrozenClock, Job, JobState
from tickq.job import OUTCOMES
from tickq.store import Outcome, SqlStore

from .conftest import LEASE, OWNER, job_in, new_job


def rescued(store: SqlStore, clock: FrozenClock, job: Job) -> None:
    clock.advance(seconds=LEASE + 1)
    assert [j.id for j in store.rescue_expired()] == [job.id]


def released(store: SqlStore, clock: FrozenClock, job: Job) -> None:
    assert store.release(OWNER, [job]) == [job.id]


def reclaimed(store: SqlStore, clock: FrozenClock, job: Job) -> None:
    rescued(store, clock, job)
    [again] = store.claim("worker-b", 1, LEASE)
    assert again.id == job.id and again.attempts == job.attempts + 1


def finished(store: SqlStore, clock: FrozenClock, job: Job) -> None:
    assert store.record(OWNER, [Outcome(job, "succeeded")]).succeeded == [job]


LOSSES: dict[str, Callable[[SqlStore, FrozenClock, Job], None]] = {
    "rescued": rescued, "released": released,
    "reclaimed": reclaimed, "finished": finished,
}  # fmt: skip


@pytest.mark.parametrize("kind", OUTCOMES)
@pytest.mark.parametrize("loss", LOSSES)
def test_a_late_finish_changes_nothing(
    store: SqlStore, clock: FrozenClock, kind: str, loss: str
) -> None:
    job = job_in(store, JobState.RUNNING)
    LOSSES[loss](store, clock, job)
    row, history = store.get(job.id), store.attempts(job.id)
    clock.advance(seconds=1)
    recorded = store.record(OWNER, [Outcome(job, kind, "E: late", 1.0)])  # type: ignore[arg-type]
    assert recorded.stale == [job]
    assert not any(getattr(recorded, k) for k in OUTCOMES)
    assert store.get(job.id) == row
    assert store.attempts(job.id) == history


def test_outcomes_of_one_batch_each_apply_under_their_own_guard(
    store: SqlStore, clock: FrozenClock
) -> None:
    store.insert([new_job() for _ in range(5)])
    jobs = store.claim(OWNER, 5, LEASE)
    lost = jobs[4]
    assert store.release(OWNER, [lost]) == [lost.id]
    kinds = ["succeeded", "retried", "failed", "cancelled", "succeeded"]
    outcomes = [
        Outcome(j, k, None if k == "succeeded" else "E: x", 10.0)
        for j, k in zip(jobs, kinds, strict=True)
    ]  # type: ignore[arg-type]
    recorded = store.record(OWNER, outcomes)
    assert [j.id for j in recorded.succeeded] == [jobs[0].id]
    assert [j.id for j in recorded.retried] == [jobs[1].id]
    assert [j.id for j in recorded.failed] == [jobs[2].id]
    assert [j.id for j in recorded.cancelled] == [jobs[3].id]
    assert recorded.stale == [lost]
    retried = store.get(jobs[1].id)
    assert retried is not None and retried.run_after == clock.now() + (
        retried.run_after - clock.now()
    )
    assert retried is not None and (retried.run_after - clock.now()).total_seconds() == 10.0
    assert retried.last_error == "E: x"


def test_record_and_claim_records_then_claims_in_one_call(store: SqlStore) -> None:
    store.insert([new_job(), new_job()])
    [first] = store.claim(OWNER, 1, LEASE)
    recorded, [second] = store.record_and_claim(OWNER, [Outcome(first, "succeeded")], 1, LEASE)
    assert recorded.succeeded == [first] and second.id != first.id
    assert second.status is JobState.RUNNING and second.lease_owner == OWNER
    done = store.get(first.id)
    assert done is not None and done.status is JobState.DONE


def test_an_owner_extends_only_the_leases_it_holds(store: SqlStore, clock: FrozenClock) -> None:
    mine = job_in(store, JobState.RUNNING)
    store.insert([new_job()])
    [theirs] = store.claim("worker-b", 1, LEASE)
    clock.advance(seconds=LEASE - 1)
    assert store.extend_leases(OWNER, [mine.id, theirs.id], LEASE) == {mine.id}
    clock.advance(seconds=2)  # past theirs, not past mine
    assert [j.id for j in store.rescue_expired()] == [theirs.id]
    assert store.extend_leases(OWNER, [], LEASE) == set()


def test_release_puts_the_attempt_back_uncounted(store: SqlStore) -> None:
    job = job_in(store, JobState.RUNNING)
    assert store.release("worker-b", [job]) == []  # not the holder
    assert store.release(OWNER, [job]) == [job.id]
    back = store.get(job.id)
    assert back is not None and (back.status, back.attempts) == (JobState.PENDING, 0)
    assert store.release(OWNER, [job]) == []  # twice changes nothing
