"""Inserting (unique keys), manual retry and cancel, pruning with totals kept."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tickq import FrozenClock, InvalidTransition, JobNotFound, JobState
from tickq.job import NewJob
from tickq.store import Outcome, SqlStore

from .conftest import LEASE, OWNER, job_in, new_job


def test_a_unique_key_holds_one_active_job(store: SqlStore) -> None:
    first, same = store.insert([new_job(unique_key="k"), new_job(unique_key="k")])
    assert first == same
    [job] = store.claim(OWNER, 1, LEASE)
    assert store.insert([new_job(unique_key="k")]) == [first]  # running still holds it
    store.record(OWNER, [Outcome(job, "succeeded")])
    [after] = store.insert([new_job(unique_key="k")])
    assert after != first  # finished: the key is free again


def test_unique_scope_all_holds_the_key_while_the_row_exists(
    store: SqlStore, clock: FrozenClock
) -> None:
    [first] = store.insert([new_job(unique_key="once", unique_scope="all")])
    [job] = store.claim(OWNER, 1, LEASE)
    store.record(OWNER, [Outcome(job, "succeeded")])
    assert store.insert([new_job(unique_key="once", unique_scope="all")]) == [first]
    clock.advance(days=2)
    assert store.prune(timedelta(days=1)) == 1
    assert store.insert([new_job(unique_key="once", unique_scope="all")]) != [first]


def test_a_manual_retry_refused_while_the_key_is_held(store: SqlStore) -> None:
    [old] = store.insert([new_job(unique_key="k")])
    store.cancel(old)
    [new] = store.insert([new_job(unique_key="k")])
    assert new != old
    with pytest.raises(InvalidTransition, match="unique_key 'k'"):
        store.retry(old)
    with pytest.raises(JobNotFound):
        store.retry(10**9)


def test_a_manual_retry_gives_a_failed_job_one_more_attempt(store: SqlStore) -> None:
    job = job_in(store, JobState.FAILED, max_attempts=1)
    retried = store.retry(job.id)
    assert (retried.status, retried.attempts, retried.max_attempts) == (JobState.PENDING, 1, 2)
    assert retried.finished_at is None


def test_retry_failed_takes_batches_and_skips_held_keys(store: SqlStore) -> None:
    failed = [job_in(store, JobState.FAILED).id for _ in range(3)]
    assert store.count_failed() == 3 and store.count_failed("other") == 0
    assert sorted(store.retry_failed(batch=2) + store.retry_failed(batch=2)) == sorted(failed)
    assert store.retry_failed() == [] and store.count_failed() == 0


def test_prune_deletes_only_old_finished_jobs_and_keeps_their_totals(
    store: SqlStore, clock: FrozenClock
) -> None:
    done = job_in(store, JobState.DONE)
    failed = job_in(store, JobState.FAILED)
    pending = job_in(store, JobState.PENDING)
    before = store.stats()["processed"]
    clock.advance(hours=2)
    recent = job_in(store, JobState.CANCELLED)
    deleted: list[int] = []
    assert store.prune(timedelta(hours=1), batch=1, progress=deleted.append) == 2
    assert deleted == [1, 2]
    assert store.get(done.id) is None and store.get(failed.id) is None
    assert store.get(pending.id) is not None and store.get(recent.id) is not None
    assert store.attempts(failed.id) == []
    assert store.stats()["processed"] == before  # what pruned jobs counted stays counted


def test_migrate_is_idempotent(store: SqlStore) -> None:
    assert store.migrate() == []
    assert "CREATE TABLE" in store.schema_sql()


def test_a_batch_gets_each_job_its_own_id_in_order_clashes_included(store: SqlStore) -> None:
    [held] = store.insert([new_job(unique_key="taken")])
    batch = [
        new_job(payload='{"n": 0}'),
        new_job(unique_key="taken", payload='{"n": 1}'),  # clashes with a job already there
        new_job(unique_key="twice", payload='{"n": 2}'),
        new_job(payload='{"n": 3}'),
        new_job(unique_key="twice", payload='{"n": 4}'),  # clashes within the batch
        new_job(payload='{"n": 5}'),
    ]
    ids = store.insert(batch)
    assert ids[1] == held and ids[4] == ids[2]
    assert len(set(ids) - {held}) == 4
    for i in (0, 2, 3, 5):
        job = store.get(ids[i])
        assert job is not None and job.payload == {"n": i}


def test_a_batch_stores_each_jobs_own_columns_set_or_left_out(
    store: SqlStore, clock: FrozenClock
) -> None:
    later = clock.now() + timedelta(hours=1)

    def varied(batch: str, n: int) -> list[NewJob]:  # from 12 types: some batches have > 8
        return [
            NewJob(f"type{i % 12}", f'{{"n": {i}, "q": "a\\"b\\\\c"}}', f"queue{i % 3}",
                   i - 5, i + 1, later if i % 2 else None, f"{batch}{i}" if i % 3 else None,
                   ("all" if i % 2 else "active") if i % 3 else None,
                   f'{{"slot": {i}}}' if i % 4 else None, f"k{i}" if i % 5 else None)
            for i in range(n)
        ]  # fmt: skip

    plain = [new_job(payload=f'{{"n": {i}}}') for i in range(3)]
    for batch in (varied("a", 20), varied("b", 4), plain):
        ids = store.insert(batch)
        for job_id, sent in zip(ids, batch, strict=True):
            got = store.get(job_id)
            assert got is not None
            assert (got.type, got.queue, got.priority, got.max_attempts, got.unique_key) == (
                sent.type, sent.queue, sent.priority, sent.max_attempts, sent.unique_key
            )  # fmt: skip
            assert json.dumps(got.payload) == json.dumps(json.loads(sent.payload_json))
            assert got.run_after == (sent.run_after or clock.now())
            assert got.meta == (json.loads(sent.meta_json) if sent.meta_json else {})
