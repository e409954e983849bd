"""Attempt history, bulk retry, totals that survive pruning, and the figures of stats()."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tickq import Cancel, FrozenClock, InvalidTransition, JobState, Queue, Retry
from tickq.job import split_error
from tickq.store import Outcome


def _fails(n: int = 0) -> None:
    raise KeyError(f"missing row {n}")


def test_every_attempt_has_start_end_outcome_and_error(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue
    calls: list[int] = []

    @q.job(max_attempts=3, backoff=(10,))
    def import_orders() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("feed truncated\nsecond line of the message")
        if len(calls) == 2:
            clock.advance(seconds=2)  # a slow attempt
            raise Retry(5, "rate limited")

    job_id = import_orders.enqueue()
    started = clock.now()
    q.process_jobs()
    clock.advance(seconds=10)
    q.process_jobs()
    clock.advance(seconds=5)
    q.process_jobs()

    first, second, third = q.attempts(job_id)
    assert (first.attempt, first.outcome, first.error_type) == (1, "error", "ValueError")
    assert first.error_message == "feed truncated\nsecond line of the message"
    assert first.traceback and first.traceback.startswith("Traceback (most recent call last):")
    assert first.started_at == started and first.finished_at == started
    assert first.seconds is not None and first.duration == first.seconds  # measured, not clock
    assert (second.outcome, second.error_type, second.error_message) == (
        "error", "Retry", "rate limited")  # fmt: skip
    assert second.finished_at - second.started_at == timedelta(seconds=2)  # type: ignore[operator]
    assert (third.attempt, third.outcome, third.error) == (3, "done", None)
    assert third.finished_at is not None
    assert third.to_dict()["outcome"] == "done"


def test_running_and_cancelled_on_request_attempts_are_kept(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue
    q.job(name="transcode")(_fails)
    job_id = q.enqueue("transcode", {"n": 1})
    q._store.claim("worker-a", 1, 60)
    [running] = q.attempts(job_id)
    assert (running.outcome, running.finished_at, running.duration) == ("running", None, None)

    clock.advance(seconds=3)
    assert q.cancel(job_id).status == JobState.RUNNING  # asked to stop; worker-a never hears
    clock.advance(seconds=60)  # worker-a is gone: its lease runs out
    assert q.process_jobs()["cancelled"] == 1
    [cancelled] = q.attempts(job_id)
    assert (cancelled.outcome, cancelled.error_type) == ("cancelled", "Cancel")
    assert cancelled.duration == 63  # nothing measured it: from start to end
    assert "while attempt 1 was running on worker-a" in (cancelled.error_message or "")


def test_lease_expired_and_cancel_outcomes(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue

    @q.job()
    def stop_now() -> None:
        raise Cancel("customer closed the account")

    q.job(name="crashy", max_attempts=2)(_fails)
    crashed = q.enqueue("crashy", {"n": 2})
    stopped = stop_now.enqueue()
    # Takes crashy (the older job), starts it (recorded), then never returns.
    started = q._store.claim("dead-worker", 1, 5)
    q._store.record_and_claim("dead-worker", [], 0, 5, started=started)
    clock.advance(seconds=10)
    q.process_jobs()

    assert [(a.outcome, a.error_type) for a in q.attempts(crashed)] == [
        ("lease_expired", "LeaseExpired"), ("error", "KeyError")]  # fmt: skip
    assert [(a.outcome, a.error_type) for a in q.attempts(stopped)] == [("cancelled", "Cancel")]


def test_durations_are_measured_per_attempt_not_per_batch(frozen_queue: Queue) -> None:
    q = frozen_queue

    @q.job()
    def quick(n: int) -> None:
        pass

    ids = [quick.enqueue(n=n) for n in range(3)]
    q.process_jobs()
    measured = [q.attempts(i)[0].seconds for i in ids]
    assert all(m is not None for m in measured)
    h = q.stats()["duration_seconds"]["default"]["quick"]
    assert h["count"] == 3
    assert h["sum"] == pytest.approx(sum(measured), abs=1e-5)  # type: ignore[arg-type]


def record(q: Queue, kind: str, durations: list[float], job_type: str = "resize") -> list[int]:
    """Claim one job per duration and record ``kind`` with exactly that duration."""
    ids = q.enqueue_many([(job_type, {"n": n}) for n in range(len(durations))])
    jobs = q._store.claim("w", len(ids), 60)
    error = "OSError: disk full" if kind != "succeeded" else None
    outcomes = [Outcome(j, kind, error, 1.0, d) for j, d in zip(jobs, durations, strict=True)]
    q._store.record("w", outcomes)
    return ids


def test_histogram_buckets_and_totals_survive_prune(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue
    q.job(name="resize")(_fails)
    record(q, "succeeded", [0.003, 0.2, 0.2, 7.0])
    record(q, "retried", [0.04])
    before = q.stats()
    assert before["processed"]["default"] == {"resize": {"done": 4, "error": 1}}
    h = before["duration_seconds"]["default"]["resize"]
    assert (h["count"], h["sum"]) == (5, pytest.approx(7.443))
    wanted = {"0.005": 1, "0.025": 1, "0.05": 2, "0.25": 4, "5.0": 4, "10.0": 5, "+Inf": 5}
    assert {le: h["buckets"][le] for le in wanted} == wanted

    clock.advance(days=8)
    progress: list[int] = []
    assert q._store.prune(timedelta(days=7), batch=3, progress=progress.append) == 4
    assert progress == [3, 4]
    after = q.stats()
    assert after["processed"] == before["processed"]
    assert after["duration_seconds"] == before["duration_seconds"]
    assert after["by_status"]["done"] == 0 and after["by_status"]["pending"] == 1

    record(q, "succeeded", [0.2])
    clock.advance(days=8)
    q._store.prune(timedelta(days=7))  # the same bucket again: added to, not replaced
    h = q.stats()["duration_seconds"]["default"]["resize"]
    assert (h["count"], h["buckets"]["0.25"]) == (6, 5)


def test_prune_takes_the_attempts_with_the_job(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue
    q.job(name="flaky", max_attempts=2, backoff=(1,))(_fails)
    flaky_id = q.enqueue("flaky", {"n": 1})
    q.process_jobs()
    clock.advance(seconds=1)
    q.process_jobs()
    assert len(q.attempts(flaky_id)) == 2
    clock.advance(days=8)
    assert q.prune(timedelta(days=7)) == 1
    assert q.get_job(flaky_id) is None and q.attempts(flaky_id) == []
    assert q.stats()["processed"]["default"]["flaky"] == {"error": 2}


def test_retry_failed_in_batches_skips_jobs_whose_key_is_taken(frozen_queue: Queue) -> None:
    q = frozen_queue
    q.job(name="sync", max_attempts=1)(_fails)
    q.job(name="other", max_attempts=1)(_fails)
    for n in range(5):
        q.enqueue("sync", {"n": n})
    q.enqueue("other", {"n": 9})
    keyed = q.enqueue("sync", {"n": 7}, unique_key="sync:7")
    q.process_jobs()
    q.enqueue("sync", {"n": 7}, unique_key="sync:7")  # an active job now holds the key

    seen: list[tuple[int, int]] = []
    assert q.retry_failed("sync", batch=2, progress=lambda d, t: seen.append((d, t))) == 5
    assert seen == [(2, 6), (4, 6), (5, 6)]
    assert q.get_job(keyed).status == JobState.FAILED  # type: ignore[union-attr]
    assert q.stats()["by_type"]["other"] == {"failed": 1}
    retried = q.list_jobs(status="pending", type="sync")
    assert all(j.max_attempts == 2 for j in retried if j.unique_key is None)


def test_retry_and_cancel_say_why_not(frozen_queue: Queue) -> None:
    q = frozen_queue

    @q.job()
    def ok() -> None:
        pass

    job_id = ok.enqueue()
    q.process_jobs()
    with pytest.raises(InvalidTransition, match="it already succeeded; enqueue a new job"):
        q.retry(job_id)
    with pytest.raises(InvalidTransition, match="it already finished"):
        q.cancel(job_id)


def test_stats_has_failures_in_the_last_hour(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue
    q.job(name="flaky", max_attempts=2, backoff=(1,))(_fails)
    q.enqueue("flaky", {"n": 1})
    q.process_jobs()
    clock.advance(seconds=1)
    q.process_jobs()
    stats = q.stats()
    assert (stats["failed_last_hour"], stats["failed_attempts_last_hour"]) == (1, 2)
    clock.advance(hours=2)
    stats = q.stats()
    assert (stats["failed_last_hour"], stats["failed_attempts_last_hour"]) == (0, 0)


@pytest.mark.parametrize(
    ("stored", "parts"),
    [
        (None, (None, None, None)),
        ("ValueError: bad\nTraceback (most recent call last):\n  File x\nValueError: bad\n",
         ("ValueError", "bad", "Traceback (most recent call last):\n  File x\nValueError: bad\n")),
        ("LeaseExpired: attempt 2 was claimed by w", ("LeaseExpired", "attempt 2 was claimed by w",
                                                      None)),
        ("requests.exceptions.HTTPError: 502", ("requests.exceptions.HTTPError", "502", None)),
        ("something odd happened", (None, "something odd happened", None)),
    ],
)  # fmt: skip
def test_split_error(stored: str | None, parts: tuple[str | None, ...]) -> None:
    assert split_error(stored) == parts
