"""A tick's (and process_jobs') commits before its last need only survive the process being
killed: on Postgres they don't wait for the WAL flush (synchronous_commit off, local to
their transaction), on SQLite not for the sync (synchronous=normal). The last commit is a
synchronous one, and takes the earlier ones to the disk with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tickq import Queue


@pytest.fixture
def sent(queue: Queue) -> Iterator[list[list[str]]]:
    """The statement names of each round trip of the queue's store."""
    store = queue._store
    rounds: list[list[str]] = []
    real = store._query_many

    def counting(statements: Any) -> Any:
        rounds.append([name for name, _ in statements])
        return real(statements)

    store._query_many = counting  # type: ignore[method-assign]
    yield rounds
    store._query_many = real  # type: ignore[method-assign]


def durability(queue: Queue) -> str:
    conn = queue._store._connection()
    if queue._store.dialect == "postgres":
        return str(conn.execute("SHOW synchronous_commit").fetchone()[0])
    return str(conn.execute("PRAGMA synchronous").fetchone()[0])


def test_only_the_last_commit_of_a_tick_waits_for_the_disk(
    queue: Queue, sent: list[list[str]]
) -> None:
    ran: list[int] = []

    @queue.job()
    def work(n: int) -> None:
        ran.append(n)

    queue.migrate()
    queue.enqueue_many([("work", {"n": n}) for n in range(3)])
    before = durability(queue)
    sent.clear()
    report = queue.tick(limit=3)
    assert report["jobs"]["succeeded"] == 3 and sorted(ran) == [0, 1, 2]
    finishing = [names for names in sent if "finish" in names]
    assert len(finishing) == 3  # each job's outcome committed before the next one starts
    if queue._store.dialect == "postgres":
        # The first two carry the claim of the next job and commit unflushed; the last,
        # claiming nothing more, is a synchronous commit.
        assert [names[0] == "commit_unflushed" for names in finishing] == [True, True, False]
    assert durability(queue) == before  # the connection's own setting is back
    assert queue.stats()["by_status"]["done"] == 3
