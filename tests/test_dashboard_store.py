"""The store's browse queries (pages, search, counts, hourly figures) and q.delete(),
on SQLite and Postgres."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from tickq import FrozenClock, InvalidTransition, JobNotFound, Queue
from tickq.store import browse


def declare(q: Queue) -> None:
    @q.job(max_attempts=1)
    def explode(n: int = 0) -> None:
        raise ValueError(f"explode {n}")

    @q.job(queue="mail", max_attempts=3, backoff=[60])
    def mail(n: int = 0) -> None:
        if n % 3 == 0:
            raise ConnectionError(f"smtp down for {n}")


def test_pages_match_every_filter_combination(frozen_queue: Queue) -> None:
    q = frozen_queue
    declare(q)
    q.enqueue_many([("explode" if i % 2 else "mail", {"n": i}) for i in range(40)])
    q.process_jobs(limit=15)
    for job in q.list_jobs(status="pending", limit=3):
        q.cancel(job.id)
    statuses = [None, "pending", "done", "failed", "cancelled", "running"]
    for status, type_, queue in itertools.product(statuses, [None, "mail", "explode"],
                                                  [None, "mail", "default"]):  # fmt: skip
        expected = [j.id for j in q.list_jobs(status, type_, queue, limit=1000)]
        seen, before, more = [], None, True
        while more:
            page, more = browse.list_page(q._store, status, type_, queue, before, limit=7)
            seen += [j.id for j in page]
            before = page[-1].id if page else None
        assert seen == expected, (status, type_, queue)
    with pytest.raises(ValueError):
        browse.list_page(q._store, status="done'; DROP TABLE tickq_jobs; --")


def test_search_by_unique_key_and_counts(frozen_queue: Queue) -> None:
    q = frozen_queue
    declare(q)
    first = q.enqueue("mail", {"n": 1}, unique_key="welcome:7")
    q.process_jobs()
    again = q.enqueue("mail", {"n": 3}, unique_key="welcome:7")  # fails, waits to retry
    assert [j.id for j in browse.by_unique_key(q._store, "welcome:7")] == [again, first]
    assert browse.by_unique_key(q._store, "nobody") == []
    q.enqueue_many([("explode", {"n": i}) for i in range(4)])
    q.process_jobs()
    counts = {(s, qu, t): n for s, qu, t, n in browse.open_counts(q._store)}
    assert counts == {("failed", "default", "explode"): 4, ("pending", "mail", "mail"): 1}
    assert browse.done_count(q._store) == 1


def test_hourly_figures_and_failing_types(db_url: str) -> None:
    clock = FrozenClock()
    clock.set(clock.now().replace(hour=12, minute=30, second=0, microsecond=0))
    q = Queue(db_url, clock=clock)
    q.migrate()
    declare(q)
    q.enqueue_many([("mail", {"n": n}) for n in (1, 2, 3)])  # n=3 fails its attempt
    q.process_jobs()
    clock.advance(timedelta(hours=2))
    q.enqueue("explode", {"n": 9})
    q.process_jobs()  # and mail n=3's second attempt, due since 12:31
    hours = browse.hourly(q._store, clock.now())
    assert len(hours) == 24 and hours[-1]["hour"].hour == 14
    assert (hours[-3]["done"], hours[-3]["failed"]) == (2, 1)
    assert (hours[-1]["done"], hours[-1]["failed"]) == (0, 2)
    assert sum(h["done"] for h in hours) == 2
    failing = browse.failing_types(q._store, clock.now() - timedelta(hours=24))
    assert [(f["type"], f["attempts"], f["jobs"]) for f in failing] == [
        ("mail", 2, 1), ("explode", 1, 1)]  # fmt: skip
    assert failing[0]["last_error"].startswith("ConnectionError: smtp down for 3")
    assert failing[1]["last_error"].startswith("ValueError: explode 9")
    clock.advance(timedelta(hours=30))
    assert sum(h["done"] + h["failed"] for h in browse.hourly(q._store, clock.now())) == 0
    q.close()


def test_delete_keeps_processed_totals_and_refuses_active_jobs(queue: Queue) -> None:
    declare(queue)
    done = queue.enqueue("mail", {"n": 1})
    retried = queue.enqueue("mail", {"n": 3})  # fails once, waits for its retry
    failed = queue.enqueue("explode", {"n": 1})
    queue.process_jobs()
    before = queue.stats()["processed"]
    queue.delete(done)
    queue.delete(failed)
    assert queue.get_job(done) is None and queue.get_job(failed) is None
    assert queue.attempts(failed) == []
    assert queue.stats()["processed"] == before  # rolled up, as prune does
    with pytest.raises(InvalidTransition, match=r"cannot delete job \d+: it is pending"):
        queue.delete(retried)
    assert queue.get_job(retried) is not None and queue.attempts(retried)
    with pytest.raises(JobNotFound, match="does not exist"):
        queue.delete(done)
