"""What wakes a worker: NOTIFY sent by enqueue (Postgres), in-process announcements, due_in;
and the lease keeper telling a worker which jobs are no longer its own."""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta

import pytest

from tickq import FrozenClock, Queue
from tickq.lease import LeaseKeeper


def _listen(url: str, q: Queue):  # type: ignore[no-untyped-def]
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    channel = q._store._query("channel")[0][0]
    conn.execute(f'LISTEN "{channel}"')
    return conn


def _heard(conn) -> list[str]:  # type: ignore[no-untyped-def]
    # Every notification was sent before we look (delivered at commit), so a short wait
    # only collects them; it never decides the outcome.
    return sorted(n.payload for n in conn.notifies(timeout=0.2))


def test_enqueue_notifies_at_commit_only_and_only_for_due_jobs(pg_schema_url: str) -> None:
    import psycopg

    q = Queue(pg_schema_url, strict=False)
    q.migrate()
    listener = _listen(pg_schema_url, q)

    q.enqueue("a", {})
    assert _heard(listener) == ["default"]
    q.enqueue("a", {}, run_after=timedelta(hours=1))
    assert _heard(listener) == []  # the poll / due_in covers jobs due that much later

    with psycopg.connect(pg_schema_url) as conn:
        q.enqueue("a", {}, conn=conn, queue="emails")
        assert _heard(listener) == []  # not before the caller commits
    assert _heard(listener) == ["emails"]

    with psycopg.connect(pg_schema_url) as conn:
        q.enqueue("a", {}, conn=conn)
        conn.rollback()
    assert _heard(listener) == []  # a rolled-back job wakes nobody

    q.enqueue_many([("a", {}), ("a", {}), ("a", {}, {"queue": "b"}),
                    ("a", {}, {"queue": "c", "run_after": timedelta(hours=1)})])  # fmt: skip
    assert _heard(listener) == ["b", "default"]  # one per queue with due jobs
    listener.close()
    q.close()


def _due_in(payload: str) -> tuple[str, float]:
    queue, sep, millis = payload.partition("\x1f")
    assert sep, f"no due time in {payload!r}"
    return queue, int(millis) / 1000


def test_a_job_put_in_line_due_soon_notifies_its_queue_and_due_time(pg_schema_url: str) -> None:
    import psycopg

    q = Queue(pg_schema_url, strict=False)
    q.migrate()
    listener = _listen(pg_schema_url, q)
    q.enqueue("a", {}, run_after=timedelta(seconds=30))
    [note] = _heard(listener)
    queue, seconds = _due_in(note)
    assert queue == "default" and 29 < seconds <= 30

    # One notification per queue and statement, for its first job; a queue with a job due
    # now says just its name (what every version sends); nothing for jobs due past 600 s.
    q.enqueue_many([("a", {}, {"queue": "b", "run_after": timedelta(seconds=20)}),
                    ("a", {}, {"queue": "b", "run_after": timedelta(seconds=5)}),
                    ("a", {}, {"queue": "c"}),
                    ("a", {}, {"queue": "c", "run_after": timedelta(seconds=5)}),
                    ("a", {}, {"queue": "d", "run_after": timedelta(hours=2)})])  # fmt: skip
    notes = _heard(listener)
    assert len(notes) == 2 and "c" in notes, notes
    [later] = [n for n in notes if n != "c"]
    assert _due_in(later)[0] == "b" and 4 < _due_in(later)[1] <= 5

    with psycopg.connect(pg_schema_url) as conn:  # only at commit, as for jobs due now
        q.enqueue("a", {}, conn=conn, run_after=timedelta(seconds=9))
        assert _heard(listener) == []
    assert len(_heard(listener)) == 1
    listener.close()
    q.close()


def test_a_retry_or_snooze_notifies_its_new_due_time(pg_schema_url: str) -> None:
    from tickq import Snooze

    q = Queue(pg_schema_url, strict=False)

    @q.job(backoff=(7,))
    def flaky() -> None:
        raise RuntimeError("no")

    @q.job()
    def later() -> None:
        raise Snooze(12)

    q.migrate()
    q.enqueue("flaky", {})
    q.enqueue("later", {})
    listener = _listen(pg_schema_url, q)
    assert q.process_jobs()["retried"] == 1
    notes = sorted(_due_in(n)[1] for n in _heard(listener))
    assert len(notes) == 2 and 6 < notes[0] <= 7 and 11 < notes[1] <= 12, notes
    listener.close()
    q.close()


def test_notes_old_and_new_parse() -> None:
    from tickq.store.postgres import parse_note

    assert parse_note("emails") == ("emails", 0.0)  # from any version: due now
    assert parse_note("") == ("", 0.0)  # a cancel request
    assert parse_note("emails\x1f1500") == ("emails", 1.5)
    assert parse_note("a\x1fb\x1f250") == ("a\x1fb", 0.25)
    assert parse_note("odd\x1fname") == ("odd\x1fname", 0.0)  # not a due time: a queue


def test_each_schema_has_its_own_channel(pg_schema_url: str) -> None:
    import psycopg

    from conftest import PG_URL, with_search_path

    q1 = Queue(pg_schema_url)
    q1.migrate()
    other = "t_other_" + pg_schema_url[-12:].replace("%", "_").replace("=", "_")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{other}"')
    try:
        q2 = Queue(with_search_path(PG_URL, other))
        q2.migrate()
        assert q1._store._query("channel") != q2._store._query("channel")
        q2.close()
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{other}" CASCADE')
    q1.close()


def test_store_listen_relays_notifications_until_stopped(pg_schema_url: str) -> None:
    q = Queue(pg_schema_url, strict=False)
    q.migrate()
    heard: list[set[str] | None] = []
    ready, got = threading.Event(), threading.Event()

    def wake(queues: set[str] | None) -> None:
        heard.append(queues)
        (got if queues else ready).set()

    later: list[tuple[str, float]] = []
    stop = threading.Event()
    thread = threading.Thread(target=q._store.listen, daemon=True,
                              args=(wake, stop, None, lambda *a: later.append(a)))  # fmt: skip
    thread.start()
    assert ready.wait(10)
    q.enqueue("a", {}, queue="soon", run_after=timedelta(seconds=3))
    q.enqueue("a", {}, queue="reports")
    assert got.wait(10)
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert heard == [None, {"reports"}]
    assert len(later) == 1 and later[0][0] == "soon" and 2 < later[0][1] <= 3
    q.close()


def test_in_memory_sqlite_listens_to_nobody_until_stopped() -> None:
    q = Queue("sqlite:///:memory:")
    heard: list[set[str] | None] = []
    stop = threading.Event()
    thread = threading.Thread(target=q._store.listen, args=(heard.append, stop), daemon=True)
    thread.start()
    stop.set()
    thread.join(10)
    assert not thread.is_alive() and heard == [None]


def test_this_process_hears_its_own_enqueues(backend: str, frozen_queue: Queue) -> None:
    q = frozen_queue
    q.strict = False
    heard: list[set[str] | None] = []
    q._store.subscribe(heard.append)
    q.enqueue("a", {}, queue="emails")
    q.enqueue("a", {}, run_after=timedelta(minutes=5))
    q.enqueue_many([("a", {}), ("a", {}, {"queue": "b"})])
    if backend == "sqlite":
        path = q._store.path  # type: ignore[attr-defined]
        with sqlite3.connect(path) as conn:
            q.enqueue("a", {}, conn=conn, queue="mine")
    q._store.unsubscribe(heard.append)
    q.enqueue("a", {})
    expected = [{"emails"}, {"default", "b"}] + ([{"mine"}] if backend == "sqlite" else [])
    assert heard == expected


def test_due_in_says_how_long_until_the_next_pending_job(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue
    q.strict = False
    assert q._store.due_in() is None
    q.enqueue("a", {}, run_after=timedelta(seconds=90), queue="later")
    q.enqueue("a", {}, run_after=timedelta(seconds=30), queue="sooner")
    assert q._store.due_in() == pytest.approx(30)
    assert q._store.due_in(["later"]) == pytest.approx(90)
    assert q._store.due_in(["none"]) is None
    clock.advance(seconds=45)
    assert q._store.due_in() == pytest.approx(-15)  # overdue: claim now


def test_lease_keeper_reports_jobs_it_lost(frozen_queue: Queue) -> None:
    q = frozen_queue
    q.strict = False
    q.enqueue_many([("a", {}), ("a", {})])
    kept, released = q._store.claim(q._runtime.owner, 2, q.lease_seconds)
    lost: list[set[int]] = []
    keeper = LeaseKeeper(q._store, q._runtime.owner, q.lease_seconds, on_lost=lost.append)
    keeper.hold([kept, released])
    q._store.release(q._runtime.owner, [released])  # no longer ours (e.g. rescued while we stalled)
    keeper.renew()
    assert lost == [{released.id}] and keeper.lost() == {released.id}
    keeper.renew()
    assert lost == [{released.id}]  # reported once
    keeper.stop()


def test_lease_keeper_keeps_a_newer_claim_of_the_same_job(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue
    q.strict = False
    q.enqueue("a", {})
    (first,) = q._store.claim(q._runtime.owner, 1, q.lease_seconds)
    keeper = LeaseKeeper(q._store, q._runtime.owner, q.lease_seconds)
    keeper.hold([first], started=True)
    keeper.renew()  # records that it started: its attempt now counts
    clock.advance(seconds=q.lease_seconds + 1)
    assert [j.id for j in q._store.rescue_expired()] == [first.id]
    (again,) = q._store.claim(q._runtime.owner, 1, q.lease_seconds)
    assert (again.id, again.attempts) == (first.id, 2)
    keeper.hold([again])
    keeper.drop([first])  # the old attempt finishing late must not drop the new lease
    clock.advance(seconds=10)
    keeper.renew()
    renewed = q.get_job(again.id)
    assert renewed is not None and keeper.lost() == set()
    assert renewed.lease_expires_at == clock.now() + timedelta(seconds=q.lease_seconds)
    keeper.stop()
