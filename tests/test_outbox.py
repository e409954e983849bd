"""An HTTP tick must end, a process need not: a finished job's outcome the database could
not take before the request returned is kept by the process (its outbox), its lease
renewed, and recorded once the database answers; never a rerun without a crash (issue 23).
Real parts: a PostgreSQL cluster of the test's own stopped by the job itself, a uvicorn
socket, the shared server behind a TCP proxy that the test cuts."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from pgcluster import Cluster, own_cluster
from tcpproxy import TcpProxy
from test_web import AUTH, SECRET, TICK, serving
from tickq import Queue

LEASE = 3.0


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with own_cluster() as c:
        yield c


def _done(q: Queue, job_id: int) -> bool:
    job = q.get_job(job_id)
    return job is not None and job.status == "done"


def _eventually(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.timeout(120)
def test_an_http_tick_keeps_a_finished_job_through_an_outage_longer_than_the_lease(
    cluster: Cluster,
) -> None:
    """A tick over HTTP runs a job that stops the database for 7 s, more than twice the
    3 s lease. The request ends (503 + Retry-After, the database being down) with the
    outcome still unrecorded; the process keeps it, renews the lease once the database is
    back and records the job done. Ticks meanwhile and after the lease rerun nothing."""
    q = Queue(cluster.url, lease_seconds=LEASE)
    q.migrate()
    ran: list[float] = []
    back = threading.Timer(7.0, cluster.ctl, ("start",))

    @q.job()
    def outage() -> None:
        ran.append(time.monotonic())
        if len(ran) == 1:  # the first run only: a rerun is the bug, not a second outage
            cluster.ctl("stop")
            back.start()

    job_id = outage.enqueue()
    try:
        with serving(q.asgi_app(secret=SECRET)) as base:
            began = time.monotonic()
            answer = httpx.post(base + TICK, headers=AUTH, timeout=30)
            took = time.monotonic() - began
            assert answer.status_code == 503, answer.text
            assert answer.headers.get("retry-after"), answer.headers
            assert took < 5.0, took  # the request ended before the database came back
            back.join(timeout=60)
            # Back: ticks as a scheduler would send them, each rescuing what it may.
            summaries = []
            deadline = time.monotonic() + 3 * LEASE
            while time.monotonic() < deadline:
                reply = httpx.post(base + TICK, headers=AUTH, timeout=30)
                if reply.status_code == 200:
                    summaries.append(reply.json())
                time.sleep(0.3)
    finally:
        back.cancel()
    assert _done(q, job_id), q.get_job(job_id)
    assert len(ran) == 1, f"the finished job ran {len(ran)} times"
    assert [a.outcome for a in q.attempts(job_id)] == ["done"]
    assert summaries and all(s["jobs"]["rescued"] == 0 for s in summaries), summaries
    assert summaries[-1]["jobs"]["held"] == 0
    q.close()


@pytest.fixture
def proxied(pg_schema_url: str) -> Iterator[tuple[TcpProxy, str]]:
    Queue(pg_schema_url).migrate()
    parts = urlsplit(pg_schema_url)
    proxy = TcpProxy(parts.port or 5432)
    try:
        yield proxy, parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}").geturl()
    finally:
        proxy.close()


class Clock:
    """An injected monotonic clock for the outbox: how long an outcome waited."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _quiet_outbox(q: Queue, clock: Clock) -> None:
    """This process's outbox, on ``clock``, sending only when told (no thread)."""
    from tickq.cycle import outbox_of

    outbox = outbox_of(q._runtime)
    outbox.clock, outbox.background = clock, False


def _cutting_job(q: Queue, proxy: TcpProxy, confirmed: bool = False) -> int:
    @q.job()
    def cut_off() -> None:
        if confirmed:
            time.sleep(LEASE / 3 + 0.3)  # a renewal has confirmed the start
        proxy.cut()

    return cut_off.enqueue()


@pytest.mark.timeout(60)
def test_the_next_call_records_a_held_outcome_before_any_rescue(
    proxied: tuple[TcpProxy, str], pg_schema_url: str
) -> None:
    """As on a host that froze the process between requests (nothing renewed the lease,
    nothing retried): the next ``process_jobs`` records the held outcome first of all,
    before its rescue could take the job back, which then has nothing to rescue."""
    from tickq.cycle import run_cycle

    proxy, url = proxied
    q = Queue(url, lease_seconds=LEASE)
    clock = Clock()
    _quiet_outbox(q, clock)
    job_id = _cutting_job(q, proxy)
    report = run_cycle(q._runtime, patience=0.1)
    assert report["succeeded"] == 0 and report["held"] == 1, report
    q._runtime.lease_keeper.stop()  # frozen: no renewal
    time.sleep(LEASE + 0.5)  # the lease has run out
    proxy.restore()
    clock.now += 30
    report = q.process_jobs()
    assert report["rescued"] == 0 and report["held"] == 0 and report["claimed"] == 0, report
    assert _done(q, job_id)
    assert [a.outcome for a in q.attempts(job_id)] == ["done"]
    q.close()


@pytest.mark.timeout(60)
def test_a_held_outcome_of_a_job_taken_over_changes_nothing_and_says_so(
    proxied: tuple[TcpProxy, str], pg_schema_url: str
) -> None:
    """Only this process is cut off; another rescues the job once its lease runs out and
    runs it again. The held outcome, sent when the proxy is back, is fenced by owner and
    attempt: the job stays as the rerun left it, and the first run's history row says its
    outcome came 42 s late (the injected clock), not that it crashed."""
    proxy, url = proxied
    q = Queue(url, lease_seconds=LEASE)
    clock = Clock()
    _quiet_outbox(q, clock)
    job_id = _cutting_job(q, proxy, confirmed=True)
    from tickq.cycle import run_cycle

    assert run_cycle(q._runtime, patience=0.1)["held"] == 1
    other = Queue(pg_schema_url, lease_seconds=LEASE)
    other.job(name="cut_off")(lambda: None)
    _eventually(lambda: other.process_jobs(limit=0)["rescued"], 10, "the rescue")
    assert other.process_jobs()["succeeded"] == 1
    proxy.restore()
    clock.now += 42
    from tickq.cycle import outbox_of

    assert outbox_of(q._runtime).flush() == 0
    assert q._runtime.held_outcomes() == 0
    history = q.attempts(job_id)
    assert [(a.attempt, a.outcome) for a in history] == [(1, "lease_expired"), (2, "done")]
    error = history[0].error or ""
    assert "outcome recorded late; the job had been rescued after the lease ran out during a " \
           "database outage of 42 s" in error, error  # fmt: skip
    q.close()
    other.close()


@pytest.mark.timeout(60)
def test_close_tries_once_more_and_names_the_outcomes_it_drops(
    proxied: tuple[TcpProxy, str], caplog: pytest.LogCaptureFixture
) -> None:
    from tickq.cycle import run_cycle

    proxy, url = proxied
    q = Queue(url, lease_seconds=LEASE)
    _quiet_outbox(q, Clock())
    job_id = _cutting_job(q, proxy)
    assert run_cycle(q._runtime, patience=0.1)["held"] == 1
    with caplog.at_level(logging.WARNING, logger="tickq"):
        q.close()
    dropped = [r for r in caplog.records if getattr(r, "event", "") == "held_outcomes_dropped"]
    assert len(dropped) == 1 and f"jobs [{job_id}]" in dropped[0].getMessage(), caplog.text
    assert q._runtime.held_outcomes() == 0 and not q._runtime.lease_keeper.holding()
    proxy.restore()
    # Closed with nothing held and the database back: the Queue works on.
    assert q.process_jobs(limit=0)["held"] == 0
    q.close()


@pytest.mark.timeout(60)
def test_close_records_what_it_can(proxied: tuple[TcpProxy, str]) -> None:
    from tickq.cycle import run_cycle

    proxy, url = proxied
    q = Queue(url, lease_seconds=LEASE)
    _quiet_outbox(q, Clock())
    job_id = _cutting_job(q, proxy)
    assert run_cycle(q._runtime, patience=0.1)["held"] == 1
    proxy.restore()
    q.close()
    assert _done(q, job_id) and q._runtime.held_outcomes() == 0
    q.close()


EXITS_HOLDING = """
import logging, sys
from tcpproxy import TcpProxy
from tickq import Queue
from tickq.cycle import run_cycle

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
url, port = sys.argv[1], int(sys.argv[2])
proxy = TcpProxy(port)
q = Queue(url.replace("@127.0.0.1:%d/" % port, "@127.0.0.1:%d/" % proxy.port))

@q.job()
def cut_off() -> None:
    proxy.cut()

job_id = cut_off.enqueue()
print(job_id, run_cycle(q._runtime, patience=0.01)["held"], flush=True)
"""  # a script that ends without q.close(), its outcome held


@pytest.mark.timeout(60)
def test_a_process_that_exits_holding_an_outcome_names_the_job(
    pg_schema_url: str, tmp_path: object
) -> None:
    import subprocess
    import sys

    from conftest import tickq_env

    Queue(pg_schema_url).migrate()
    port = urlsplit(pg_schema_url).port or 5432
    done = subprocess.run([sys.executable, "-c", EXITS_HOLDING, pg_schema_url, str(port)],
                          capture_output=True, text=True, timeout=60, env=tickq_env())  # fmt: skip
    assert done.returncode == 0, done.stderr
    job_id, held = done.stdout.split()
    assert held == "1", done.stdout
    assert f"jobs [{job_id}] stay running until their lease runs out" in done.stderr, done.stderr


@pytest.mark.timeout(60)
def test_concurrent_ticks_record_a_held_outcome_once(
    proxied: tuple[TcpProxy, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Threads of a threaded server tick at once while the outbox's thread sends too: the
    outcome is recorded once (a second send would find it stale and note it late)."""
    from tickq.cycle import outbox_of, run_cycle

    proxy, url = proxied
    q = Queue(url, lease_seconds=LEASE)
    job_id = _cutting_job(q, proxy)
    assert run_cycle(q._runtime, patience=0.1)["held"] == 1
    assert outbox_of(q._runtime).background  # its thread sends after ~0.25 s
    proxy.restore()
    results: list[object] = []

    def tick() -> None:
        results.append(q.tick()["jobs"]["held"])

    with caplog.at_level(logging.INFO, logger="tickq"):
        threads = [threading.Thread(target=tick) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert results == [0] * 6, results
    assert "recorded late" not in caplog.text
    assert [a.outcome for a in q.attempts(job_id)] == ["done"]
    recorded = [r for r in caplog.records if getattr(r, "event", "") == "held_outcomes_recorded"]
    assert len(recorded) == 1, caplog.text
    q.close()
