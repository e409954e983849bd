"""Job results (issue 16, Results): a job's JSON-serialisable return value is stored."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from tickq import JobState, Queue


def test_a_return_value_round_trips_and_none_stays_none(queue: Queue) -> None:
    @queue.job()
    def total(a: int, b: int) -> dict[str, object]:
        return {"sum": a + b, "parts": [a, b], "text": "é"}

    @queue.job()
    def nothing() -> None:
        return None

    @queue.job()
    async def later(n: int) -> str:
        await asyncio.sleep(0)
        return f"n={n}"

    ids = [total.enqueue(a=2, b=3), nothing.enqueue(), later.enqueue(n=7)]
    assert queue.process_jobs()["succeeded"] == 3
    results = [queue.get_job(i).result for i in ids]  # type: ignore[union-attr]
    assert results == [{"sum": 5, "parts": [2, 3], "text": "é"}, None, "n=7"]


def test_a_pending_job_has_no_result(queue: Queue) -> None:
    @queue.job()
    def one() -> int:
        return 1

    job = queue.get_job(one.enqueue())
    assert job is not None and job.result is None


def test_a_value_json_cannot_carry_fails_the_attempt(queue: Queue) -> None:
    @queue.job(max_attempts=1)
    def odd() -> object:
        return {1, 2}

    job_id = odd.enqueue()
    assert queue.process_jobs()["failed"] == 1
    job = queue.get_job(job_id)
    assert job is not None and job.status is JobState.FAILED and job.result is None
    assert "returned a set that is not JSON-serialisable" in (job.last_error or "")


def test_results_go_with_their_job_when_pruned(queue: Queue) -> None:
    @queue.job()
    def one() -> int:
        return 1

    job_id = one.enqueue()
    queue.process_jobs()
    assert queue.get_job(job_id).result == 1  # type: ignore[union-attr]
    assert queue.prune(timedelta(0)) == 1
    assert queue.get_job(job_id) is None
