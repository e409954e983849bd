"""Retention by default: workers and ticks prune finished jobs past their retention in
bounded batches, one process per interval, keeping what was asked to be kept."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tickq import FrozenClock, Queue, WorkflowContext
from tickq.errors import ConfigurationError
from tickq.retention import Retention

DAY = timedelta(days=1)


@pytest.fixture
def make(db_url: str, clock: FrozenClock) -> Iterator[Any]:
    made: list[Queue] = []

    def make_queue(retention: Any = "default") -> Queue:
        q = (
            Queue(db_url, clock=clock)
            if retention == "default"
            else Queue(db_url, clock=clock, retention=retention)
        )
        q.migrate()

        @q.job(max_attempts=1)
        def work(fail: bool = False) -> None:
            if fail:
                raise RuntimeError("boom")

        made.append(q)
        return q

    yield make_queue
    for q in made:
        q.close()


def finish(q: Queue, n: int, fail: bool = False, **options: Any) -> list[int]:
    ids = [q.enqueue("work", {"fail": fail}, **options) for _ in range(n)]
    q.process_jobs(limit=n)
    return ids


def count(q: Queue) -> int:
    return len(q.list_jobs(limit=100_000))


def test_a_tick_prunes_only_what_is_older_than_its_retention(make: Any, clock: FrozenClock) -> None:
    q = make()
    finish(q, 3)
    failed = finish(q, 1, fail=True)
    clock.advance(days=6)
    recent = finish(q, 2)
    clock.advance(timedelta(days=1, hours=12))
    summary = q.tick()
    assert summary["pruned"] == 3  # done 7.5 days ago; failed kept 30 days; recent kept
    assert sorted(j.id for j in q.list_jobs(limit=100)) == sorted(failed + recent)
    stats = q.stats()["retention"]
    assert stats["pruned_last_pass"] == 3 and stats["behind"] is False
    assert stats["settings"]["done"] == 7 * 86400 and stats["settings"]["failed"] == 30 * 86400
    assert q.stats()["processed"]["default"]["work"]["done"] == 5  # totals kept
    clock.advance(days=23)  # the failed one is 30.5 days old, the recent ones 24.5
    assert q.tick()["pruned"] == 3
    assert count(q) == 0


def test_a_busy_tick_prunes_one_bounded_batch_and_ticks_catch_up(
    make: Any, clock: FrozenClock
) -> None:
    q = make(Retention(batch=10))
    finish(q, 35)
    clock.advance(days=8)
    assert [q.tick()["pruned"] for _ in range(5)] == [10, 10, 10, 5, 0]
    state = q.stats()["retention"]
    assert state["behind"] is False and state["pruned_last_pass"] == 35
    assert count(q) == 0


def test_behind_shows_in_stats_between_ticks(make: Any, clock: FrozenClock) -> None:
    q = make(Retention(batch=4))
    finish(q, 6)
    clock.advance(days=8)
    assert q.tick()["pruned"] == 4
    assert q.stats()["retention"]["behind"] is True


def test_two_queues_do_not_both_prune_in_one_interval(make: Any, clock: FrozenClock) -> None:
    rule = Retention(done=timedelta(hours=1), interval=DAY)
    first, second = make(rule), make(rule)
    finish(first, 5)
    clock.advance(hours=2)
    assert first.tick()["pruned"] == 5
    finish(first, 3)
    clock.advance(hours=2)  # 3 more past their hour; the next pass is due in 20 h
    assert second.tick()["pruned"] == 0 and first.tick()["pruned"] == 0
    assert count(first) == 3
    clock.advance(DAY)
    assert second.tick()["pruned"] == 3
    assert first.tick()["pruned"] == 0


def test_concurrent_ticks_of_two_queues_prune_each_job_once(make: Any, clock: FrozenClock) -> None:
    queues = [make(Retention(batch=1000)), make(Retention(batch=1000))]
    finish(queues[0], 40)
    clock.advance(days=8)
    pruned: list[int] = []
    threads = [threading.Thread(target=lambda q=q: pruned.append(q.tick()["pruned"]))
               for q in queues]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(pruned) == [0, 40]


def test_retention_none_keeps_every_job(make: Any, clock: FrozenClock) -> None:
    forever, no_ages = make(None), make(Retention(done=None, failed=None))
    finish(forever, 2)
    finish(forever, 1, fail=True)
    clock.advance(days=400)
    assert forever.tick()["pruned"] == 0 and no_ages.tick()["pruned"] == 0
    assert count(forever) == 3
    assert forever.stats()["retention"]["settings"] is None


def test_failed_jobs_are_kept_30_days(make: Any, clock: FrozenClock) -> None:
    q = make()
    failed = finish(q, 2, fail=True)
    clock.advance(days=29, hours=23)
    assert q.tick()["pruned"] == 0
    assert sorted(j.id for j in q.list_jobs(limit=10)) == failed
    clock.advance(hours=2)
    assert q.tick()["pruned"] == 2


def test_kept_jobs_and_kept_queues_are_kept(make: Any, clock: FrozenClock) -> None:
    q = make(Retention(queues={"audit": Retention(done=None, failed=None)}))
    kept = finish(q, 2, keep=True)
    audit = finish(q, 2, queue="audit")
    finish(q, 3)
    clock.advance(days=60)
    assert q.tick()["pruned"] == 3
    assert sorted(j.id for j in q.list_jobs(limit=10)) == sorted(kept + audit)
    assert all(q.get_job(i).keep for i in kept)  # type: ignore[union-attr]
    assert q.prune(timedelta(days=1)) == 4  # by hand: every finished job, as before


def test_the_steps_of_a_live_workflow_run_are_kept(make: Any, clock: FrozenClock) -> None:
    q = make()

    @q.workflow()
    def slow(wf: WorkflowContext) -> str:
        wf.run("work")
        wf.sleep(timedelta(days=20))
        return "done"

    run = slow.start()
    q.tick()
    assert q.workflow_run(run).status == "waiting"
    clock.advance(days=10)
    q.tick()
    assert count(q) == 2  # the driver (pending, asleep) and its step's job (done 10 days)
    clock.advance(days=11)
    # The run ends in this tick: its step's job (done 21 days ago) may go now; the
    # driver, done just now, stays its 7 days.
    assert q.tick()["pruned"] == 1
    assert q.workflow_run(run).status == "done"
    clock.advance(days=8)
    assert q.tick()["pruned"] == 1
    assert count(q) == 0
    with pytest.raises(LookupError):
        q.workflow_run(run)


def test_a_worker_prunes_as_soon_as_it_starts(make: Any, clock: FrozenClock) -> None:
    q = make(Retention(batch=3))
    finish(q, 7)
    clock.advance(days=8)
    stop = threading.Event()
    totals: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: totals.update(q.run_worker(stop=stop)))
    worker.start()
    try:
        deadline = time.monotonic() + 20
        while count(q) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        worker.join(timeout=30)
    assert count(q) == 0
    assert totals["pruned"] == 7  # batch after batch: three batches of at most 3


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"done": 7}, TypeError, "retention done must be a timedelta or None"),
        ({"failed": timedelta(0)}, ConfigurationError, "retention failed must be positive"),
        ({"interval": timedelta(0)}, ConfigurationError, "interval must be >= 1 second"),
        ({"batch": 0}, ConfigurationError, "batch must be 1..100000, got 0"),
        ({"queues": {"a": 3}}, TypeError, "retention for queue 'a' must be a Retention"),
    ],
)
def test_bad_retention_is_refused_with_a_clear_message(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Retention(**kwargs)


def test_queue_refuses_a_retention_that_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="retention must be a Retention or None"):
        Queue(f"sqlite:///{tmp_path / 'q.db'}", retention=timedelta(days=1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keep must be True or False"):
        Queue(f"sqlite:///{tmp_path / 'q.db'}", strict=False).enqueue("x", keep=1)  # type: ignore[arg-type]


def test_sqlite_pruning_gives_the_space_back(tmp_path: Path) -> None:
    path = tmp_path / "space.db"
    clock = FrozenClock()
    q = Queue(f"sqlite:///{path}", clock=clock, retention=Retention(batch=1000))
    q.migrate()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL

    @q.job()
    def big(blob: str) -> None: ...

    q.enqueue_many([("big", {"blob": "x" * 2000}, {}) for _ in range(3000)])
    q.process_jobs(limit=3000)
    before = path.stat().st_size
    clock.advance(days=8)
    while q.tick()["pruned"]:
        pass
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    after = path.stat().st_size
    q.close()
    assert before > 6_000_000 and after < before / 3, (before, after)
