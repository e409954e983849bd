"""kill -9 a tick mid-run: it cost exactly the job it was running, nothing else.

With ``max_attempts=1`` every burned attempt would fail a job for good, so the counts are
exact: jobs it never started spend no attempt (pending, or claimed ahead of it and
refunded once their lease runs out), jobs it finished are done and never run again, and
the job it was running comes back once its lease runs out, its unconfirmed start refunded
once. Meanwhile ticks report that job as coming due at its lease expiry, not "nothing
due".
"""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import ROOT, tickq_env
from tickq import FrozenClock, JobContext, Queue
from workerproc import eventually, runs

pytestmark = pytest.mark.timeout(120)
JOBS = 20
STALL_AFTER = 5  # the tick hangs in its 6th job, then is killed


def test_kill_9_mid_tick_costs_only_the_job_in_flight(db_url: str, tmp_path: Path) -> None:
    clock = FrozenClock()
    q = Queue(db_url, clock=clock, lease_seconds=60, strict=False)
    q.migrate()
    ran_here: list[int] = []

    @q.job()
    def work(ctx: JobContext, seconds: float = 0.0) -> None:
        ran_here.append(ctx.id)

    ids = q.enqueue_many([("work", {}, {"max_attempts": 1})] * JOBS)
    env = tickq_env(TICKQ_DATABASE_URL=db_url, TICKQ_TEST_RUNS=str(tmp_path),
                    TICKQ_TEST_STALL_AFTER=str(STALL_AFTER), TICKQ_TEST_LEASE="60")  # fmt: skip
    tick = subprocess.Popen(
        [sys.executable, "-m", "tickq", "tick", "apps.worker_app:q", "--limit", "100"],
        env=env, cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        eventually(lambda: any(n["event"] == "stall" for n in runs(tmp_path)), timeout=60,
                   what="the tick to reach its stalling job")  # fmt: skip
        tick.send_signal(signal.SIGKILL)
        assert tick.wait(30) == -signal.SIGKILL
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.wait(10)

    notes = runs(tmp_path)
    started = [n["id"] for n in notes if n["event"] == "start"]
    finished = {n["id"] for n in notes if n["event"] == "end"}
    (in_flight,) = [n["id"] for n in notes if n["event"] == "stall"]
    assert len(started) == STALL_AFTER + 1 == len(set(started))
    assert finished == set(started) - {in_flight}
    jobs = {i: q.get_job(i) for i in ids}
    for i in finished:  # recorded as each finished: a kill can't make them run again
        assert jobs[i].status == "done" and jobs[i].attempts == 1, jobs[i]  # type: ignore[union-attr]
    never_started = set(ids) - set(started)
    # Short jobs are claimed ahead, a few at a time: those the kill left in the tick's line
    # are running with their attempt unconfirmed (refunded at lease expiry), the rest pending.
    ahead = {i for i in never_started if jobs[i].status == "running"}  # type: ignore[union-attr]
    for i in never_started - ahead:
        assert jobs[i].status == "pending" and jobs[i].attempts == 0, jobs[i]  # type: ignore[union-attr]
    held = jobs[in_flight]
    assert held is not None and held.status == "running" and held.attempts == 1
    for i in ahead:
        assert jobs[i].attempts == 1 and jobs[i].lease_expires_at == held.lease_expires_at  # type: ignore[union-attr]

    report = q.tick()  # runs the pending jobs; the killed one and its line wait out the lease
    assert report["jobs"]["succeeded"] == len(never_started - ahead)
    assert sorted(ran_here) == sorted(never_started - ahead)
    assert report["remaining_due"] == 0
    assert report["next_due_at"] == held.lease_expires_at.isoformat()  # type: ignore[union-attr]

    clock.advance(timedelta(seconds=120))  # past the killed tick's lease
    report = q.tick()
    # The killed job's start was never confirmed (a tick records it with the job's outcome,
    # which never came): its attempt is refunded, once, and the refund is in its history;
    # it runs again here, with max_attempts=1, as its first counted attempt. So do the jobs
    # claimed ahead of it, which never started.
    assert report["jobs"]["refunded"] == 1 + len(ahead) and report["jobs"]["rescued"] == 0
    assert report["jobs"]["succeeded"] == 1 + len(ahead) and report["jobs"]["failed"] == 0
    assert report["next_due_at"] is None
    for i in (in_flight, *ahead):
        [refund, done] = q.attempts(i)
        assert [(a.attempt, a.outcome) for a in (refund, done)] == [(1, "refunded"), (1, "done")]
        assert "not counted" in (refund.error or "")
    assert q.stats()["by_status"] == {"pending": 0, "running": 0, "done": JOBS,
                                      "failed": 0, "cancelled": 0}  # fmt: skip
    for i in finished:
        assert [a.outcome for a in q.attempts(i)] == ["done"]
    assert sorted(ran_here) == sorted([*never_started, in_flight]), "no finished job ran again"
    q.close()
