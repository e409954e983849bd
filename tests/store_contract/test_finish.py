"""``finish``: every outcome of a batch, success or not, applied by one statement per
dialect (with the batch's history rows and a read-back when any outcome is not a success),
its results matched by job id, never by position; and ``release`` the same way."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from tickq import FrozenClock, Job, JobState
from tickq.job import OUTCOMES
from tickq.store import Outcome, SqlStore

from .conftest import LEASE, OWNER, job_in, new_job


@contextmanager
def statements_run(store: SqlStore) -> Iterator[list[str]]:
    """The names of the statements the store runs meanwhile (its one seam to the driver)."""
    names: list[str] = []
    real = store._query_many

    def counting(statements: Sequence[tuple[str, Any]]) -> Any:
        names.extend(name for name, _ in statements)
        return real(statements)

    store._query_many = counting  # type: ignore[method-assign]
    try:
        yield names
    finally:
        store._query_many = real  # type: ignore[method-assign]


def running(store: SqlStore, n: int) -> list[Job]:
    return [job_in(store, JobState.RUNNING) for _ in range(n)]


def each_kind(jobs: list[Job]) -> list[Outcome]:
    kinds = [OUTCOMES[i % len(OUTCOMES)] for i in range(len(jobs))]
    return [
        Outcome(j, k, None if k in ("succeeded", "snoozed") else f"E: {j.id}", 60.0, 0.5)  # type: ignore[arg-type]
        for j, k in zip(jobs, kinds, strict=True)
    ]


@pytest.mark.parametrize("n", [1, 5, 40])
def test_a_batch_of_any_outcomes_costs_the_same_statements(store: SqlStore, n: int) -> None:
    outcomes = each_kind(running(store, n))
    with statements_run(store) as names:
        recorded = store.record(OWNER, outcomes)
    # finish runs once per kind of outcome in the batch, as compiled for that kind; for
    # others than successes their history rows go first, and the jobs they settled are
    # read back once (SQLite: finish_settled returns them itself): the same statements for
    # any size.
    kinds = list(dict.fromkeys(o.kind for o in outcomes))
    settles = store.dialect == "sqlite"
    expected = [
        name
        for kind in kinds
        for name in (
            ["finish"]
            if kind == "succeeded"
            else ["add_attempts", "finish_settled" if settles else "finish"]
        )
    ]
    if not settles and kinds != ["succeeded"]:
        expected.append("settled")
    assert [name.partition(":")[0] for name in names] == expected  # SQLite: "finish:<kind>"
    for o in outcomes:
        assert [j.id for j in getattr(recorded, o.kind)].count(o.job.id) == 1


def test_each_outcome_lands_where_its_row_says(store: SqlStore) -> None:
    outcomes = each_kind(running(store, len(OUTCOMES)))
    recorded = store.record(OWNER, outcomes)
    for o in outcomes:
        t = o.transition
        [settled] = [j for j in getattr(recorded, o.kind) if j.id == o.job.id]
        after = store.get(o.job.id)
        assert after is not None
        assert after.status is t.target
        assert after.attempts == o.job.attempts + t.attempts
        assert after.snoozes == o.job.snoozes + t.snoozes
        assert (after.finished_at is not None) is t.finishes
        assert after.lease_owner is None and after.lease_expires_at is None
        if o.kind != "succeeded":  # hooks and alerts get the row as finish left it
            assert settled == after
        history = {a.attempt: a.outcome for a in store.attempts(o.job.id)}
        if t.counted is None:  # suspended: a workflow's replay is no run of its own
            assert o.job.attempts not in history
        else:
            assert history[o.job.attempts] == t.counted


def test_stale_and_applied_outcomes_in_one_batch_are_told_apart_by_id(
    store: SqlStore, clock: FrozenClock
) -> None:
    lost, kept = running(store, 2)
    assert store.release(OWNER, [lost]) == [lost.id]
    recorded = store.record(
        OWNER, [Outcome(lost, "failed", "E: late"), Outcome(kept, "failed", "E: now")]
    )
    assert [j.id for j in recorded.failed] == [kept.id]
    assert recorded.stale == [lost]
    after = store.get(lost.id)
    assert after is not None and after.status is JobState.PENDING


def test_two_attempts_of_one_job_in_one_batch_each_meet_their_own_guard(
    store: SqlStore, clock: FrozenClock
) -> None:
    [first] = running(store, 1)
    clock.advance(seconds=LEASE + 1)
    store.rescue_expired()
    [second] = store.claim(OWNER, 1, LEASE)
    assert second.id == first.id and second.attempts == first.attempts + 1
    recorded = store.record(
        OWNER, [Outcome(first, "succeeded"), Outcome(second, "retried", "E: again", 5.0)]
    )
    assert recorded.stale == [first]
    assert [j.id for j in recorded.retried] == [first.id]


def test_a_release_of_many_jobs_is_one_statement(store: SqlStore) -> None:
    jobs = running(store, 6)
    [other] = store.insert([new_job()])
    with statements_run(store) as names:
        back = store.release(OWNER, jobs, ran={jobs[0].id, jobs[1].id}, grace=2.0)
    assert back == [j.id for j in jobs]
    assert names == (["add_released_attempts"] if store.dialect == "sqlite" else []) + ["release"]
    assert [a.outcome for a in store.attempts(jobs[0].id)] == ["released"]
    assert store.attempts(jobs[2].id) == []
    assert store.release(OWNER, jobs) == []  # not running any more: nothing applies
    assert store.get(other) is not None
