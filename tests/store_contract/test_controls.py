"""Queue controls: a paused queue's jobs are not claimed; a limited type's jobs are claimed
only as its concurrency and rate limits allow, never ahead; what one store declares,
another store on the same database obeys."""

from __future__ import annotations

import pytest

from tickq import FrozenClock, JobState
from tickq.controls import Limit
from tickq.store import Outcome, SqlStore, open_store

from .conftest import LEASE, OWNER, claim_ahead, new_job

TWO_AT_ONCE = Limit(2, None, None)
THREE_A_SECOND = Limit(None, 3, 1.0)


def types(jobs: list) -> list[str]:  # type: ignore[type-arg]
    return sorted(j.type for j in jobs)


def test_a_paused_queue_is_not_claimed_until_resumed(store: SqlStore) -> None:
    store.insert([new_job(queue="emails"), new_job(queue="emails"), new_job("other")])
    assert store.pause("emails") is True and store.pause("emails") is False
    assert store.paused() == {"emails"}
    assert [j.queue for j in store.claim(OWNER, 10, LEASE)] == ["default"]
    assert claim_ahead(store, 10) == []
    [job_id] = store.insert([new_job(queue="emails")])  # enqueueing still works
    assert store.get(job_id).status is JobState.PENDING  # type: ignore[union-attr]
    assert store.due_in() is None and store.due_in(["emails"]) is None
    assert store.tick_backlog()[0] == 0
    assert store.resume("emails") is True and store.resume("emails") is False
    assert store.paused() == set()
    assert store.due_in() is not None and store.tick_backlog()[0] == 3
    assert len(store.claim(OWNER, 10, LEASE)) == 3


def test_a_paused_queue_is_skipped_by_the_claims_of_limited_types_too(store: SqlStore) -> None:
    store.declare_limits({"send": TWO_AT_ONCE})
    store.insert([new_job(queue="emails")])
    store.pause("emails")
    assert store.claim(OWNER, 10, LEASE) == []
    store.resume("emails")
    assert len(store.claim(OWNER, 10, LEASE)) == 1


def test_concurrency_caps_running_jobs_of_the_type(store: SqlStore) -> None:
    store.declare_limits({"send": TWO_AT_ONCE, "other": None})
    store.insert([new_job() for _ in range(5)] + [new_job("other") for _ in range(3)])
    first = store.claim(OWNER, 10, LEASE)
    assert types(first) == ["other"] * 3 + ["send"] * 2
    assert store.claim(OWNER, 10, LEASE) == [] and claim_ahead(store, 10) == []
    done = next(j for j in first if j.type == "send")
    recorded, jobs = store.record_and_claim(OWNER, [Outcome(done, "succeeded")], 10, LEASE)
    assert [j.id for j in recorded.succeeded] == [done.id]
    assert types(jobs) == ["send"]  # the finish freed the slot the same transaction fills
    waiting = store.list_jobs("pending")
    assert len(waiting) == 2 and all(j.attempts == 0 for j in waiting)  # no attempt spent


def test_a_running_job_whose_lease_ran_out_frees_its_slot(
    store: SqlStore, clock: FrozenClock
) -> None:
    store.declare_limits({"send": TWO_AT_ONCE})
    store.insert([new_job() for _ in range(4)])
    assert len(store.claim("dead-worker", 10, LEASE)) == 2
    clock.advance(seconds=LEASE - 1)
    assert store.claim(OWNER, 10, LEASE) == []
    clock.advance(seconds=2)  # expired, not yet rescued: the dead worker's slots are free
    assert len(store.claim(OWNER, 10, LEASE)) == 2
    assert {j.status for j in store.rescue_expired()} == {JobState.PENDING}


def test_a_released_job_frees_its_slot(store: SqlStore) -> None:
    store.declare_limits({"send": Limit(1, None, None)})
    store.insert([new_job(), new_job()])
    [job] = store.claim(OWNER, 10, LEASE)
    assert store.release(OWNER, [job]) == [job.id]
    assert [j.id for j in store.claim(OWNER, 10, LEASE)] == [job.id]


def test_rate_limit_caps_starts_within_any_window(store: SqlStore, clock: FrozenClock) -> None:
    store.declare_limits({"send": THREE_A_SECOND})
    store.insert([new_job() for _ in range(10)])
    assert len(store.claim(OWNER, 2, LEASE)) == 2
    clock.advance(seconds=0.5)
    assert len(store.claim(OWNER, 10, LEASE)) == 1
    assert store.claim(OWNER, 10, LEASE) == []
    assert store.due_in() == pytest.approx(0.5, abs=0.01)  # when the first start leaves
    clock.advance(seconds=0.6)
    assert len(store.claim(OWNER, 10, LEASE)) == 2  # the second window's first two left
    clock.advance(seconds=0.5)
    assert len(store.claim(OWNER, 10, LEASE)) == 1
    assert len(store.list_jobs("pending")) == 4


def test_finished_jobs_still_count_against_the_rate(store: SqlStore, clock: FrozenClock) -> None:
    store.declare_limits({"send": THREE_A_SECOND})
    store.insert([new_job(max_attempts=5) for _ in range(5)])
    jobs = store.claim(OWNER, 10, LEASE)
    store.record(OWNER, [Outcome(j, "retried", "E: x", 0.0) for j in jobs])
    assert store.claim(OWNER, 10, LEASE) == []
    clock.advance(seconds=1.01)
    assert len(store.claim(OWNER, 10, LEASE)) == 3


def test_limits_bind_a_store_that_did_not_declare_them(
    store: SqlStore, db_url: str, clock: FrozenClock
) -> None:
    store.declare_limits({"send": TWO_AT_ONCE})
    store.insert([new_job() for _ in range(4)])
    assert store.claim(OWNER, 1, LEASE) != []  # writes the declaration
    other = open_store(db_url, clock)
    try:
        assert other.limits() == {"send": TWO_AT_ONCE}
        assert len(other.claim("worker-b", 10, LEASE)) == 1
        assert other.claim("worker-b", 10, LEASE) == []
        assert other.record_and_claim("worker-b", [], 0, LEASE, ahead=10)[1] == []
    finally:
        other.close()


def test_declaring_none_lifts_a_limit(store: SqlStore) -> None:
    store.declare_limits({"send": Limit(1, 5, 60.0), "mail": THREE_A_SECOND})
    store.claim(OWNER, 1, LEASE)
    assert store.limits() == {"send": Limit(1, 5, 60.0), "mail": THREE_A_SECOND}
    store.declare_limits({"send": None})
    store.insert([new_job(), new_job()])
    assert len(store.claim(OWNER, 10, LEASE)) == 2
    assert store.limits() == {"mail": THREE_A_SECOND}


def test_a_limited_claim_keeps_to_the_workers_queues(store: SqlStore) -> None:
    store.declare_limits({"send": TWO_AT_ONCE})
    store.insert([new_job(queue="a"), new_job(queue="b"), new_job("other", queue="b")])
    assert [(j.type, j.queue) for j in store.claim(OWNER, 10, LEASE, ["b"])] == [
        ("send", "b"), ("other", "b")
    ]  # fmt: skip
    assert [j.queue for j in store.claim(OWNER, 10, LEASE, ["a"])] == ["a"]
    assert store.claim(OWNER, 10, LEASE) == []


def test_a_ticks_backlog_leaves_paused_queues_out(store: SqlStore, clock: FrozenClock) -> None:
    [first] = store.insert([new_job(queue="emails")])
    clock.advance(seconds=5)
    store.insert([new_job(), new_job()])
    before = store.tick_backlog()
    assert before[0] == 3 and before[1] == store.get(first).run_after  # type: ignore[union-attr]
    store.pause("emails")
    due, earliest, now = store.tick_backlog()
    assert due == 2 and earliest == now
    assert store.start_tick().due == 2 and store.tick_state().earliest_pending == now
    store.pause("default")
    assert store.tick_backlog()[:2] == (0, None)


def test_a_claim_never_takes_more_than_its_limit_across_limited_and_other_jobs(
    store: SqlStore,
) -> None:
    store.declare_limits({"send": TWO_AT_ONCE, "mail": THREE_A_SECOND})
    store.insert([new_job(), new_job("mail"), new_job("other"), new_job("other")])
    taken = [len(store.claim(OWNER, 1, LEASE)) for _ in range(5)]
    assert taken == [1, 1, 1, 1, 0]
