"""What a job does -> the outcome the executor returns -> the row ``job.STATE_MACHINE``
says it moves to, the report field and the attempt history: one table, both backends."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from tickq import Cancel, FrozenClock, Queue, Retry, Snooze
from tickq.job import TRANSITIONS


def returns() -> None:
    return None


def raises() -> None:
    raise ValueError("boom")


def asks_retry() -> None:
    raise Retry(30)


def cancels() -> None:
    raise Cancel("not needed any more")


def snoozes() -> None:
    raise Snooze(30)


BEHAVIOURS: dict[str, Callable[[], None]] = {
    "returns": returns, "raises": raises, "asks_retry": asks_retry, "cancels": cancels,
    "snoozes": snoozes,
}  # fmt: skip

# (what the job does, max_attempts) -> the outcome word
TABLE = [
    ("returns", 3, "succeeded"),
    ("returns", 1, "succeeded"),
    ("raises", 3, "retried"),
    ("raises", 1, "failed"),  # out of attempts
    ("asks_retry", 3, "retried"),
    ("asks_retry", 1, "failed"),
    ("cancels", 3, "cancelled"),
    ("cancels", 1, "cancelled"),
    ("snoozes", 3, "snoozed"),
    ("snoozes", 1, "snoozed"),  # no attempt used: never out of attempts
]


@pytest.mark.parametrize(("does", "max_attempts", "word"), TABLE)
def test_what_a_job_does_moves_it_as_the_table_says(
    frozen_queue: Queue,
    clock: FrozenClock,
    caplog: pytest.LogCaptureFixture,
    does: str,
    max_attempts: int,
    word: str,
) -> None:
    q = frozen_queue
    q.job(name="work", max_attempts=max_attempts, backoff=[10])(BEHAVIOURS[does])
    job_id = q.enqueue("work", {})
    with caplog.at_level(logging.INFO, logger="tickq"):
        report = q.process_jobs()
    events = [(r.event, r.outcome) for r in caplog.records if hasattr(r, "outcome")]
    assert events == [(word, word)]  # the log says it in the report's word
    assert report["claimed"] == 1 and report[word] == 1
    assert sum(report[w] for w in ("succeeded", "retried", "snoozed", "failed", "cancelled")) == 1
    job = q.get_job(job_id)
    transition = TRANSITIONS[word]
    assert job is not None and job.status is transition.target
    assert job.attempts == 1 + transition.attempts
    [attempt] = q.attempts(job_id)
    assert attempt.outcome == transition.counted


def test_an_unknown_job_type_is_retried_then_failed(db_url: str, clock: FrozenClock) -> None:
    q = Queue(db_url, clock=clock, strict=False)  # enqueues types another process handles
    q.migrate()
    job_id = q.enqueue("nobody_handles_this", {}, max_attempts=2)
    assert q.process_jobs()["retried"] == 1
    clock.advance(hours=1)
    assert q.process_jobs()["failed"] == 1
    job = q.get_job(job_id)
    assert job is not None and job.status is TRANSITIONS["failed"].target
    q.close()
