"""A worker claims no more jobs than it has free slots, and never strands them.

Jobs it cannot start at once stay pending for others (no attempt spent), and a job whose
lease is lost while it waits in the pool's line never runs.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickq import Job, JobState, Queue, SchemaMissing
from tickq.pool import JobPool
from tickq.store import Outcome
from workerproc import eventually

pytestmark = pytest.mark.timeout(60)


def test_a_busy_worker_leaves_other_jobs_pending_for_others(db_url: str) -> None:
    q = Queue(db_url)
    q.migrate()
    gate, ran = threading.Event(), []

    @q.job()
    def quick(n: int) -> None:
        ran.append(n)

    @q.job(priority=5)
    def slow() -> None:
        gate.wait(30)

    q.enqueue_many([("quick", {"n": -i}) for i in range(1, 6)])  # the worker learns the pace
    stop, totals = threading.Event(), []
    worker = threading.Thread(target=lambda: totals.append(q.run_worker(concurrency=1, stop=stop)))
    worker.start()
    try:
        eventually(lambda: q.stats()["by_status"]["done"] == 5, what="the warm-up jobs")
        ids = q.enqueue_many([("slow", {})] + [("quick", {"n": n}) for n in range(20)])
        eventually(lambda: q.get_job(ids[0]).status == "running", what="slow to start")  # type: ignore[union-attr]
        # The worker's one slot runs `slow`; it claims none of the quick jobs to wait in
        # line behind it, so they are here for others to run.
        eventually(lambda: q.process_jobs(limit=100)["succeeded"] == 0 and len(ran) == 25,
                   what="the quick jobs to come back and run here")  # fmt: skip
        assert not gate.is_set() and q.get_job(ids[0]).status == "running"  # type: ignore[union-attr]
    finally:
        gate.set()
        eventually(lambda: q.get_job(ids[0]).status == "done", what="slow to finish")  # type: ignore[union-attr]
        stop.set()
        worker.join(30)
    assert sorted(ran[5:]) == list(range(20))
    assert totals[0]["released"] == 0 and totals[0]["succeeded"] == 6
    assert all(q.get_job(i).attempts == 1 for i in ids)  # type: ignore[union-attr]
    q.close()


def test_a_job_whose_lease_is_lost_while_it_waits_never_runs(tmp_path: Path) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'pool.db'}")
    ran: list[int] = []

    @q.job()
    def quick(n: int) -> None:
        ran.append(n)

    now = datetime.now(UTC)
    jobs = [Job(i, "quick", "default", {"n": i}, JobState.RUNNING, 0, 1, 4, now, None, None,
                now, now) for i in (1, 2, 3)]  # fmt: skip
    outcomes: list[Outcome] = []
    all_in = threading.Event()

    def done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 3:
            all_in.set()

    pool = JobPool(1, q, done, skip=lambda job: job.id == 2)
    pool.submit(jobs)
    assert all_in.wait(10)
    pool.close()
    kinds = [(o.job.id, o.kind) for o in outcomes]
    assert kinds == [(1, "succeeded"), (2, "stale"), (3, "succeeded")]
    assert ran == [1, 3]


def _pg(url: str, sql: str) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else None


def test_postgres_claims_walk_the_claim_index_whatever_the_statistics(
    pg_schema_url: str,
) -> None:
    q = Queue(pg_schema_url, strict=False)
    q.migrate()
    ((config,),) = _pg(
        pg_schema_url,
        "SELECT proconfig FROM pg_proc "
        "WHERE proname = 'tickq_due' AND pronamespace = CAST(current_schema() AS regnamespace)",
    )
    assert {"enable_sort=off", "enable_bitmapscan=off"} <= set(config)
    low, high = q.enqueue("t", {}, priority=0), q.enqueue("t", {}, priority=9)
    assert [j.id for j in q.store.claim(q.owner, 5, 60)] == [high, low]

    _pg(pg_schema_url, "DROP FUNCTION tickq_due")  # a schema managed by hand, not migrated
    with pytest.raises(SchemaMissing, match=r"not up to date .*run q\.migrate\(\)"):
        q.store.claim(q.owner, 5, 60)
    q.close()
