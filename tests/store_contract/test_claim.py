"""Claims: due pending jobs only, best first, filtered by queue; never one job to two owners."""

from __future__ import annotations

import threading
from datetime import timedelta

from tickq import FrozenClock, JobState
from tickq.job import NewJob
from tickq.store import SqlStore, open_store

from .conftest import LEASE, OWNER, new_job


def test_claim_takes_due_jobs_by_priority_then_age(store: SqlStore, clock: FrozenClock) -> None:
    low, high, other = store.insert(
        [new_job(priority=0), new_job(priority=5), new_job(queue="mail", priority=9)]
    )
    later = NewJob("send", "{}", "default", 9, 3, clock.now() + timedelta(minutes=1), None, None)
    [not_due] = store.insert([later])
    claimed = store.claim(OWNER, 10, LEASE, queues=["default"])
    assert [j.id for j in claimed] == [high, low]
    assert all(j.attempts == 1 and j.lease_owner == OWNER for j in claimed)
    assert all(j.lease_expires_at == clock.now() + timedelta(seconds=LEASE) for j in claimed)
    assert [j.id for j in store.claim(OWNER, 10, LEASE)] == [other]
    clock.advance(minutes=1)
    assert [j.id for j in store.claim(OWNER, 10, LEASE)] == [not_due]


def test_claims_never_hand_one_job_to_two_owners(db_url: str, store: SqlStore) -> None:
    ids = store.insert([new_job() for _ in range(120)])
    got: dict[str, list[int]] = {}
    start = threading.Barrier(4)

    def worker(owner: str) -> None:
        own = open_store(db_url)  # a store (and connection) of its own, as a process has
        mine = got.setdefault(owner, [])
        start.wait(10)
        try:
            while jobs := own.claim(owner, 7, LEASE):
                mine.extend(j.id for j in jobs)
        finally:
            own.close()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    claimed = [i for mine in got.values() for i in mine]
    assert sorted(claimed) == sorted(ids)  # each exactly once
    owners = {j.id: j.lease_owner for j in store.list_jobs(limit=200)}
    assert all(owners[i] == owner for owner, mine in got.items() for i in mine)
    assert {j.status for j in store.list_jobs(limit=200)} == {JobState.RUNNING}
