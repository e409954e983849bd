"""Postgres: a transaction held open on another connection (the MVCC horizon problem: it
made an empty tick 8x slower after 50,000 jobs) is named in the health report and stats,
with one WARNING line (issue 23, "Also"). Real Postgres, a real held transaction."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from test_dashboard_browser import browser  # noqa: F401  (the real Chromium fixture)
from tickq import Queue
from tickq.testing import FrozenClock


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


# -- looked for while jobs flow (issue 27, "Under a long transaction") ------------------
@contextmanager
def held_open(url: str, name: str) -> Iterator[int]:
    """A REPEATABLE READ transaction on a connection of its own, its snapshot taken (it
    holds vacuum's horizon) and older than the queue's 0.3 s threshold; its pid."""
    with psycopg.connect(url, autocommit=True, application_name=name) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM tickq_jobs")
        time.sleep(0.4)
        yield holder.info.backend_pid
        holder.execute("ROLLBACK")


def warned_of(caplog: pytest.LogCaptureFixture, pid: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.levelno == logging.WARNING and f"(pid {pid}," in r.getMessage()]  # fmt: skip


@pytest.fixture
def frozen_pg_queue(pg_schema_url: str) -> Iterator[tuple[Queue, FrozenClock]]:
    clock = FrozenClock()
    q = Queue(pg_schema_url, clock=clock)
    q.migrate()
    q._runtime.store.long_transaction_seconds = 0.3  # type: ignore[attr-defined]
    q.job(name="work")(lambda: None)
    yield q, clock
    q.close()


def test_process_jobs_looks_once_a_minute_while_jobs_flow_and_warns_once(
    frozen_pg_queue: tuple[Queue, FrozenClock], pg_schema_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    q, clock = frozen_pg_queue
    tag = uuid.uuid4().hex[:8]
    caplog.set_level(logging.WARNING, logger="tickq")
    with held_open(pg_schema_url, f"tickq-first-{tag}") as first:
        q.enqueue("work", {})
        assert q.process_jobs()["succeeded"] == 1
        (line,) = warned_of(caplog, first)
        message = line.getMessage()
        assert f"tickq-first-{tag}" in message and "has been open" in message
        assert "pg_terminate_backend" in message
        assert getattr(line, "event", None) == "long_transaction"
        with held_open(pg_schema_url, f"tickq-second-{tag}") as second:
            q.enqueue("work", {})
            assert q.process_jobs()["succeeded"] == 1
            assert not warned_of(caplog, second), "looked again within the minute"
            clock.advance(seconds=61)
            assert q.process_jobs()["claimed"] == 0
            assert not warned_of(caplog, second), "looked while no job flowed"
            q.enqueue("work", {})
            assert q.process_jobs()["succeeded"] == 1
            assert len(warned_of(caplog, second)) == 1, "jobs flow, the minute is over"
            clock.advance(seconds=61)
            q.enqueue("work", {})
            q.process_jobs()
            assert len(warned_of(caplog, first)) == 1, "one WARNING per transaction"
            assert len(warned_of(caplog, second)) == 1


def test_a_tick_that_runs_jobs_looks_and_an_empty_one_does_not(
    frozen_pg_queue: tuple[Queue, FrozenClock], pg_schema_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    q, _clock = frozen_pg_queue
    q._runtime.horizon_every = 5.0
    caplog.set_level(logging.WARNING, logger="tickq")
    with held_open(pg_schema_url, f"tickq-tick-{uuid.uuid4().hex[:8]}") as pid:
        assert q.tick()["jobs"]["claimed"] == 0
        assert not warned_of(caplog, pid), "an empty tick looked"
        q.enqueue("work", {})
        assert q.tick()["jobs"]["succeeded"] == 1
        assert len(warned_of(caplog, pid)) == 1


def test_a_transaction_without_a_snapshot_is_named_but_not_warned_of(
    pg_queue: Queue, pg_schema_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"tickq-test-nosnap-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_schema_url, autocommit=True, application_name=name) as idle:
        idle.execute("BEGIN")  # READ COMMITTED, no statement since: no snapshot, no xid
        idle.execute("SELECT 1")
        time.sleep(0.4)
        with caplog.at_level(logging.WARNING, logger="tickq"):
            (named,) = ours(pg_queue.health()["database"], name)
        assert named["holds_snapshot"] is False
        assert not warned_of(caplog, idle.info.backend_pid)
        idle.execute("ROLLBACK")


def test_a_worker_warns_of_a_held_horizon_while_jobs_flow(
    pg_schema_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    q = Queue(pg_schema_url)
    q.migrate()
    q._runtime.store.long_transaction_seconds = 0.3  # type: ignore[attr-defined]
    q.job(name="work")(lambda: None)
    stop = threading.Event()
    caplog.set_level(logging.WARNING, logger="tickq")
    with held_open(pg_schema_url, f"tickq-worker-{uuid.uuid4().hex[:8]}") as pid:
        worker = threading.Thread(target=q.run_worker, kwargs={"stop": stop}, daemon=True)
        worker.start()
        try:
            deadline = time.monotonic() + 20
            while not warned_of(caplog, pid) and time.monotonic() < deadline:
                q.enqueue("work", {})
                time.sleep(0.1)
            assert len(warned_of(caplog, pid)) == 1
        finally:
            stop.set()
            worker.join(30)
    assert not worker.is_alive()
    q.close()


def test_every_dashboard_page_shows_a_banner_naming_the_held_transaction(
    pg_queue: Queue, pg_schema_url: str
) -> None:
    import httpx

    from dashboard_serving import serving
    from test_dashboard_http import PASSWORD, login
    from tickq.dashboard import Dashboard

    pg_queue.job(name="work")(lambda: None)
    job_id = pg_queue.enqueue("work", {})
    dashboard = Dashboard(pg_queue, password=PASSWORD)
    pages = ["/tickq/", "/tickq/jobs", "/tickq/jobs?status=failed", "/tickq/schedules",
             "/tickq/workflows", f"/tickq/jobs/{job_id}"]  # fmt: skip
    name = f"tickq-dash-{uuid.uuid4().hex[:8]}"
    with serving(pg_queue.asgi_app(dashboard=dashboard)) as base, httpx.Client() as client:
        assert login(client, base).status_code in (200, 303)
        assert name not in client.get(base + "/tickq/").text  # (others' may show: same db)
        dashboard._held = None  # the 10 s reuse of the last look, over
        with held_open(pg_schema_url, name) as pid:
            for path in pages:
                page = client.get(base + path, timeout=30)
                assert page.status_code == 200, path
                banner = page.text.split('id="held-horizon"', 1)[1].split("</div>", 1)[0]
                assert f"pid {pid}" in banner and name in banner, path
                assert "has been open" in banner and "pg_terminate_backend" in banner
        login_page = httpx.get(base + "/tickq/login", timeout=30)
        assert 'id="held-horizon"' not in login_page.text, "only for those logged in"
        dashboard._held = None
        assert name not in client.get(base + "/tickq/").text


def test_the_banner_is_seen_in_a_real_browser(
    pg_queue: Queue,
    pg_schema_url: str,
    browser: Any,  # noqa: F811  (the fixture imported above)
) -> None:
    from dashboard_serving import serving
    from test_dashboard_browser import PASSWORD

    name = f"tickq-browser-{uuid.uuid4().hex[:8]}"
    app = pg_queue.asgi_app(dashboard={"password": PASSWORD, "refresh_seconds": 0})
    with held_open(pg_schema_url, name) as pid, serving(app) as base:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(10_000)
        page.goto(f"{base}/tickq/")
        page.get_by_label("Dashboard password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{base}/tickq/")
        banner = page.get_by_role("alert").filter(has_text=name)
        assert banner.is_visible()
        assert f"pid {pid}" in banner.inner_text()
        page.context.close()
