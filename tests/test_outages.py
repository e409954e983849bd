"""Faults that are not crashes never rerun a finished job (issue 23): a database outage
longer than the lease, a read-only episode, a deploy's SIGTERM. Real processes against a
PostgreSQL cluster of the test's own (stopped, made read-only), never the shared server."""

from __future__ import annotations

import signal
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgcluster import Cluster, own_cluster
from tcpproxy import TcpProxy
from tickq import Queue
from workerproc import WorkerProcess, eventually, runs

LEASE = "3"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with own_cluster() as c:
        yield c


def _env(url: str, folder: Path, lease: str = LEASE) -> dict[str, str]:
    return {"TICKQ_DATABASE_URL": url, "TICKQ_TEST_RUNS": str(folder), "TICKQ_TEST_LEASE": lease}


def _starts(folder: Path, job_id: int) -> list[dict[str, object]]:
    return [n for n in runs(folder) if n["event"] == "start" and n["id"] == job_id]


@pytest.mark.timeout(120)
def test_an_outage_longer_than_the_lease_does_not_rerun_the_finished_job(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The database stops while a worker runs a job and stays down 7 s, more than twice the
    3 s lease; the job finishes meanwhile. Once the database is back the worker records the
    outcome it kept (nobody took the job over), and a tick started at once rescues nothing:
    the job ran once, is done, and its history is the one run."""
    q = Queue(cluster.url, lease_seconds=float(LEASE), strict=False)
    q.migrate()
    job_id = q.enqueue("work", {"seconds": 1.5})
    with WorkerProcess("--poll-interval", "0.2", **_env(cluster.url, tmp_path)) as w:
        eventually(lambda: _starts(tmp_path, job_id), what="the job to start")
        cluster.ctl("stop")
        eventually(lambda: any(n["event"] == "end" for n in runs(tmp_path)), what="its end")
        time.sleep(7.0 - 1.5)
        cluster.ctl("start")
        # Another process right after the restart: the expired lease is not its to take.
        rescuer = Queue(cluster.url, lease_seconds=float(LEASE), strict=False)
        assert rescuer.process_jobs(limit=0)["rescued"] == 0
        rescuer.close()
        eventually(lambda: (j := q.get_job(job_id)) is not None and j.status == "done",
                   timeout=30, what="the job to be recorded done")  # fmt: skip
        time.sleep(float(LEASE) + 0.5)  # a rerun would have started by now
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    assert len(_starts(tmp_path, job_id)) == 1, runs(tmp_path)
    assert [a.outcome for a in q.attempts(job_id)] == ["done"]
    assert "lease ran out while the database was unreachable" not in w.output
    q.close()


@pytest.mark.timeout(120)
def test_an_outcome_recorded_after_a_takeover_says_so_in_the_history(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Only the worker is cut off (a proxy between it and the database), for longer than
    the lease: another process rescues the job, which runs again. When the worker is back
    its outcome is too late, and the rescued run's history row says exactly that, not
    "crashed"."""
    q = Queue(cluster.url, lease_seconds=float(LEASE), strict=False)
    q.migrate()
    job_id = q.enqueue("work", {"seconds": 2.5})
    proxy = TcpProxy(cluster.port)
    try:
        with WorkerProcess("--poll-interval", "0.2", **_env(proxy.url(), tmp_path)) as w:
            eventually(lambda: _starts(tmp_path, job_id), what="the job to start")
            time.sleep(1.3)  # a renewal (every second) has confirmed the start
            proxy.cut()
            cut_at = time.monotonic()
            rescuer = Queue(cluster.url, lease_seconds=float(LEASE), strict=False)
            eventually(lambda: rescuer.process_jobs(limit=0)["rescued"], timeout=20,
                       what="the job to be rescued")  # fmt: skip
            rescuer.close()
            time.sleep(max(0.0, 6.0 - (time.monotonic() - cut_at)))
            proxy.restore()
            eventually(lambda: (j := q.get_job(job_id)) is not None and j.status == "done",
                       timeout=30, what="the rerun to be done")  # fmt: skip
            w.send(signal.SIGTERM)
            assert w.wait() == 0, w.output
    finally:
        proxy.close()
    history = q.attempts(job_id)
    assert [(a.attempt, a.outcome) for a in history] == [(1, "lease_expired"), (2, "done")]
    error = history[0].error or ""
    assert "outcome recorded late; the job had been rescued after the lease ran out during a " \
           "database outage of" in error, error  # fmt: skip
    assert "succeeded" in error and "(crashed" not in error, error
    assert "recorded_late" in w.output or "recorded late" in w.output
    q.close()


@pytest.mark.timeout(120)
def test_process_jobs_keeps_a_finished_job_through_an_outage_longer_than_the_lease(
    cluster: Cluster,
) -> None:
    """``process_jobs`` runs a job that takes the database down for 7 s, more than twice
    the 3 s lease: the call keeps the outcome and records it once the server is back
    (nobody could rescue the job meanwhile, and right after the restart nobody does)."""
    import threading

    q = Queue(cluster.url, lease_seconds=float(LEASE))
    q.migrate()
    ran: list[int] = []
    back = threading.Timer(7.0, cluster.ctl, ("start",))

    @q.job()
    def outage(n: int) -> None:
        ran.append(n)
        cluster.ctl("stop")
        back.start()

    job_id = outage.enqueue(n=1)
    try:
        report = q.process_jobs()
    finally:
        back.join(timeout=60)
    assert report["succeeded"] == 1 and ran == [1], report
    assert [a.outcome for a in q.attempts(job_id)] == ["done"]
    q.close()


@pytest.mark.timeout(120)
def test_a_deploys_sigterm_leaves_a_released_row_for_the_cut_short_run(
    db_url: str, tmp_path: Path
) -> None:
    """SIGTERM with --grace 1 to a worker running 30 s jobs: the jobs go back without
    counting, and the cut-short run is in the history as ``released``, with the grace."""
    q = Queue(db_url, strict=False)
    q.migrate()
    job_id = q.enqueue("work", {"seconds": 30})
    env = _env(db_url, tmp_path, "60")
    with WorkerProcess("--grace", "1", "--poll-interval", "0.2", **env) as w:
        eventually(lambda: _starts(tmp_path, job_id), what="the job to start")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    job = q.get_job(job_id)
    assert job is not None and job.status == "pending" and job.attempts == 0
    history = q.attempts(job_id)
    assert [(a.attempt, a.outcome) for a in history] == [(1, "released")]
    assert "grace of 1s ran out" in (history[0].error or "")
    assert history[0].started_at is not None and history[0].finished_at is not None
    q.close()


def _read_only(cluster: Cluster, on: bool, how: str) -> None:
    """Make the cluster read-only (as a replica after a failover is) or writable again:
    ``database``: ``ALTER DATABASE`` then every other connection cut, so each reconnects
    into the new state; ``system``: ``ALTER SYSTEM`` and a reload, which turns the
    connections already open read-only (and back) without cutting them."""
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")
        value = "RESET default_transaction_read_only"
        if on:
            value = "SET default_transaction_read_only = on"
        if how == "database":
            conn.execute(f"ALTER DATABASE postgres {value}")
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE pid <> pg_backend_pid() AND datname = 'postgres'")  # fmt: skip
        else:
            conn.execute(f"ALTER SYSTEM {value}")
            conn.execute("SELECT pg_reload_conf()")


def _wake_up_latency(q: Queue, folder: Path, n: int) -> list[float]:
    took = []
    for _ in range(n):
        sent = time.monotonic()
        job_id = q.enqueue("work")
        eventually(lambda job_id=job_id: _starts(folder, job_id), timeout=10, what="a start")
        took.append(time.monotonic() - sent)
        time.sleep(0.05)
    return took


@pytest.mark.timeout(120)
def test_after_a_read_only_episode_the_worker_listens_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The database turns read-only for a few seconds while the worker polls it, then
    writable again: the worker never decides a pooler is in front of it, hears enqueues by
    LISTEN again (wake-ups in milliseconds, not a poll's second), and says so in a few
    lines, not a traceback per poll."""
    q = Queue(cluster.url, strict=False)
    q.migrate()
    env = _env(cluster.url, tmp_path, "6")
    with WorkerProcess("--log-format", "json", **env) as w:
        w.wait_for_line("listening")
        before = _wake_up_latency(q, tmp_path, 3)
        for how in ("database", "system"):  # two episodes
            running = [q.enqueue("work", {"seconds": 1.0}) for _ in range(2)]
            eventually(lambda ids=running: all(_starts(tmp_path, i) for i in ids), what="starts")
            _read_only(cluster, True, how)
            time.sleep(6.0)  # the jobs end meanwhile; five failed tries or more
            _read_only(cluster, False, how)
            time.sleep(2.5)  # the worker's backoff is at most ~1.8 s
            for i in running:
                eventually(lambda i=i: q.get_job(i).status == "done", what="recorded")  # type: ignore[union-attr]
        after = _wake_up_latency(q, tmp_path, 6)
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    lines = w.json_lines()
    events = [ln.get("event") for ln in lines]
    assert "pooler_detected" not in events and "polling" not in events, w.output
    assert statistics.median(after) < 0.25, (before, after, w.output)
    # One line per episode: the first failed try (a traceback only when the error is of a
    # kind tickq does not know yet), none per poll, no lease lost, nothing rescued or stale.
    trouble = [ln for ln in lines if ln.get("logger") == "tickq"
               and ln.get("level") in ("warning", "error")]  # fmt: skip
    assert [t.get("event") for t in trouble] == ["database_unavailable"] * 2, trouble
    assert sum("Traceback" in ln for ln in w.lines) <= 2, w.output
    starts = [n["id"] for n in runs(tmp_path) if n["event"] == "start"]
    assert len(starts) == len(set(starts)), "a job ran twice"
    q.close()


def test_every_release_of_an_attempt_keeps_its_own_history_row(db_url: str) -> None:
    """A job released twice under the same attempt number (two deploys), then done: three
    rows, oldest first, none lost to the history's key (a release is stored as -N, told
    apart by a negative snooze number); a release of a job that never started leaves none;
    the dashboard's timeline shows a release as a wait, not a failure."""
    from tickq.dashboard.views import timeline
    from tickq.store import Outcome

    q = Queue(db_url, strict=False)
    q.migrate()
    job_id = q.enqueue("work")
    store, owner = q._store, "host:1:feedbeef"
    [job] = store.claim(owner, 1, 60)
    assert store.release(owner, [job]) == [job_id]  # waited in line, never started: no row
    for grace in (3.0, 0.5):
        [job] = store.claim(owner, 1, 60)
        assert store.release(owner, [job], {job.id}, grace) == [job_id]
    [job] = store.claim(owner, 1, 60)
    assert [j.id for j in store.record(owner, [Outcome(job, "succeeded")]).succeeded] == [job_id]
    history = q.attempts(job_id)
    assert [(a.attempt, a.outcome) for a in history] == [
        (1, "released"), (1, "released"), (1, "done")
    ]  # fmt: skip
    assert "grace of 3s ran out" in (history[0].error or "")
    assert "grace of 0.5s ran out" in (history[1].error or "")
    done = q.get_job(job_id)
    assert done is not None and done.attempts == 1
    events = timeline(done, [{"a": a} for a in history])
    assert {e["kind"] for e in events if e["what"] == "attempt 1: released"} == {"pending"}
    q.close()
