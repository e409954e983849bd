"""kill -9 one of three workers in the middle of a 3,000-job run: nothing is lost."""

from __future__ import annotations

import signal
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from tickq import Queue
from workerproc import WorkerProcess, eventually, runs

JOBS = 3000
LEASE = "4"


@pytest.mark.timeout(120)
def test_kill_9_mid_run_loses_no_job(db_url: str, tmp_path: Path) -> None:
    q = Queue(db_url, strict=False)
    q.migrate()
    ids = q.enqueue_many([("work", {"seconds": 0.001})] * JOBS)
    env = {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_RUNS": str(tmp_path),
           "TICKQ_TEST_LEASE": LEASE}  # fmt: skip
    victim_env = dict(env, TICKQ_TEST_STALL_AFTER="100")
    victim_name = f"tickq-victim-{uuid.uuid4().hex[:12]}"
    if db_url.startswith("postgres"):
        victim_env["TICKQ_DATABASE_URL"] = f"{db_url}&application_name={victim_name}"
    args = ("--concurrency", "4", "--poll-interval", "0.5")
    # The victim hangs in its 101st job, so it surely holds a job when it is killed.
    with (
        WorkerProcess(*args, **victim_env) as victim,
        WorkerProcess(*args, **env) as second,
        WorkerProcess(*args, **env) as third,
    ):
        eventually(lambda: any(n["event"] == "stall" for n in runs(tmp_path)), timeout=60,
                   what="the victim to reach its stalling job")  # fmt: skip
        victim.send(signal.SIGKILL)
        assert victim.wait() == -signal.SIGKILL
        # Postgres may still be running what the victim sent just before it died: look
        # once the server has let go of its connections.
        eventually(lambda: not _backends(db_url, victim_name), what="the victim's backends")
        held = [j.id for j in q.list_jobs("running", limit=JOBS)
                if f":{victim.pid}:" in (j.lease_owner or "")]  # fmt: skip
        eventually(lambda: q.stats()["by_status"]["done"] == JOBS, timeout=90,
                   what="every job to be done")  # fmt: skip
        for w in (second, third):
            w.send(signal.SIGTERM)
            assert w.wait() == 0, w.output

    assert q.stats()["by_status"] == {"pending": 0, "running": 0, "done": JOBS, "failed": 0,
                                      "cancelled": 0}  # fmt: skip
    starts: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for n in runs(tmp_path):
        if n["event"] == "start":
            starts[n["id"]].append((n["attempt"], n["pid"]))
    assert set(starts) == set(ids)

    stalled = next(n["id"] for n in runs(tmp_path) if n["event"] == "stall")
    assert stalled in held
    # Each job the dead worker held came back: rescued with its attempt counted if its start
    # had reached the database, else refunded (not counted; the history says so).
    history = {i: [(a.attempt, a.outcome) for a in q.attempts(i)] for i in ids}
    rescued = {i for i in ids if (1, "lease_expired") in history[i]}
    refunded = {i for i in ids if (1, "refunded") in history[i]}
    assert not rescued & refunded and rescued | refunded == set(held), (
        f"only and every job the dead worker held came back: held {sorted(held)}, "
        f"rescued {sorted(rescued)}, refunded {sorted(refunded)}"
    )
    for job_id in rescued:
        attempt, *then = q.attempts(job_id)
        assert (attempt.attempt, attempt.outcome) == (1, "lease_expired")
        assert [a.outcome for a in then] in ([], ["running"], ["done"])
        assert f":{victim.pid}:" in (attempt.error or "")
        job = q.get_job(job_id)
        assert job is not None and job.attempts == 2
        # It ran again on a live worker after its lease ran out (at least once).
        assert starts[job_id][-1][0] == 2 and starts[job_id][-1][1] != victim.pid
    for job_id in refunded:
        assert history[job_id] == [(1, "refunded"), (1, "done")]
        assert f":{victim.pid}:" in (q.attempts(job_id)[0].error or "")
        assert q.get_job(job_id).attempts == 1  # type: ignore[union-attr]
        assert starts[job_id][-1][0] == 1 and starts[job_id][-1][1] != victim.pid
    # No attempt is spent on a job that never started: every claim is unconfirmed until a
    # later round trip records its start.
    never_started = {i for i in rescued if (1, victim.pid) not in starts[i]}
    assert never_started == set(), f"{len(never_started)} never-started jobs lost an attempt"
    ran_twice = {i for i, s in starts.items() if len(s) > 1}
    assert ran_twice <= set(held), "no job ran twice unless its worker died holding it"
    # A refunded job the victim had started (its start not yet recorded) ran once more,
    # uncounted and recorded as refunded: at most one such run per job.
    assert all(len(starts[i]) <= 2 for i in refunded), {i: starts[i] for i in refunded}
    q.close()


def _backends(db_url: str, name: str) -> int:
    if not db_url.startswith("postgres"):
        return 0
    import psycopg

    from conftest import PG_URL

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    return int(row[0]) if row else 0
