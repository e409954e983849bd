"""Cancelling: a pending job at once; a running one is asked to stop (``cancel_requested_at``),
which its worker hears through ``extend_leases`` or ``cancel_requests``, and which turns
every way the attempt can end but success into ``cancelled``."""

from __future__ import annotations

import pytest

from tickq import FrozenClock, JobState
from tickq.store import Outcome, SqlStore

from .conftest import LEASE, OWNER, claim_ahead, job_in, new_job


def test_a_pending_job_is_cancelled_at_once(store: SqlStore, clock: FrozenClock) -> None:
    job = job_in(store, JobState.PENDING)
    cancelled = store.cancel(job.id)
    assert (cancelled.status, cancelled.finished_at) == (JobState.CANCELLED, clock.now())
    assert cancelled.cancel_requested_at is None
    assert store.attempts(job.id) == []


def test_a_running_job_is_asked_to_stop_once(store: SqlStore, clock: FrozenClock) -> None:
    job = job_in(store, JobState.RUNNING)
    asked = store.cancel(job.id)
    assert (asked.status, asked.lease_owner) == (JobState.RUNNING, OWNER)
    assert asked.cancel_requested_at == clock.now() and asked.finished_at is None
    clock.advance(seconds=5)
    again = store.cancel(job.id)  # asking again keeps the first request
    assert again.cancel_requested_at == asked.cancel_requested_at
    assert [a.outcome for a in store.attempts(job.id)] == ["running"]


def test_the_holder_hears_the_request_on_renewal_and_on_a_look(store: SqlStore) -> None:
    asked, other = job_in(store, JobState.RUNNING), job_in(store, JobState.RUNNING)
    assert store.cancel_requests(OWNER, [asked.id, other.id]) == set()
    store.cancel(asked.id)
    assert store.cancel_requests(OWNER, [asked.id, other.id]) == {asked.id}
    assert store.cancel_requests("worker-b", [asked.id, other.id]) == set()  # not its job
    assert store.cancel_requests(OWNER, []) == set()
    leases = store.extend_leases(OWNER, [asked.id, other.id], LEASE)
    assert leases == {asked.id, other.id}  # still ours: renewed while it stops
    assert leases.cancel_requested == {asked.id}


@pytest.mark.parametrize("kind", ["retried", "snoozed", "failed", "cancelled"])
def test_an_attempt_asked_to_stop_ends_cancelled_whatever_it_raised(
    store: SqlStore, clock: FrozenClock, kind: str
) -> None:
    job = job_in(store, JobState.RUNNING)
    store.cancel(job.id)
    clock.advance(seconds=2)
    recorded = store.record(OWNER, [Outcome(job, kind, "ValueError: boom", 30.0, 2.0)])  # type: ignore[arg-type]
    [ended] = recorded.cancelled
    assert not recorded.retried and not recorded.failed and not recorded.stale
    assert (ended.status, ended.finished_at, ended.lease_owner) == (
        JobState.CANCELLED, clock.now(), None)  # fmt: skip
    [attempt] = store.attempts(job.id)
    assert (attempt.attempt, attempt.outcome, attempt.duration) == (1, "cancelled", 2.0)
    if kind == "cancelled":  # the worker's own words (it saw the request)
        assert attempt.error == "ValueError: boom"
    else:  # it finished before it heard: the store says why it is cancelled
        assert attempt.error_type == "Cancel"
        assert "cancel requested while attempt 1 was running" in (attempt.error or "")
        assert "ValueError: boom" in (attempt.error or "")
    assert ended.last_error == attempt.error


def test_an_attempt_asked_to_stop_that_returns_succeeds(store: SqlStore) -> None:
    job = job_in(store, JobState.RUNNING)
    store.cancel(job.id)
    recorded = store.record(OWNER, [Outcome(job, "succeeded", duration=1.0, result="42")])
    assert [j.id for j in recorded.succeeded] == [job.id]
    done = store.get(job.id)
    assert done is not None and (done.status, done.result) == (JobState.DONE, 42)
    assert done.cancel_requested_at is not None  # the request stays on the record


@pytest.mark.parametrize("ahead", [False, True])
def test_a_job_asked_to_stop_whose_worker_died_is_rescued_as_cancelled(
    store: SqlStore, clock: FrozenClock, ahead: bool
) -> None:
    if ahead:
        store.insert([new_job()])
    [job] = claim_ahead(store) if ahead else [job_in(store, JobState.RUNNING)]
    store.cancel(job.id)
    clock.advance(seconds=LEASE + 1)
    rescued = store.rescue_expired()
    assert [j.id for j in rescued] == [job.id] and not rescued.refunded  # never refunded
    [ended] = rescued
    assert (ended.status, ended.finished_at, ended.attempts) == (
        JobState.CANCELLED, clock.now(), 1)  # fmt: skip
    [attempt] = store.attempts(job.id)
    assert (attempt.outcome, attempt.error_type) == ("cancelled", "Cancel")
    assert f"was running on {OWNER}, which stopped renewing its lease" in (attempt.error or "")
    assert store.rescue_expired() == []


def test_a_job_asked_to_stop_is_not_released(store: SqlStore) -> None:
    job = job_in(store, JobState.RUNNING)
    store.cancel(job.id)
    assert store.release(OWNER, [job]) == []  # its lease runs out and the rescue cancels it
    still = store.get(job.id)
    assert still is not None and still.status is JobState.RUNNING


def test_a_retried_cancelled_job_is_asked_nothing(store: SqlStore, clock: FrozenClock) -> None:
    job = job_in(store, JobState.RUNNING)
    store.cancel(job.id)
    store.record(OWNER, [Outcome(job, "cancelled", "Cancel: stopped")])
    again = store.retry(job.id)
    assert (again.status, again.cancel_requested_at) == (JobState.PENDING, None)
    [claimed] = store.claim(OWNER, 1, LEASE)
    assert store.cancel_requests(OWNER, [claimed.id]) == set()
