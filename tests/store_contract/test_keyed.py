"""Limits per key: a keyed type's limits hold for each concurrency key on its own; a key at
its limit never holds up another key's jobs; keys take turns; a dead worker's slot comes
back when its lease runs out; a job without a key is never stranded."""

from __future__ import annotations

import json
from collections import Counter

from tickq import FrozenClock, Job, JobState
from tickq.controls import Limit
from tickq.job import NewJob
from tickq.store import Outcome, SqlStore

from .conftest import LEASE, OWNER, claim_ahead, new_job

ONE_PER_KEY = Limit(1, None, None, keyed=True)
TWO_AT_ONCE = Limit(2, None, None)


def keyed_job(
    key: str | None, type: str = "sync", priority: int = 0, unregistered: bool = False
) -> NewJob:
    """A job with concurrency key ``key``, its payload saying which (``{"k": key}``)."""
    payload = json.dumps({"k": "" if unregistered else key})
    return NewJob(type, payload, "default", priority, 3, None, None, None, None, key,
                  unregistered)  # fmt: skip


def keys(jobs: list[Job]) -> Counter[str | None]:
    return Counter(j.payload["k"] for j in jobs)


def test_one_key_at_its_limit_does_not_hold_up_the_others(store: SqlStore) -> None:
    store.declare_limits({"sync": ONE_PER_KEY})
    store.insert([keyed_job("hot") for _ in range(50)] + [keyed_job("a"), keyed_job("b")])
    first = store.claim(OWNER, 10, LEASE)
    assert keys(first) == {"hot": 1, "a": 1, "b": 1}
    assert store.claim(OWNER, 10, LEASE) == [] and claim_ahead(store, 10) == []
    hot = next(j for j in first if j.payload["k"] == "hot")
    _, again = store.record_and_claim(OWNER, [Outcome(hot, "succeeded")], 10, LEASE)
    assert keys(again) == {"hot": 1}  # the finish freed that key's slot, in one transaction
    pending = store.list_jobs("pending", limit=100)
    assert len(pending) == 48 and all(j.attempts == 0 for j in pending)


def test_concurrency_per_key_allows_that_many_of_each_key(store: SqlStore) -> None:
    store.declare_limits({"sync": Limit(2, None, None, keyed=True)})
    store.insert([keyed_job(k) for k in "aaabbbc"])
    assert keys(store.claim(OWNER, 10, LEASE)) == {"a": 2, "b": 2, "c": 1}
    assert store.claim(OWNER, 10, LEASE) == []


def test_keys_take_turns_when_the_claim_wants_fewer_jobs_than_keys_have_room(
    store: SqlStore,
) -> None:
    store.declare_limits({"sync": Limit(100, None, None, keyed=True)})
    store.insert([keyed_job(k) for k in "abc" for _ in range(4)])
    seen = [j.payload["k"] for _ in range(6) for j in store.claim(OWNER, 2, LEASE)]
    assert Counter(seen) == {"a": 4, "b": 4, "c": 4}
    # no key waits for another's backlog: each run of three claims touches every key
    assert set(seen[:6]) == {"a", "b", "c"}


def test_a_dead_workers_key_slot_comes_back_when_its_lease_runs_out(
    store: SqlStore, clock: FrozenClock
) -> None:
    store.declare_limits({"sync": ONE_PER_KEY})
    store.insert([keyed_job("a"), keyed_job("a"), keyed_job("b")])
    assert keys(store.claim("dead-worker", 10, LEASE)) == {"a": 1, "b": 1}
    clock.advance(seconds=LEASE - 1)
    assert store.claim(OWNER, 10, LEASE) == []
    clock.advance(seconds=2)  # expired, not yet rescued: the dead worker's slots are free
    assert keys(store.claim(OWNER, 10, LEASE)) == {"a": 1}


def test_a_rate_limit_per_key_counts_each_keys_starts(store: SqlStore, clock: FrozenClock) -> None:
    store.declare_limits({"sync": Limit(None, 2, 1.0, keyed=True)})
    store.insert([keyed_job(k) for k in "aaaabbbb"])
    first = store.claim(OWNER, 10, LEASE)
    assert keys(first) == {"a": 2, "b": 2}
    store.record_and_claim(OWNER, [Outcome(j, "succeeded") for j in first], 0, LEASE)
    assert store.claim(OWNER, 10, LEASE) == []  # finished, but the window is spent
    wait = store.due_in()
    assert wait is not None and 0 < wait <= 1.0
    clock.advance(seconds=1.01)
    assert keys(store.claim(OWNER, 10, LEASE)) == {"a": 2, "b": 2}


def test_keys_and_priority_within_a_key(store: SqlStore) -> None:
    store.declare_limits({"sync": ONE_PER_KEY})
    [_, high] = store.insert([keyed_job("a", priority=0), keyed_job("a", priority=5)])
    assert [j.id for j in store.claim(OWNER, 10, LEASE)] == [high]


def test_a_keyed_job_without_a_key_is_claimed_not_stranded(store: SqlStore) -> None:
    store.declare_limits({"sync": ONE_PER_KEY})
    store.insert([keyed_job(None), keyed_job(None), keyed_job("a"), keyed_job("a")])
    assert keys(store.claim(OWNER, 10, LEASE)) == {None: 2, "a": 1}


def test_an_unregistered_enqueue_of_a_keyed_type_shares_the_empty_key(store: SqlStore) -> None:
    store.declare_limits({"sync": ONE_PER_KEY})
    store.claim(OWNER, 0, LEASE)  # the declaration goes in with a claim
    store.insert([keyed_job(None, unregistered=True) for _ in range(3)] + [keyed_job("a")])
    assert keys(store.claim(OWNER, 10, LEASE)) == {"": 1, "a": 1}  # one slot for the key ''
    assert store.claim(OWNER, 10, LEASE) == []


def test_types_without_a_key_are_limited_as_before_beside_a_keyed_one(store: SqlStore) -> None:
    store.declare_limits({"sync": ONE_PER_KEY, "send": Limit(1, None, None)})
    store.insert([keyed_job("a"), keyed_job("b")] + [new_job("send") for _ in range(3)])
    store.insert([new_job("free") for _ in range(2)])
    claimed = store.claim(OWNER, 10, LEASE)
    assert Counter(j.type for j in claimed) == {"sync": 2, "send": 1, "free": 2}
    assert store.limits()["sync"] == ONE_PER_KEY and store.limits()["send"].keyed is False
    assert {j.status for j in claimed} == {JobState.RUNNING}


def test_a_claim_looks_at_a_bounded_number_of_keys_and_the_next_goes_on_from_there(
    store: SqlStore,
) -> None:
    store.declare_limits({"sync": ONE_PER_KEY})
    full = [f"k{n:03}" for n in range(100) if n != 80]
    store.insert([keyed_job(k) for k in full])
    assert len(store.claim(OWNER, 200, LEASE)) == 99  # every key but k080 at its limit
    store.insert([keyed_job(k) for k in full] + [keyed_job("k080")])
    # From the key after the last one seen (k099): around to k000, then 65 keys at their
    # limit (64 more than the one job wanted): this claim stops there, empty-handed...
    assert store.claim(OWNER, 1, LEASE) == []
    # ...and the next goes on from k065, reaching k080.
    assert keys(store.claim(OWNER, 1, LEASE)) == {"k080": 1}


def test_a_keyed_type_with_only_a_concurrency_limit_is_claimed_ahead_within_each_keys_room(
    store: SqlStore,
) -> None:
    store.declare_limits({"sync": Limit(2, None, None, keyed=True)})
    store.insert([keyed_job(k) for k in "aaabbc"])
    assert keys(claim_ahead(store, 10)) == {"a": 2, "b": 2, "c": 1}  # waiting in line counts
    assert store.claim(OWNER, 10, LEASE) == [] and claim_ahead(store, 10) == []
    assert {j.payload["k"] for j in store.list_jobs("pending")} == {"a"}


def test_a_keyed_type_with_a_rate_limit_is_never_claimed_ahead(store: SqlStore) -> None:
    store.declare_limits({"sync": Limit(5, 10, 1.0, keyed=True), "send": TWO_AT_ONCE})
    store.insert([keyed_job("a"), new_job("send"), new_job("free")])
    # A start counts at its claim, so with no promise of when a job in line starts (no
    # ahead_wait) a rate-limited type is not claimed ahead; a concurrency-only one is.
    assert sorted(j.type for j in claim_ahead(store, 10)) == ["free", "send"]
    assert Counter(j.type for j in store.claim(OWNER, 10, LEASE)) == {"sync": 1}
