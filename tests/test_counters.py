"""The figures stats() reads without a history row (migration 24's triggers): after a mixed
workload from several processes at once (enqueues in the caller's transaction committed
and rolled back, claims, successes, retries, snoozes, failures, cancels, retries by hand,
a delete, a prune) the job counts equal a COUNT(*) of the table and the processed totals
equal the finished attempts still in it, then stay as they were once pruned."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from tickq import Queue, Retry, Snooze
from tickq.store.ticks import DUE_COUNT_CAP

SEEN: set[tuple[str, int]] = set()
SEEN_LOCK = threading.Lock()


def first_time(kind: str, n: int) -> bool:
    with SEEN_LOCK:
        new = (kind, n) not in SEEN
        SEEN.add((kind, n))
        return new


def with_jobs(q: Queue) -> Queue:
    q.job(name="ok", queue="fast")(lambda n: n)
    q.job(name="boom", max_attempts=2, backoff=[0])(_boom)
    q.job(name="again", max_attempts=3)(_again)
    q.job(name="later")(_later)
    return q


def _boom(n: int) -> None:
    raise RuntimeError(f"boom {n}")


def _again(n: int) -> None:
    if first_time("again", n):
        raise Retry(0)


def _later(n: int) -> None:
    if first_time("later", n):
        raise Snooze(0)


@contextmanager
def app_connection(q: Queue) -> Iterator[Any]:
    if q.url.startswith("sqlite"):
        conn = sqlite3.connect(q._store.path)  # type: ignore[attr-defined]
        yield conn
        conn.close()
    else:
        import psycopg

        with psycopg.connect(q.url) as pg:
            yield pg


def rows(q: Queue, sql: str) -> list[tuple[Any, ...]]:
    with app_connection(q) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def counted(q: Queue) -> Counter[tuple[str, str, str]]:
    """(queue, type, status) -> jobs, as stats() gives them."""
    found: Counter[tuple[str, str, str]] = Counter()
    stats = q.stats()
    for queue, by_status in stats["by_queue"].items():
        for status, n in by_status.items():
            found[(queue, "*", status)] += n
    for type_, by_status in stats["by_type"].items():
        for status, n in by_status.items():
            found[("*", type_, status)] += n
    return +found


def table_counts(q: Queue) -> Counter[tuple[str, str, str]]:
    found: Counter[tuple[str, str, str]] = Counter()
    for queue, type_, status, n in rows(
        q, "SELECT queue, type, status, count(*) FROM tickq_jobs GROUP BY queue, type, status"
    ):
        found[(queue, "*", status)] += n
        found[("*", type_, status)] += n
    return +found


def processed(q: Queue) -> Counter[tuple[str, str, str]]:
    return +Counter(
        {(queue, type_, outcome): n
         for queue, types in q.stats()["processed"].items()
         for type_, outcomes in types.items() for outcome, n in outcomes.items()}
    )  # fmt: skip


def live_attempts(q: Queue) -> Counter[tuple[str, str, str]]:
    """Every finished attempt still in the tables: done jobs and attempt rows."""
    found: Counter[tuple[str, str, str]] = Counter()
    for queue, type_, n in rows(
        q, "SELECT queue, type, count(*) FROM tickq_jobs WHERE status = 'done' GROUP BY 1, 2"
    ):
        found[(queue, type_, "done")] += n
    for queue, type_, outcome, n in rows(
        q,
        "SELECT j.queue, j.type, a.outcome, count(*) FROM tickq_attempts a "
        "JOIN tickq_jobs j ON j.id = a.job_id GROUP BY 1, 2, 3",
    ):
        found[(queue, type_, outcome)] += n
    return +found


def workload(url: str, worker: int) -> None:
    q = with_jobs(Queue(url, retention=None))
    try:
        for i in range(12):
            n = worker * 100 + i
            q.enqueue(("ok", "boom", "again", "later")[i % 4], {"n": n})
            if i % 3 == 0:
                with app_connection(q) as conn:
                    q.enqueue("ok", {"n": -n}, conn=conn)
                    conn.rollback()  # never a job: counted nowhere
                    q.enqueue("ok", {"n": n + 50}, conn=conn)
                    conn.commit()
            q.process_jobs(limit=3)
        for _ in range(20):
            if not q.process_jobs(limit=50)["claimed"]:
                break
    finally:
        q.close()


def settle(q: Queue) -> None:
    """Run what is pending until none is left (retries come due within milliseconds)."""
    for _ in range(200):
        q.process_jobs(limit=100)
        if not q.stats()["by_status"]["pending"]:
            return
        time.sleep(0.005)
    raise AssertionError(f"jobs still pending: {q.list_jobs(status='pending')}")


def test_counters_equal_a_count_after_a_mixed_concurrent_workload(queue: Queue) -> None:
    q = with_jobs(queue)
    SEEN.clear()
    threads = [threading.Thread(target=workload, args=(q.url, w)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    settle(q)
    future = [q.enqueue("ok", {"n": 9000 + i}, run_after=timedelta(hours=1)) for i in range(3)]
    q.cancel(future[0])
    failed = q.list_jobs(status="failed", limit=1)[0]
    q.retry(failed.id)
    q.process_jobs(limit=10)

    assert counted(q) == table_counts(q)
    before_prune = processed(q)
    assert before_prune == live_attempts(q)
    assert before_prune[("default", "boom", "error")] >= 4
    assert before_prune[("default", "later", "snoozed")] == 12  # 3 per worker

    q.delete(q.list_jobs(status="done", limit=1)[0].id)
    assert counted(q) == table_counts(q)
    assert q.prune(timedelta(0)) > 0
    assert counted(q) == table_counts(q)
    assert q.stats()["by_status"]["done"] == 0
    assert processed(q) == before_prune, "pruning keeps the totals"
    assert q.process_jobs(limit=10)["claimed"] == 0


def test_a_tick_counts_the_due_backlog_up_to_the_cap(queue: Queue) -> None:
    q = with_jobs(queue)
    q.enqueue_many([("ok", {"n": i}) for i in range(3)])
    summary = q.tick(limit=0)
    assert summary["remaining_due"] == 3 and summary["remaining_due_exact"]
    q.enqueue_many([("ok", {"n": i}) for i in range(DUE_COUNT_CAP + 2)])
    summary = q.tick(limit=1)
    assert summary["remaining_due"] == DUE_COUNT_CAP
    assert summary["remaining_due_exact"] is False
    assert q.stats()["due"] == DUE_COUNT_CAP + 4, "stats() still counts every due job"
