"""The core contract, run against both stores (SQLite file, real Postgres schema)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

import tickq
from tickq import (
    Cancel,
    ConfigurationError,
    FrozenClock,
    InvalidTransition,
    JobContext,
    JobNotFound,
    JobState,
    Queue,
    Retry,
    UnknownJobType,
    current_job,
)
from tickq.retry import exponential
from tickq.store.queries import migrations


def test_enqueue_stores_the_guides_columns_in_utc(queue: Queue) -> None:
    @queue.job()
    def send_welcome_email(user_id: int) -> None: ...

    job_id = send_welcome_email.enqueue(user_id=42)
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.id, job.type, job.payload, job.status) == (
        job_id, "send_welcome_email", {"user_id": 42}, JobState.PENDING,
    )  # fmt: skip
    assert (job.attempts, job.max_attempts, job.last_error, job.queue) == (0, 4, None, "default")
    for stamp in (job.run_after, job.created_at, job.updated_at):
        assert stamp.tzinfo is not None and stamp.utcoffset() == timedelta(0)
    assert abs(job.created_at - datetime.now(UTC)) < timedelta(minutes=1)
    assert queue.get_job(job_id + 1000) is None


def test_process_jobs_runs_due_jobs_and_reports(queue: Queue) -> None:
    seen: list[int] = []

    @queue.job()
    def work(n: int) -> None:
        seen.append(n)

    ids = queue.enqueue_many([("work", {"n": i}) for i in range(5)])
    assert len(ids) == 5 and ids == sorted(ids)
    report = queue.process_jobs(limit=3)
    assert report["claimed"] == 3 and report["succeeded"] == 3
    assert {"retried", "failed", "duration_ms"} <= report.keys()
    assert queue.process_jobs(limit=100)["succeeded"] == 2
    assert sorted(seen) == [0, 1, 2, 3, 4]
    done = queue.get_job(ids[0])
    assert done is not None and done.status == "done" and done.finished_at is not None
    assert queue.process_jobs()["claimed"] == 0


def test_failures_retry_after_growing_delays_then_fail_and_alert(
    frozen_queue: Queue,
    clock: FrozenClock,
) -> None:
    q = frozen_queue
    failed: list[tickq.Job] = []
    q.on_failure(failed.append)

    @q.job()  # defaults: 4 attempts, retry after 1, 5, 30 minutes
    def flaky() -> None:
        raise ConnectionError("smtp down")

    job_id = flaky.enqueue()
    for attempt, wait in enumerate((60, 300, 1800), start=1):
        assert q.process_jobs()["retried"] == 1
        job = q.get_job(job_id)
        assert job is not None
        assert (job.status, job.attempts) == ("pending", attempt)
        assert job.run_after == clock.now() + timedelta(seconds=wait)
        assert "ConnectionError: smtp down" in (job.last_error or "")
        assert "Traceback" in (job.last_error or "")
        clock.advance(seconds=wait - 1)
        assert q.process_jobs()["claimed"] == 0, "ran before its backoff was over"
        clock.advance(seconds=1)
    assert q.process_jobs()["failed"] == 1
    job = q.get_job(job_id)
    assert job is not None and job.status == "failed" and job.attempts == 4
    assert [f.id for f in failed] == [job_id]
    history = q.attempts(job_id)
    assert [a.attempt for a in history] == [1, 2, 3, 4]
    assert all("smtp down" in (a.error or "") and a.outcome == "error" for a in history)
    assert q.process_jobs()["claimed"] == 0


def test_backoff_can_be_exponential_or_stop_early(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue

    @q.job(max_attempts=5, backoff=exponential(base=10, factor=3, maximum=60, jitter=0))
    def exp() -> None:
        raise ValueError("x")

    @q.job(max_attempts=5, backoff=lambda attempt: None if attempt >= 2 else 1)
    def give_up() -> None:
        raise ValueError("y")

    a, b = exp.enqueue(), give_up.enqueue()
    delays = []
    for _ in range(4):
        q.process_jobs()
        job = q.get_job(a)
        assert job is not None
        delays.append((job.run_after - clock.now()).total_seconds())
        clock.advance(seconds=delays[-1])
    assert delays == [10, 30, 60, 60]
    assert q.get_job(b).status == "failed"  # type: ignore[union-attr]
    assert q.get_job(b).attempts == 2  # type: ignore[union-attr]


def test_job_can_ask_for_retry_or_cancel(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue

    @q.job()
    def later() -> None:
        raise Retry(delay=7, reason="rate limited")

    @q.job()
    def pointless() -> None:
        raise Cancel("user deleted")

    a, b = later.enqueue(), pointless.enqueue()
    report = q.process_jobs()
    assert (report["retried"], report["cancelled"]) == (1, 1)
    job_a, job_b = q.get_job(a), q.get_job(b)
    assert job_a is not None and job_a.run_after == clock.now() + timedelta(seconds=7)
    assert job_b is not None and job_b.status == "cancelled"
    assert "user deleted" in (job_b.last_error or "")


def test_job_reads_its_id_attempt_and_a_stable_idempotency_key(
    frozen_queue: Queue,
    clock: FrozenClock,
) -> None:
    q = frozen_queue
    seen: list[JobContext] = []

    @q.job(backoff=(1,))
    def charge(amount: int, ctx: JobContext) -> None:
        seen.append(ctx)
        assert current_job() is ctx
        if ctx.attempt == 1:
            raise RuntimeError("first try fails")

    job_id = charge.enqueue(amount=5)
    q.process_jobs()
    clock.advance(seconds=1)
    q.process_jobs()
    assert [c.attempt for c in seen] == [1, 2]
    assert {c.id for c in seen} == {job_id}
    assert seen[0].idempotency_key == seen[1].idempotency_key
    assert seen[0].payload == {"amount": 5}
    with pytest.raises(LookupError):
        current_job()


def test_unique_key_active_scope(queue: Queue) -> None:
    @queue.job()
    def remind(booking: int) -> None: ...

    first = queue.enqueue("remind", {"booking": 1}, unique_key="remind:1")
    assert queue.enqueue("remind", {"booking": 1}, unique_key="remind:1") == first
    ids = queue.enqueue_many(
        [
            ("remind", {"booking": 1}, {"unique_key": "remind:1"}),
            ("remind", {"booking": 2}, {"unique_key": "remind:2"}),
            ("remind", {"booking": 2}, {"unique_key": "remind:2"}),
        ]
    )
    assert ids[0] == first and ids[1] == ids[2] != first
    assert queue.stats()["by_status"]["pending"] == 2
    queue.process_jobs()
    again = queue.enqueue("remind", {"booking": 1}, unique_key="remind:1")
    assert again != first, "active scope frees the key once the job is done"


def test_unique_key_all_scope_is_at_most_once_ever(queue: Queue) -> None:
    @queue.job()
    def remind(booking: int) -> None: ...

    first = queue.enqueue("remind", {"booking": 1}, unique_key="b1", unique_scope="all")
    queue.process_jobs()
    assert queue.get_job(first).status == "done"  # type: ignore[union-attr]
    assert queue.enqueue("remind", {"booking": 1}, unique_key="b1", unique_scope="all") == first
    assert queue.stats()["by_status"] == {**queue.stats()["by_status"], "pending": 0, "done": 1}


def test_unique_key_holds_under_concurrent_enqueues(db_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    queues = [Queue(db_url) for _ in range(8)]
    queues[0].migrate()
    for q in queues:
        q.job(name="remind")(lambda booking: None)

    def enqueue(i: int) -> int:
        return queues[i].enqueue("remind", {"booking": 9}, unique_key="same")

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(enqueue, range(8)))
    assert len(set(ids)) == 1
    assert queues[0].stats()["by_status"]["pending"] == 1


def test_bad_payloads_are_refused_at_enqueue_naming_the_field(queue: Queue) -> None:
    @queue.job()
    def send(user_id: int, options: dict | None = None) -> None: ...

    with pytest.raises(TypeError, match=r"payload\['options'\]\['when'\].*datetime"):
        send.enqueue(user_id=1, options={"when": datetime.now(UTC)})
    with pytest.raises(TypeError, match=r"payload\['user_id'\] .* is nan"):
        queue.enqueue("send", {"user_id": float("nan")})
    with pytest.raises(TypeError, match="does not fit job 'send'"):
        send.enqueue(usr_id=1)
    with pytest.raises(UnknownJobType, match=r"'sned'.*registered: send"):
        queue.enqueue("sned", {"user_id": 1})
    with pytest.raises(ValueError, match="timezone-aware"):
        send.with_options(run_after=datetime(2030, 1, 1)).enqueue(user_id=1)
    assert queue.stats()["by_status"]["pending"] == 0, "nothing half-stored"


def test_enqueue_many_names_the_index_of_the_job_it_refuses_and_stores_none(
    queue: Queue,
) -> None:
    @queue.job()
    def send(user_id: int) -> None: ...

    good = [("send", {"user_id": 1}), ("send", {"user_id": 2})]
    refused = {
        TypeError: [*good, ("send", {"user_id": "3"})],
        UnknownJobType: [good[0], ("sned", {"user_id": 1}), good[1]],
        ConfigurationError: [*good, *good, ("send", {"user_id": 5}, {"unique_scope": "ever"})],
    }
    for error, jobs in refused.items():
        with pytest.raises(error) as raised:
            queue.enqueue_many(jobs)
        index = len(jobs) - 1 if error is not UnknownJobType else 1
        assert str(raised.value).endswith(
            f" (enqueue_many: the job at index {index}; none stored)"
        ), raised.value
    with pytest.raises(TypeError, match=r"payload\['user_id'\] is str '3', not int \(enqueue"):
        queue.enqueue_many(refused[TypeError])

    class Name(str): ...

    with pytest.raises(TypeError, match=r"job type must be a str.*index 1; none stored"):
        queue.enqueue_many([good[0], (Name("send"), {"user_id": 2})])  # not the cached "send"
    assert queue.stats()["by_status"]["pending"] == 0, "nothing half-stored"
    assert len(queue.enqueue_many(good * 3)) == 6


def test_unregistered_type_fails_visibly_without_hurting_the_caller(
    db_url: str,
    clock: FrozenClock,
) -> None:
    producer = Queue(db_url, strict=False, clock=clock)
    producer.migrate()
    consumer = Queue(db_url, clock=clock)

    @consumer.job()
    def known() -> None: ...

    ghost = producer.enqueue("ghost", {"x": 1}, max_attempts=2)
    ok = known.enqueue()
    report = consumer.process_jobs()
    assert (report["succeeded"], report["retried"]) == (1, 1)
    job = consumer.get_job(ghost)
    assert job is not None and job.status == "pending"
    assert "UnknownJobType" in (job.last_error or "") and "'ghost'" in (job.last_error or "")
    clock.advance(hours=1)
    assert consumer.process_jobs()["failed"] == 1
    assert consumer.get_job(ghost).status == "failed"  # type: ignore[union-attr]
    assert consumer.get_job(ok).status == "done"  # type: ignore[union-attr]


def test_time_budget_stops_claiming_and_puts_unstarted_jobs_back(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    queue = frozen_queue

    @queue.job()
    def slow() -> None:
        clock.advance(seconds=0.05)  # the budget reads the injected clock: no sleeping

    queue.enqueue_many([("slow", {}) for _ in range(30)])
    report = queue.process_jobs(limit=30, time_budget=0.12)
    assert report["succeeded"] == 3  # started at 0, 0.05 and 0.10 s; none at 0.15
    assert report["claimed"] == report["succeeded"] + report["released"]
    stats = queue.stats()["by_status"]
    assert stats["pending"] == 30 - report["succeeded"] and stats["running"] == 0
    released = [j for j in queue.list_jobs(status="pending", limit=100)]
    assert all(j.attempts == 0 for j in released), "a released job's attempt is not counted"


def test_priority_and_queue_selection(queue: Queue) -> None:
    order: list[str] = []

    @queue.job()
    def step(name: str) -> None:
        order.append(name)

    queue.enqueue("step", {"name": "low"})
    queue.enqueue("step", {"name": "high"}, priority=10)
    queue.enqueue("step", {"name": "other"}, queue="reports")
    queue.process_jobs(queues=["default"])
    assert order == ["high", "low"]
    queue.process_jobs()
    assert order[-1] == "other"


def test_run_after_delays_a_job(frozen_queue: Queue, clock: FrozenClock) -> None:
    @frozen_queue.job()
    def later() -> None: ...

    later.with_options(run_after=timedelta(minutes=10)).enqueue()
    frozen_queue.enqueue("later", run_after=clock.now() + timedelta(minutes=20))
    assert frozen_queue.process_jobs()["claimed"] == 0
    clock.advance(minutes=10)
    assert frozen_queue.process_jobs()["succeeded"] == 1
    clock.advance(minutes=10)
    assert frozen_queue.process_jobs()["succeeded"] == 1


def test_timeouts_fail_the_attempt_for_sync_and_async_jobs(queue: Queue) -> None:
    @queue.job(timeout=0.1, max_attempts=1)
    def stuck() -> None:
        time.sleep(2)

    @queue.job(timeout=0.1, max_attempts=1)
    async def stuck_async() -> None:
        await asyncio.sleep(5)

    @queue.job()
    async def fine(x: int) -> int:
        await asyncio.sleep(0)
        return x

    a, b, c = stuck.enqueue(), stuck_async.enqueue(), fine.enqueue(x=1)
    report = queue.process_jobs()
    assert (report["failed"], report["succeeded"]) == (2, 1)
    assert "timeout of 0.1s" in (queue.get_job(a).last_error or "")  # type: ignore[union-attr]
    assert "cancelled" in (queue.get_job(b).last_error or "")  # type: ignore[union-attr]
    assert queue.get_job(c).status == "done"  # type: ignore[union-attr]


def test_manual_retry_cancel_prune_and_their_errors(
    frozen_queue: Queue,
    clock: FrozenClock,
) -> None:
    q = frozen_queue

    @q.job(max_attempts=1)
    def boom() -> None:
        raise RuntimeError("boom")

    @q.job()
    def ok() -> None: ...

    failed_id, done_id, pending_id = boom.enqueue(), ok.enqueue(), 0
    q.process_jobs()
    pending_id = ok.with_options(run_after=timedelta(hours=1)).enqueue()
    with pytest.raises(InvalidTransition, match="it is done"):
        q.retry(done_id)
    with pytest.raises(JobNotFound):
        q.retry(999_999)
    retried = q.retry(failed_id)
    assert retried.status == "pending" and retried.max_attempts == 2
    with pytest.raises(InvalidTransition, match="it is done"):
        q.cancel(done_id)
    assert q.cancel(pending_id).status == "cancelled"
    assert q.cancel(failed_id).status == "cancelled"
    clock.advance(days=8)
    assert q.prune(older_than=timedelta(days=7)) == 3
    assert q.get_job(done_id) is None and q.attempts(failed_id) == []


def test_migrate_is_idempotent_and_schema_sql_is_printable(db_url: str) -> None:
    q = Queue(db_url)
    assert q.migrate() == [version for version, _, _ in migrations(q._store.dialect)]
    assert q.migrate() == []
    assert "CREATE TABLE tickq_jobs" in q.schema_sql()


def test_missing_schema_and_bad_urls_give_one_line_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    q = Queue(f"sqlite:///{tmp_path / 'fresh.db'}")
    with pytest.raises(tickq.SchemaMissing, match=r"run q.migrate"):
        q.stats()
    with pytest.raises(ConfigurationError, match=r"expected sqlite:///path.db or postgresql://"):
        Queue("mysql://root@localhost/app")
    with pytest.raises(ConfigurationError, match="max_attempts must be >= 1, got 0"):
        q.job(max_attempts=0)


def test_database_down_is_a_clear_error_and_loses_nothing() -> None:
    q = Queue("postgresql://postgres@127.0.0.1:1/nowhere")
    with pytest.raises(tickq.DatabaseUnavailable, match=r"127.0.0.1:1"):
        q.process_jobs()


def test_reserved_parameter_names_are_refused(queue: Queue) -> None:
    with pytest.raises(ConfigurationError, match="'conn'"):

        @queue.job()
        def bad(conn: object) -> None: ...
