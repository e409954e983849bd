"""``job.STATE_MACHINE`` tested as a table, against every backend: each transition applied
to a job in each state does exactly what its row says, or nothing at all."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tickq import FrozenClock, InvalidTransition, Job, JobState
from tickq.job import OUTCOMES, STATE_MACHINE, TRANSITIONS, Transition, out_of_attempts
from tickq.store import Outcome, SqlStore
from tickq.store.queries import load_queries

from .conftest import LEASE, OWNER, claim_ahead, job_in

CASES = [(t, state) for t in STATE_MACHINE for state in JobState]
AHEAD_ONLY = ("started", "refunded")
"""Transitions only of a job claimed ahead (the table's cases claim ahead for them)."""


def apply(store: SqlStore, clock: FrozenClock, t: Transition, job: Job) -> bool:
    """Ask the store for transition ``t`` on ``job``; True when it says it applied."""
    if t.name == "claimed":
        return job.id in {j.id for j in store.claim(OWNER, 10, LEASE)}
    if t.name == "claimed_ahead":
        return job.id in {j.id for j in claim_ahead(store, 10)}
    if t.name == "started":
        return store.record_and_claim(OWNER, [], 0, LEASE, started=[job])[0].started == [job.id]
    if t.name == "refunded":
        clock.advance(seconds=LEASE + 1)
        return job.id in store.rescue_expired().refunded
    if t.name in OUTCOMES:
        recorded = store.record(OWNER, [Outcome(job, t.name, "E: boom", 5.0)])  # type: ignore[arg-type]
        return [j.id for j in getattr(recorded, t.name)] == [job.id]
    if t.name == "released":
        return store.release(OWNER, [job]) == [job.id]
    if t.name == "rescued":
        clock.advance(seconds=LEASE + 1)
        rescued = store.rescue_expired()
        return job.id in {j.id for j in rescued} and job.id not in rescued.refunded
    if t.name == "pruned":
        clock.advance(days=1)
        return store.prune(timedelta(hours=1)) == 1
    if t.name in ("cancel", "cancel_requested"):  # one query: which applied is in the row
        try:
            after = store.cancel(job.id)
        except InvalidTransition:
            return False
        return after.status is t.target and (after.cancel_requested_at is not None) is (
            t.name == "cancel_requested"
        )
    try:
        getattr(store, t.query)(job.id)
    except InvalidTransition:
        return False
    return True


@pytest.mark.parametrize(("t", "state"), CASES, ids=[f"{t.name}-{s}" for t, s in CASES])
def test_each_transition_from_each_state(
    store: SqlStore, clock: FrozenClock, t: Transition, state: JobState
) -> None:
    job = job_in(store, state, ahead=t.name in AHEAD_ONLY)
    before = store.get(job.id)
    history = store.attempts(job.id)
    applied = apply(store, clock, t, job)
    after = store.get(job.id)
    if state not in t.sources:
        assert not applied
        if state not in {s for u in STATE_MACHINE if u.query == t.query for s in u.sources}:
            assert after == before  # not even updated_at moved
        assert store.attempts(job.id) == history
        return
    assert applied
    if t.target is None:
        assert after is None
        return
    assert before is not None and after is not None
    assert after.status is t.target
    assert after.attempts == before.attempts + t.attempts
    counted = {a.attempt: a.outcome for a in store.attempts(job.id)}
    if state is JobState.RUNNING and t.counted:
        assert counted[before.attempts] == t.counted
    elif t.name == "released":
        assert before.attempts not in counted  # the attempt never happened
    assert (after.lease_owner is not None) is (after.status is JobState.RUNNING)
    finished = after.status not in (JobState.PENDING, JobState.RUNNING)
    assert (after.finished_at is not None) is finished


@pytest.mark.parametrize("max_attempts", [1, 2, 3])
def test_a_rescued_job_fails_exactly_when_out_of_attempts(
    store: SqlStore, clock: FrozenClock, max_attempts: int
) -> None:
    job = job_in(store, JobState.RUNNING, max_attempts=max_attempts)
    clock.advance(seconds=LEASE + 1)
    [rescued] = store.rescue_expired()
    rule = TRANSITIONS["rescued"]
    exhausted = out_of_attempts(job.attempts, max_attempts)
    assert rescued.status is (rule.exhausted if exhausted else rule.target)
    assert rescued.last_error is not None and rescued.last_error.startswith("LeaseExpired")
    assert (rescued.finished_at is not None) is exhausted


def test_every_transition_has_its_named_query_in_every_dialect() -> None:
    for dialect, style in (("sqlite", "named"), ("postgres", "pyformat")):
        names = set(load_queries(dialect, style))
        assert {t.query for t in STATE_MACHINE} <= names, dialect


def test_the_table_is_well_formed() -> None:
    assert len(TRANSITIONS) == len(STATE_MACHINE)
    assert set(OUTCOMES) <= set(TRANSITIONS)
    for t in STATE_MACHINE:
        # ``started`` only clears the claimed-ahead mark of a running job, and
        # ``cancel_requested`` only marks a running job asked to stop.
        assert t.sources and (
            t.target not in t.sources or t.name in ("started", "cancel_requested")
        )
        assert t.exhausted is None or t.exhausted is not t.target
    every_state_is_reached = {t.target for t in STATE_MACHINE} | {JobState.PENDING}
    assert every_state_is_reached >= set(JobState)
