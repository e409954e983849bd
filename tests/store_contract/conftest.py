"""The store contract: what every backend must do, run against real SQLite and Postgres.

Each test talks to the store only through the ``Store`` protocol, on a fresh migrated
database (``db_url`` from tests/conftest.py) and a frozen clock.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tickq import FrozenClock, Job, JobState
from tickq.job import NewJob
from tickq.store import Outcome, SqlStore, open_store

OWNER = "worker-a"
LEASE = 30.0


@pytest.fixture
def store(db_url: str, clock: FrozenClock) -> Iterator[SqlStore]:
    s = open_store(db_url, clock)
    s.migrate()
    yield s
    s.close()


def new_job(
    type: str = "send",
    max_attempts: int = 3,
    unique_key: str | None = None,
    unique_scope: str | None = None,
    queue: str = "default",
    priority: int = 0,
    payload: str = '{"n": 1}',
) -> NewJob:
    scope = unique_scope or ("active" if unique_key else None)
    return NewJob(type, payload, queue, priority, max_attempts, None, unique_key, scope)


def claim_ahead(store: SqlStore, limit: int = 1, owner: str = OWNER) -> list[Job]:
    """Claim up to ``limit`` jobs ahead (``claimed_ahead``), as a worker does for its line."""
    recorded, jobs = store.record_and_claim(owner, [], 0, LEASE, ahead=limit)
    assert recorded.ahead == {j.id for j in jobs}
    return jobs


def job_in(store: SqlStore, state: JobState, max_attempts: int = 3, ahead: bool = False) -> Job:
    """A new job brought to ``state`` by the store's own transitions. A running one has
    started (its start recorded, as a worker's next round trip does) unless ``ahead``:
    then it was claimed ahead and is still waiting in line."""
    [job_id] = store.insert([new_job(max_attempts=max_attempts)])
    if state is JobState.CANCELLED:
        return store.cancel(job_id)
    if state is not JobState.PENDING:
        [claimed] = claim_ahead(store) if ahead else store.claim(OWNER, 1, LEASE)
        assert claimed.id == job_id
        if state is JobState.RUNNING:
            if not ahead:
                assert store.record_and_claim(OWNER, [], 0, LEASE, started=[claimed])[0].started
            return claimed
        kind = "succeeded" if state is JobState.DONE else "failed"
        store.record(OWNER, [Outcome(claimed, kind, None if kind == "succeeded" else "E: x")])
    got = store.get(job_id)
    assert got is not None and got.status is state
    return got
