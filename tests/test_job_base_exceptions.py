"""No exception a job raises stops the process that runs it: ``SystemExit``,
``KeyboardInterrupt`` and ``GeneratorExit`` from a job body (sync or async) are that
attempt's failure, with their class, under every driver — ``process_jobs``, the ``tickq
tick`` CLI, the tick over HTTP (a server answering in its main thread), the worker — each
run as a real process. Only a real signal to the process stops it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from conftest import ROOT, tickq_env
from tickq import Queue

APP = ROOT / "tests" / "apps" / "exits.py"
SECRET = "s3cret-token-for-the-tick-0123456789"
RAISED = [
    ("raises", "sys.exit", "SystemExit: 3"),
    ("raises", "KeyboardInterrupt", "KeyboardInterrupt"),
    ("raises", "GeneratorExit", "GeneratorExit"),
    ("raises_async", "sys.exit", "SystemExit: 4"),
    ("raises_async", "KeyboardInterrupt", "KeyboardInterrupt"),
    ("raises_async", "GeneratorExit", "GeneratorExit"),
]


@pytest.fixture
def q(db_url: str) -> Iterator[Queue]:
    q = Queue(db_url, strict=False)  # the jobs' functions live in the process under test
    q.migrate()
    yield q
    q.close()


def enqueue_all(q: Queue) -> tuple[list[int], int]:
    raised = [q.enqueue(job, {"name": name}, max_attempts=1) for job, name, _ in RAISED]
    return raised, q.enqueue("ok")


def assert_recorded(q: Queue, raised: list[int], ok: int) -> None:
    for job_id, (job, name, error) in zip(raised, RAISED, strict=True):
        found = q.get_job(job_id)
        assert found is not None and found.status == "failed", (job, name, found)
        assert (found.last_error or "").startswith(error), (job, name, found.last_error)
        assert "Traceback (most recent call last)" in (found.last_error or "")
    assert q.get_job(ok).status == "done"  # type: ignore[union-attr]


@pytest.mark.parametrize("driver", ["process_jobs", "tickq tick"])
def test_process_jobs_and_the_tick_cli_record_them_and_exit_0(
    q: Queue, db_url: str, driver: str
) -> None:
    raised, ok = enqueue_all(q)
    command = ([sys.executable, str(APP), "process"] if driver == "process_jobs"
               else [sys.executable, "-m", "tickq", "tick", "apps.exits:q"])  # fmt: skip
    done = subprocess.run(command, env=tickq_env(TICKQ_DATABASE_URL=db_url), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    jobs = report.get("jobs", report)
    assert (jobs["claimed"], jobs["failed"], jobs["succeeded"]) == (7, 6, 1), report
    assert_recorded(q, raised, ok)


def serving(db_url: str) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen([sys.executable, str(APP), "serve"], cwd=ROOT, text=True,
                              env=tickq_env(TICKQ_DATABASE_URL=db_url, CRON_SECRET=SECRET),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert server.stdout is not None
    line = server.stdout.readline()
    assert line.startswith("serving on "), line + server.stderr.read()  # type: ignore[union-attr]
    return server, line.split()[-1]


def test_the_tick_over_http_records_them_and_the_server_keeps_serving(
    q: Queue, db_url: str
) -> None:
    raised, ok = enqueue_all(q)
    server, base = serving(db_url)
    try:
        tick = urllib.request.Request(f"{base}/api/cron/tick", method="POST", data=b"",
                                      headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
        with urllib.request.urlopen(tick, timeout=30) as answer:
            report = json.loads(answer.read())
        assert (report["jobs"]["failed"], report["jobs"]["succeeded"]) == (6, 1), report
        with urllib.request.urlopen(f"{base}/api/cron/health", timeout=30) as answer:
            assert answer.status == 200  # the same server process answers on
        assert server.poll() is None
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert_recorded(q, raised, ok)


def unfinished(q: Queue, ids: list[int]) -> bool:
    return any(q.get_job(i).status in ("pending", "running") for i in ids)  # type: ignore[union-attr]


def test_the_worker_records_them_and_stops_on_sigterm_only(q: Queue, db_url: str) -> None:
    raised, ok = enqueue_all(q)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tickq", "worker", "apps.exits:q", "--concurrency", "3"],
        cwd=ROOT, env=tickq_env(TICKQ_DATABASE_URL=db_url), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and unfinished(q, [*raised, ok]):
            time.sleep(0.1)
        assert worker.poll() is None
    finally:
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, out
    assert_recorded(q, raised, ok)


def test_a_real_sigint_still_stops_process_jobs(q: Queue, db_url: str) -> None:
    job_id = q.enqueue("waits", {"seconds": 30})
    process = subprocess.Popen([sys.executable, str(APP), "process"], cwd=ROOT, text=True,
                               env=tickq_env(TICKQ_DATABASE_URL=db_url),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "waiting"  # inside the job, in the main thread
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode != 0 and "KeyboardInterrupt" in err, err
    job = q.get_job(job_id)
    assert job is not None and job.status == "running"  # its lease expires; it runs again


def test_a_signal_handler_that_raises_nothing_leaves_the_jobs_own_exit_its_failure(
    q: Queue, db_url: str
) -> None:
    """A server's graceful SIGTERM handler notes the signal and returns; the ``SystemExit``
    the job raises afterwards is still the job's failure, and the process goes on."""
    job_id, ok = q.enqueue("signalled_then_exits", max_attempts=1), q.enqueue("ok")
    done = subprocess.run([sys.executable, str(APP), "graceful"], cwd=ROOT, text=True,
                          env=tickq_env(TICKQ_DATABASE_URL=db_url), capture_output=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    job = q.get_job(job_id)
    assert job is not None and job.status == "failed", job
    assert (job.last_error or "").startswith("SystemExit: 5"), job.last_error
    assert q.get_job(ok).status == "done"  # type: ignore[union-attr]


def test_gunicorns_worker_timeout_stops_the_tick_without_spending_the_attempt(
    q: Queue, db_url: str
) -> None:
    """gunicorn's sync worker answers its master's SIGABRT (worker timeout) with
    ``sys.exit(1)`` from the handler: that is the process stopping, not the job failing.
    The job is left running for its lease to expire and be rescued; no attempt is recorded
    as ``SystemExit: 1``, and the tick starts no further job in the dying worker."""
    import socket
    import urllib.error

    job_id, ok = q.enqueue("waits", {"seconds": 30}), q.enqueue("ok")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", "1", "--timeout", "2", "--graceful-timeout",
         "2", "-b", f"127.0.0.1:{port}", "apps.exits:wsgi()"],
        cwd=ROOT / "tests", env=tickq_env(TICKQ_DATABASE_URL=db_url, CRON_SECRET=SECRET),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 30
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:
                urllib.request.urlopen(f"{base}/api/cron/health", timeout=5).close()
                break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                assert time.monotonic() < deadline, "gunicorn never answered"
                time.sleep(0.1)
        tick = urllib.request.Request(f"{base}/api/cron/tick", method="POST", data=b"",
                                      headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
        with pytest.raises(OSError):  # the worker died mid-request: no answer
            urllib.request.urlopen(tick, timeout=25).close()
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
    assert "WORKER TIMEOUT" in out, out
    job = q.get_job(job_id)
    assert job is not None and job.status == "running" and job.last_error is None, job
    assert q.get_job(ok).status == "pending"  # type: ignore[union-attr]
