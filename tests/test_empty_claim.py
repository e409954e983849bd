"""A claim with nothing due reads next to nothing, however many jobs wait for later.

The claim index is in priority order, so a walk for due jobs can't stop at the first job not
due yet: with many jobs pending for tomorrow an empty claim (every empty tick, every idle
worker poll, the last claim of every tick) used to read every one of their index entries.
Since schema 26 the claim first reads the due index's first entry (Postgres).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickq import Queue

LATER = 5_000


@pytest.fixture
def waiting(pg_schema_url: str) -> Iterator[tuple[Queue, Any]]:
    """A Postgres queue holding LATER jobs due tomorrow, and a connection to its schema."""
    import psycopg

    q = Queue(pg_schema_url)
    q.migrate()

    @q.job()
    def later(n: int) -> None: ...

    tomorrow = datetime.now(UTC) + timedelta(days=1)
    q.enqueue_many([("later", {"n": i}, {"run_after": tomorrow}) for i in range(LATER)])
    with psycopg.connect(pg_schema_url, autocommit=True) as conn:
        conn.execute("ANALYZE tickq_jobs")
        yield q, conn
    q.close()


def buffers_read(conn: Any, sql: str) -> int:
    """Shared buffers ``sql`` touched, from EXPLAIN (ANALYZE, BUFFERS), its plan warm."""
    conn.execute(sql).fetchall()  # plans the function's queries: catalogue reads not counted
    (plan,) = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}").fetchone()[0]
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


@pytest.mark.timeout(120)
def test_an_empty_claim_reads_as_much_with_20000_jobs_due_later_as_with_5000(
    waiting: tuple[Queue, Any],
) -> None:
    q, conn = waiting
    claims = ("tickq_due(100, NULL, NULL)", "tickq_due_ahead(100, NULL, NULL, 0.1)")
    before = [buffers_read(conn, f"SELECT {claim}") for claim in claims]
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    q.enqueue_many([("later", {"n": i}, {"run_after": tomorrow}) for i in range(3 * LATER)])
    conn.execute("ANALYZE tickq_jobs")
    after = [buffers_read(conn, f"SELECT {claim}") for claim in claims]
    # The walk of the claim index read 34 buffers at 5,000 jobs and 108 at 20,000.
    assert all(a <= b + 3 for a, b in zip(after, before, strict=True)), (before, after)
    assert q.tick(limit=100)["jobs"]["claimed"] == 0
    assert q.stats()["by_status"]["pending"] == 4 * LATER


@pytest.mark.timeout(120)
def test_a_job_due_now_among_them_is_claimed_and_the_probe_holds_for_an_injected_clock(
    waiting: tuple[Queue, Any],
) -> None:
    q, conn = waiting
    (now,) = conn.execute("SELECT now()").fetchone()
    assert conn.execute("SELECT count(*) FROM tickq_due(100, NULL, %s)", (now,)).fetchone() == (0,)
    day_after = now + timedelta(days=2)  # an injected clock past them all: every job is due
    conn.execute("BEGIN")
    (due,) = conn.execute("SELECT count(*) FROM tickq_due(10, NULL, %s)", (day_after,)).fetchone()
    conn.execute("ROLLBACK")
    assert due == 10
    q.enqueue("later", {"n": -1})
    jobs = q.tick(limit=100)["jobs"]
    assert jobs["claimed"] == 1 and jobs["succeeded"] == 1, jobs
