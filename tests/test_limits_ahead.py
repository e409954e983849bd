"""Limited types claimed ahead of a worker's free slots, with real ``tickq worker``
processes: a job waiting in a worker's line counts as running, so a type-wide
concurrency limit holds across workers however many each claims ahead; and a rate-limited
job claimed ahead counts as started at the latest time it may start (the worker starts it
by then or gives it back), so no window holds more starts than the limit."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from test_controls_workers import _seconds, done, intervals, most_at_once, queue, stop, workers
from tickq import FrozenClock, Queue
from tickq.held import Holdings
from tickq.job import Job, JobState
from tickq.pool import JobPool
from tickq.store import Outcome

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
def test_concurrency_holds_across_three_workers_claiming_ahead(db_url: str, tmp_path: Path) -> None:
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


# The claim itself, one process, on an injected clock ----------------------------------


def limited_queue(db_url: str, clock: FrozenClock) -> Queue:
    q = Queue(db_url, clock=clock)

    @q.job(concurrency=3)
    def capped3() -> None: ...

    @q.job(rate_limit="4/s")
    def rated4() -> None: ...

    q.migrate()
    q._runtime.declare_limits()
    return q


def claim_ahead(
    q: Queue, ahead: int, wait: float | None, limit: int = 0
) -> tuple[list[str], set[int]]:
    recorded, jobs = q._store.record_and_claim(
        q._runtime.owner, [], limit, 30.0, None, True, ahead, (), wait
    )
    return [j.type for j in jobs], recorded.ahead


def test_a_claim_ahead_takes_a_limited_type_only_within_its_room(db_url: str) -> None:
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    q = limited_queue(db_url, clock)
    q.enqueue_many([("capped3", {})] * 6)
    types, ahead = claim_ahead(q, 10, None, limit=1)  # one for a slot, the rest ahead
    assert types == ["capped3"] * 3 and len(ahead) == 2  # the line counts as running
    assert claim_ahead(q, 10, None) == ([], set())  # no room left: none
    q.close()


def test_a_rate_limited_type_is_claimed_ahead_only_given_a_start_deadline(db_url: str) -> None:
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    q = limited_queue(db_url, clock)
    q.enqueue_many([("rated4", {})] * 8)
    assert claim_ahead(q, 10, None) == ([], set())  # it can't promise when they start
    types, ahead = claim_ahead(q, 10, 0.25)
    assert types == ["rated4"] * 4 and len(ahead) == 4
    # Their starts count as at the deadline: a second after the claim the window still
    # holds them, a second after the deadline it no longer does.
    clock.advance(timedelta(seconds=1.2))
    assert claim_ahead(q, 10, 0.25) == ([], set())
    clock.advance(timedelta(seconds=0.1))
    assert claim_ahead(q, 10, 0.25)[0] == ["rated4"] * 4
    q.close()


def test_a_job_claimed_ahead_past_its_start_deadline_is_withdrawn_unstarted(
    tmp_path: Path,
) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'pool.db'}")
    ran: list[int] = []
    release = threading.Event()

    @q.job()
    def quick(n: int) -> None:
        if n == 1:
            release.wait(10)
        ran.append(n)

    now = datetime.now(UTC)
    jobs = [Job(i, "quick", "default", {"n": i}, JobState.RUNNING, 0, 1, 4, now, None, None,
                now, now) for i in (1, 2, 3)]  # fmt: skip
    clock = [100.0]
    holdings = Holdings(clock=lambda: clock[0])
    holdings.add(jobs, 30)
    holdings.must_start_by([jobs[1]], 100.1)  # job 2: a rate-limited job claimed ahead
    outcomes: list[Outcome] = []
    two_in = threading.Event()

    def done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 2:
            two_in.set()

    pool = JobPool(1, q._runtime.registry, done, holdings=holdings)
    pool.submit(jobs)
    clock[0] = 100.2  # job 1 holds the one slot past job 2's deadline
    release.set()
    assert two_in.wait(10)
    pool.close()
    assert ran == [1, 3]  # job 2 never started...
    assert holdings.withdrawn() == [jobs[1]]  # ...and is to be given back
    assert [o.job.id for o in outcomes] == [1, 3]
    q.close()
