"""Limited types claimed ahead of a worker's free slots, with real ``tickq worker``
processes: a job waiting in a worker's line counts as running, so a type-wide
concurrency limit holds across workers however many each claims ahead; and a rate-limited
job claimed ahead counts as started at the latest time it may start (the worker starts it
by then or gives it back), so no window holds more starts than the limit."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from test_controls_workers import _seconds, done, intervals, most_at_once, queue, stop, workers
from tickq import Queue

POLL = "0.2"
SLOTS = "2"  # per worker: fewer than either limit allows, so the line fills up


def sample_running(q: Queue, job_type: str, jobs: int, timeout: float) -> list[Counter[str]]:
    """Every few milliseconds until ``jobs`` are done: the type's running jobs (started
    or waiting in a worker's line) by the worker holding them, one query each."""
    samples: list[Counter[str]] = []
    deadline = time.monotonic() + timeout
    while not done(q, jobs):
        assert time.monotonic() < deadline, f"{jobs} {job_type} jobs not done in {timeout}s"
        running = q.list_jobs("running", type=job_type, limit=1000)
        samples.append(Counter(str(j.lease_owner) for j in running))
        time.sleep(0.003)
    return samples


@pytest.mark.timeout(120)
def test_concurrency_holds_across_three_workers_claiming_ahead(
    db_url: str, tmp_path: Path
) -> None:
    q = queue(db_url)
    procs = workers(3, db_url, tmp_path, "--concurrency", SLOTS, "--poll-interval", POLL)
    q.enqueue_many([("brisk", {})] * 400)
    try:
        samples = sample_running(q, "brisk", 400, timeout=90)
    finally:
        stop(procs)
    # Each worker would claim ten ahead at this pace: the limit holds them to its room. In
    # the database, started or waiting in a line: never more than the limit...
    assert max(sum(s.values()) for s in samples) <= 8
    # ...while the workers did claim ahead: one held more than its slots at once.
    assert max(max(s.values(), default=0) for s in samples) > int(SLOTS), samples[-50:]
    spans = intervals(tmp_path, "brisk")
    assert len(spans) == 400
    assert 2 <= most_at_once(spans) <= 6  # the runs themselves (3 workers of 2 slots)
    assert all(j.attempts == 1 for j in q.list_jobs("done", type="brisk", limit=400))


@pytest.mark.timeout(120)
def test_rate_limit_holds_across_workers_claiming_ahead(db_url: str, tmp_path: Path) -> None:
    q = queue(db_url)
    n = 300
    procs = workers(3, db_url, tmp_path, "--concurrency", SLOTS, "--poll-interval", POLL)
    ids = q.enqueue_many([("paced", {})] * n)
    try:
        samples = sample_running(q, "paced", n, timeout=90)
    finally:
        stop(procs)
    assert max(max(s.values(), default=0) for s in samples) > int(SLOTS), "none claimed ahead"
    claimed = sorted(q.get_job(i).attempted_at for i in ids)  # type: ignore[union-attr,type-var]
    started = sorted(s for s, _ in intervals(tmp_path, "paced"))
    assert len(started) == n
    for times, slack in ((claimed, 0.02), (started, 0.1)):
        # Any 101 starts span at least a second: no one-second window holds more than 100.
        spans = [_seconds(times[i + 100], times[i]) for i in range(len(times) - 100)]
        assert min(spans) >= 1.0 - slack, min(spans)
    assert _seconds(claimed[-1], claimed[0]) < 6.0  # and the limit was used, not starved
    assert all(j.attempts == 1 for j in q.list_jobs("done", type="paced", limit=n))
