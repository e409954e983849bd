"""A worker claims short jobs ahead of its free slots, and never strands them or spends
their attempts.

It claims ahead only at a measured pace of short jobs; jobs waiting in its line go back to
pending when every slot stays busy, and a job whose lease is lost while it waits never runs.
A worker killed (kill -9) while jobs it claimed ahead wait in its line costs them no
attempt: they come back refunded, once (a ``refunded`` row in their history), and are never
claimed ahead again; so a job that kills its worker every time still runs out of attempts.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickq import FrozenClock, Job, JobState, Queue, SchemaMissing
from tickq.pool import JobPool
from tickq.store import Outcome
from tickq.worker import Worker
from workerproc import WorkerProcess, eventually, runs

pytestmark = pytest.mark.timeout(60)
LEASE = "3"


def test_jobs_claimed_ahead_go_back_when_every_slot_stays_busy(db_url: str) -> None:
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
        # The worker's one slot runs `slow`; the quick jobs it claimed with it wait in its
        # line, and once the slot has stayed busy a while they go back for others to run.
        eventually(lambda: q.process_jobs(limit=100)["succeeded"] == 0 and len(ran) == 25,
                   what="the quick jobs to come back and run here")  # fmt: skip
        assert not gate.is_set() and q.get_job(ids[0]).status == "running"  # type: ignore[union-attr]
    finally:
        gate.set()
        eventually(lambda: q.get_job(ids[0]).status == "done", what="slow to finish")  # type: ignore[union-attr]
        stop.set()
        worker.join(30)
    assert sorted(ran[5:]) == list(range(20))
    assert totals[0]["released"] >= 1 and totals[0]["succeeded"] == 6  # all 20 unless busy
    assert all(q.get_job(i).attempts == 1 for i in ids)  # type: ignore[union-attr]
    assert 2 not in set(_marks(db_url, ids[1:]).values())  # released: claimable ahead again
    q.close()


def _marks(db_url: str, ids: list[int]) -> dict[int, int]:
    """The ``ahead`` column of ``ids`` (0, 1 start unconfirmed, 2 once refunded), read raw."""
    sql = "SELECT id, ahead FROM tickq_jobs"
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            rows = conn.execute(sql).fetchall()
    else:
        rows = _pg(db_url, sql)
    return {i: a for i, a in rows if i in set(ids)}


def _env(db_url: str, folder: Path) -> dict[str, str]:
    return {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_RUNS": str(folder),
            "TICKQ_TEST_LEASE": LEASE}  # fmt: skip


def _starts(folder: Path) -> Counter[int]:
    return Counter(n["id"] for n in runs(folder) if n["event"] == "start")


@pytest.mark.timeout(120)
def test_a_worker_killed_holding_jobs_claimed_ahead_spends_none_of_their_attempts(
    db_url: str, tmp_path: Path
) -> None:
    q = Queue(db_url, strict=False)
    q.migrate()
    args = ("--concurrency", "1", "--poll-interval", "0.2")
    with WorkerProcess(*args, **_env(db_url, tmp_path)) as victim:
        warm = q.enqueue_many([("work", {})] * 20)  # the worker learns the pace
        eventually(lambda: q.stats()["by_status"]["done"] == len(warm), what="the warm-up")
        # One enqueue: the worker claims `die` for its slot and the others ahead; `die`
        # kills it (SIGKILL) while they wait in its line.
        die, *ids = q.enqueue_many([("die", {}, {"priority": 9, "max_attempts": 1})]
                                   + [("work", {})] * 30)  # fmt: skip
        assert victim.wait() == -signal.SIGKILL
    held = {j.id for j in q.list_jobs("running", limit=100)}
    assert die in held and len(held) > 1, "the worker held jobs claimed ahead when killed"
    marks = _marks(db_url, ids)
    assert {marks[i] for i in held - {die}} == {1}
    assert _starts(tmp_path)[die] == 1 and not any(_starts(tmp_path)[i] for i in ids)

    def all_done() -> bool:
        done = q.stats()["by_status"]["done"] == len(warm) + len(ids)
        return done and q.get_job(die).status == "failed"  # type: ignore[union-attr]

    # `die` killed its worker before its start was confirmed: refunded, it runs once more
    # and may kill the next worker too (then counted, and failed): a third one finishes.
    for _ in range(2):
        with WorkerProcess(*args, **_env(db_url, tmp_path)) as worker:
            eventually(lambda: worker.proc.poll() is not None or all_done(),
                       timeout=60, what="the jobs to be done, or `die` to kill again")  # fmt: skip
            if worker.proc.poll() is None:
                worker.send(signal.SIGTERM)
                assert worker.wait() == 0, worker.output
            else:
                assert worker.wait() == -signal.SIGKILL
        if all_done():
            break
    assert all_done()
    history = [(a.attempt, a.outcome) for a in q.attempts(die)]
    assert history in ([(1, "lease_expired")], [(1, "refunded"), (1, "lease_expired")])
    assert _starts(tmp_path)[die] == len(history)  # every run of it is in its history
    marks = _marks(db_url, ids)
    for i in ids:  # each ran once, on its one counted attempt; a wait in line cost nothing
        assert q.get_job(i).attempts == 1 and _starts(tmp_path)[i] == 1  # type: ignore[union-attr]
        outcomes = [a.outcome for a in q.attempts(i)]
        assert outcomes == (["refunded", "done"] if i in held else ["done"]), (i, outcomes)
        assert marks[i] == 2 if i in held else marks[i] != 2
    q.close()


@pytest.mark.timeout(120)
def test_a_job_that_kills_its_worker_every_time_still_runs_out_of_attempts(
    db_url: str, tmp_path: Path
) -> None:
    q = Queue(db_url, strict=False)
    q.migrate()
    max_attempts = 2
    # `die` comes last, behind jobs that teach each worker the pace: it is claimed ahead.
    die = q.enqueue("die", {}, max_attempts=max_attempts, priority=0)
    lives = 0
    while q.get_job(die).status != "failed":  # type: ignore[union-attr]
        assert lives < 2 * (max_attempts + 1), f"job {die} still not failed after {lives} workers"
        q.enqueue_many([("work", {}, {"priority": 5})] * 40)
        lives += 1
        with WorkerProcess("--concurrency", "2", "--poll-interval", "0.2",
                           **_env(db_url, tmp_path)) as worker:  # fmt: skip
            eventually(lambda: worker.proc.poll() is not None
                       or q.get_job(die).status == "failed",  # type: ignore[union-attr]
                       timeout=60, what="the worker to die or the job to fail")  # fmt: skip
            if worker.proc.poll() is None:
                worker.send(signal.SIGTERM)
                assert worker.wait() == 0, worker.output
            else:
                assert worker.wait() == -signal.SIGKILL
    ran = _starts(tmp_path)[die]
    history = [(a.attempt, a.outcome) for a in q.attempts(die)]
    counted = [n for n, outcome in history if outcome == "lease_expired"]
    refunds = [n for n, outcome in history if outcome == "refunded"]
    assert counted == list(range(1, max_attempts + 1)), history
    assert len(refunds) <= 1, "at most one run is not counted (refunded once)"
    assert ran == len(history) <= max_attempts + 1, f"ran {ran} times: {history}"
    assert _marks(db_url, [die])[die] == (2 if refunds else 0)
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

    pool = JobPool(1, q._runtime.registry, done, skip=lambda job: job.id == 2)
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
    assert [j.id for j in q._store.claim(q._runtime.owner, 5, 60)] == [high, low]

    _pg(pg_schema_url, "DROP FUNCTION tickq_due")  # a schema managed by hand, not migrated
    with pytest.raises(SchemaMissing, match=r"not up to date .*run q\.migrate\(\)"):
        q._store.claim(q._runtime.owner, 5, 60)
    q.close()


def test_the_old_run_of_a_job_refunded_and_claimed_again_is_not_recorded_for_the_new_one(
    tmp_path: Path,
) -> None:
    # A refund gives the attempt back, so when the same worker claims the job again the new
    # claim has the old one's attempt number: the old run's late outcome must not finish it.
    clock = FrozenClock()
    q = Queue(f"sqlite:///{tmp_path / 'again.db'}", clock=clock, lease_seconds=30)
    q.migrate()
    q.job(name="quick")(lambda: None)
    worker = Worker(q._runtime, concurrency=1)
    job_id = q.enqueue("quick", {})
    owner = q._runtime.owner
    _, [old] = q._store.record_and_claim(owner, [], 0, 30, ahead=1)
    worker.keeper.hold([old])  # it runs; its start not yet recorded
    clock.advance(seconds=31)  # e.g. the database was out of reach for the whole lease
    assert q._store.rescue_expired().refunded == {job_id}
    worker.keeper.renew()
    assert worker.keeper.lost() == {job_id}
    worker._abandon_lost()
    [new] = q._store.claim(owner, 1, 30)
    assert (new.id, new.attempts) == (old.id, old.attempts)
    worker.keeper.hold([new])

    worker._job_finished(Outcome(old, "succeeded"))  # the old run ends late
    worker._collect()
    worker._exchange()
    assert q.get_job(job_id).status == "running"  # type: ignore[union-attr]
    assert worker.keeper.holding()  # the new claim's lease is still renewed
    worker._job_finished(Outcome(new, "succeeded"))
    worker._collect()
    worker._exchange()
    assert q.get_job(job_id).status == "done"  # type: ignore[union-attr]
    assert worker.report["stale"] == 1 and worker.report["succeeded"] == 1
    worker.keeper.stop()
    q.close()


def test_a_database_without_schema_8_asks_for_the_migration(db_url: str) -> None:
    from tickq.store.migrate import migrate
    from tickq.store.queries import migrations

    q = Queue(db_url, strict=False)
    dialect = q._store.dialect
    migrate(q._store, [m for m in migrations(dialect) if m[0] < 8])
    with pytest.raises(SchemaMissing, match=r"run q\.migrate\(\)"):
        q.enqueue("t", {})  # its row has columns of later schemas too
    with pytest.raises(SchemaMissing, match=r"run q\.migrate\(\)"):
        q._store.record_and_claim(q._runtime.owner, [], 1, 60, ahead=1)
    assert q.migrate()[:1] == [8]  # and any later ones
    q.enqueue("t", {})
    assert len(q._store.record_and_claim(q._runtime.owner, [], 1, 60, ahead=1)[1]) == 1
    q.close()
