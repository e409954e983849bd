"""Queue controls with real ``tickq worker`` processes: concurrency and rate limits hold
across workers, pause stops every worker's claims and resume restarts them, and a killed
worker's concurrency slot comes back when its lease runs out."""

from __future__ import annotations

import signal
import time
from datetime import datetime
from pathlib import Path

import pytest

from tickq import Queue
from workerproc import WorkerProcess, eventually, runs

APP = "apps.controls_app:q"
POLL = "0.2"


def workers(
    n: int, db_url: str, runs_dir: Path, *args: str, lease: str = "60"
) -> list[WorkerProcess]:
    env = {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_RUNS": str(runs_dir),
           "TICKQ_TEST_LEASE": lease}  # fmt: skip
    procs = [WorkerProcess(*args, app=APP, **env) for _ in range(n)]
    for w in procs:
        w.wait_for_line("listening for enqueues")  # up and claiming before jobs arrive
    return procs


def stop(procs: list[WorkerProcess]) -> None:
    for w in procs:
        w.send(signal.SIGTERM)
    for w in procs:
        assert w.wait() == 0, w.output


def queue(db_url: str) -> Queue:
    q = Queue(db_url, strict=False)  # enqueues by name; registers nothing, claims nothing
    q.migrate()
    return q


def done(q: Queue, n: int) -> bool:
    return bool(q.stats()["by_status"]["done"] == n)


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment (an end before a start at the same time)."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = running = 0
    for _, step in edges:
        running += step
        best = max(best, running)
    return best


def intervals(runs_dir: Path, job_type: str) -> list[tuple[float, float]]:
    notes = [n for n in runs(runs_dir) if n["type"] == job_type]
    starts = {n["id"]: n["at"] for n in notes if n["event"] == "start"}
    ends = {n["id"]: n["at"] for n in notes if n["event"] == "end"}
    assert starts.keys() == ends.keys()
    return [(starts[i], ends[i]) for i in starts]


@pytest.mark.timeout(120)
def test_concurrency_2_holds_across_three_workers_of_8_slots(db_url: str, tmp_path: Path) -> None:
    q = queue(db_url)
    # Each worker runs one queue, so all three claim jobs of the type: only the limit,
    # checked in the database, keeps them to two at once between them.
    procs = [
        *workers(
            1, db_url, tmp_path, "--queues", "q1", "--concurrency", "8", "--poll-interval", POLL
        ),
        *workers(
            1, db_url, tmp_path, "--queues", "q2", "--concurrency", "8", "--poll-interval", POLL
        ),
        *workers(
            1, db_url, tmp_path, "--queues", "q3", "--concurrency", "8", "--poll-interval", POLL
        ),
    ]
    q.enqueue_many([("capped", {"seconds": 0.1}, {"queue": f"q{i % 3 + 1}"}) for i in range(40)])
    try:
        eventually(lambda: done(q, 40), timeout=90, what="40 capped jobs done")
    finally:
        stop(procs)
    spans = intervals(tmp_path, "capped")
    assert len(spans) == 40
    assert most_at_once(spans) == 2  # never more, and the limit was used
    pids = {n["pid"] for n in runs(tmp_path)}
    assert len(pids) == 3, "every worker ran some"
    assert all(j.attempts == 1 for j in q.list_jobs("done", limit=40))


@pytest.mark.timeout(120)
def test_rate_limit_5_per_second_holds_across_workers(db_url: str, tmp_path: Path) -> None:
    q = queue(db_url)
    ids = q.enqueue_many([("throttled", {})] * 30)
    procs = workers(2, db_url, tmp_path, "--concurrency", "8", "--poll-interval", POLL)
    try:
        eventually(lambda: done(q, 30), timeout=90, what="30 throttled jobs done")
    finally:
        stop(procs)
    claimed = sorted(q.get_job(i).attempted_at for i in ids)  # type: ignore[union-attr,type-var]
    started = sorted(s for s, _ in intervals(tmp_path, "throttled"))
    for times, slack in ((claimed, 0.02), (started, 0.1)):
        # Any six starts span at least a second: no one-second window holds more than five.
        spans = [_seconds(times[i + 5], times[i]) for i in range(len(times) - 5)]
        assert min(spans) >= 1.0 - slack, spans
    assert _seconds(claimed[-1], claimed[0]) < 9.0  # and the limit was used, not starved
    assert all(j.attempts == 1 for j in q.list_jobs("done", limit=30))


def _seconds(later: datetime | float, earlier: datetime | float) -> float:
    if isinstance(later, datetime) and isinstance(earlier, datetime):
        return (later - earlier).total_seconds()
    return float(later) - float(earlier)  # type: ignore[arg-type]


@pytest.mark.timeout(120)
def test_pause_stops_every_worker_and_resume_restarts_them(db_url: str, tmp_path: Path) -> None:
    q = queue(db_url)
    procs = workers(2, db_url, tmp_path, "--concurrency", "2", "--poll-interval", POLL)
    try:
        q.enqueue_many([("email", {"seconds": 0.05}, {"queue": "emails"})] * 300)
        eventually(lambda: q.stats()["by_status"]["done"] >= 20, timeout=30,
                   what="the workers to be busy with emails")  # fmt: skip
        assert q.pause("emails") is True
        paused_at = q._store.now()
        q.enqueue("chore", {})  # other queues go on
        eventually(lambda: done_of(q, "chore") == 1, what="the chore in another queue")
        settled = float(POLL) + 0.5
        time.sleep(settled)  # what was claimed before the pause finishes
        left = q.stats()["by_status"]
        assert left["pending"] > 0 and left["running"] == 0
        late = [j for j in q.list_jobs(type="email", limit=300)
                if j.attempted_at and j.attempted_at > paused_at + _td(0.1)]  # fmt: skip
        assert late == [], f"{len(late)} emails claimed after the pause"
        time.sleep(float(POLL) * 2)
        assert q.stats()["by_status"]["pending"] == left["pending"]
        assert q.resume("emails") is True
        eventually(lambda: done_of(q, "email") == 300, timeout=60, what="every email")
    finally:
        stop(procs)


def done_of(q: Queue, job_type: str) -> int:
    return len(q.list_jobs("done", type=job_type, limit=1000))


def _td(seconds: float):  # type: ignore[no-untyped-def]
    from datetime import timedelta

    return timedelta(seconds=seconds)


@pytest.mark.timeout(120)
def test_a_killed_workers_slot_comes_back_when_its_lease_runs_out(
    db_url: str, tmp_path: Path
) -> None:
    q = queue(db_url)
    [first] = q.enqueue_many([("solo", {"hang_first": True})])
    [victim] = workers(1, db_url, tmp_path, "--poll-interval", POLL, lease="3")
    with victim:
        eventually(lambda: any(n["id"] == first for n in runs(tmp_path)),
                   what="the victim to start the first solo job")  # fmt: skip
        [survivor] = workers(1, db_url, tmp_path, "--poll-interval", POLL, lease="3")
        with survivor:
            second = q.enqueue("solo", {})
            time.sleep(1.0)
            assert q.get_job(second).status.value == "pending"  # type: ignore[union-attr]
            victim.send(signal.SIGKILL)
            assert victim.wait() == -signal.SIGKILL
            held = q.get_job(first)
            assert held is not None and held.lease_expires_at is not None
            eventually(lambda: done_of(q, "solo") == 2, timeout=30,
                       what="both solo jobs done on the survivor")  # fmt: skip
            stop([survivor])
    ran = q.get_job(second)
    assert ran is not None and ran.attempted_at is not None
    # The slot came back only once the dead worker's lease had run out (not before), and
    # then promptly (its lease plus a few polls).
    assert ran.attempted_at >= held.lease_expires_at
    assert (ran.attempted_at - held.lease_expires_at).total_seconds() < 5
    again = q.get_job(first)
    assert again is not None and again.attempts == 2
    assert [a.outcome for a in q.attempts(first)] == ["lease_expired", "done"]
