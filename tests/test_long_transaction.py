"""Postgres: a transaction held open on another connection (the MVCC horizon problem: it
made an empty tick 8x slower after 50,000 jobs) is named in the health report and stats,
with one WARNING line (issue 23, "Also"). Real Postgres, a real held transaction."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tickq import Queue


@pytest.fixture
def pg_queue(pg_schema_url: str) -> Iterator[Queue]:
    q = Queue(pg_schema_url)
    q.migrate()
    q._runtime.store.long_transaction_seconds = 0.3  # type: ignore[attr-defined]
    yield q
    q.close()


def ours(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [t for t in report["long_transactions"] if t["application_name"] == name]


def test_a_transaction_held_open_elsewhere_is_named_in_health_and_stats(
    pg_queue: Queue, pg_schema_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"tickq-test-holder-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_schema_url, autocommit=True, application_name=name) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM tickq_jobs")  # takes its snapshot
        time.sleep(0.5)
        with caplog.at_level(logging.WARNING, logger="tickq"):
            health = pg_queue.health()
            stats = pg_queue.stats()
        (held,) = ours(health["database"], name)
        assert held["pid"] == holder.info.backend_pid
        assert held["age_seconds"] >= 0.3 and held["state"] == "idle in transaction"
        assert held["holds_snapshot"] is True
        assert [t["pid"] for t in ours(stats["database"], name)] == [held["pid"]]
        warnings = [r for r in caplog.records if f"pid {held['pid']}" in r.getMessage()]
        assert len(warnings) == 1, "one WARNING line per transaction, not per look"
        assert "open" in warnings[0].getMessage() and name in warnings[0].getMessage()
        holder.execute("ROLLBACK")
    assert not ours(pg_queue.health()["database"], name)


def test_a_short_transaction_is_not_named(pg_queue: Queue, pg_schema_url: str) -> None:
    pg_queue._runtime.store.long_transaction_seconds = 60  # type: ignore[attr-defined]
    name = f"tickq-test-holder-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_schema_url, autocommit=True, application_name=name) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT 1")
        assert not ours(pg_queue.health()["database"], name)
        holder.execute("ROLLBACK")


def test_an_anonymous_health_check_counts_held_transactions_without_naming_them(
    pg_queue: Queue, pg_schema_url: str
) -> None:
    import httpx

    from test_web import AUTH, SECRET, serving

    name = f"tickq-test-holder-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_schema_url, autocommit=True, application_name=name) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM tickq_jobs")
        time.sleep(0.5)
        with serving(pg_queue.asgi_app(secret=SECRET)) as base:
            anonymous = httpx.get(base + "/api/cron/health", timeout=30)
            trusted = httpx.get(base + "/api/cron/health", headers=AUTH, timeout=30)
        pid = holder.info.backend_pid
        holder.execute("ROLLBACK")
    database = anonymous.json()["database"]
    assert "long_transactions" not in database and name not in anonymous.text
    assert f'"pid": {pid}' not in anonymous.text
    assert database["long_transactions_count"] >= 1
    assert database["oldest_transaction_seconds"] >= 0.3
    assert len(ours(trusted.json()["database"], name)) == 1  # the tick's token: the detail
