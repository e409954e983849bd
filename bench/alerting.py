"""Figure 5: what an idle worker costs, and how long a failure takes to reach a webhook.

- idle CPU: a ``tickq worker`` with nothing to do, measured over 10 s from the kernel's
  CPU time of the whole process (``/proc/PID/stat``: every thread, those that have ended
  included), as % of one core;
- alert delay: from a job's ``finished_at`` (failed for good) to the moment a real HTTP
  receiver in this process gets the alert; for a first failure and for a storm of 50,
  in a ``tickq worker`` process and in ``q.tick()`` (which delivers before returning). The
  benchmark's ``group_wait`` is 1 s (the default is 30 s), so the delay is about 1 s plus
  what tickq adds; a storm must still make one alert, never one per failure.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import bench_app
import procs
from databases import Database
from figures import Figure, Lost, check

IDLE_SECONDS = 10.0
GROUP_WAIT = 1.0
STORM = 50


def idle_figures(db: Database, runs: int) -> list[Figure]:
    from figures import Series, repeat

    trips = Series()

    def measured() -> float:
        used, round_trips = _idle(db)
        trips.values.append(round_trips)
        return used

    (cpu,) = repeat(runs, measured)
    figures = [
        Figure(
            "idle_cpu",
            f"Idle worker: CPU over {IDLE_SECONDS:g} s",
            db.name,
            "% of a core",
            cpu,
            note="`tickq worker`, defaults, nothing to do; target < 1%",
        )
    ]
    if db.dialect == "postgres":
        figures.append(
            Figure(
                "idle_round_trips",
                "Idle worker: round trips to the database per minute",
                db.name,
                "per minute",
                trips,
                note=f"`tickq worker`, defaults, nothing to do, over {IDLE_SECONDS:g} s, "
                "counted by a TCP proxy (every query keeps a scale-to-zero database awake)",
            )
        )
    return figures


def _idle(db: Database) -> tuple[float, float]:
    """An idle worker's CPU (% of a core) and, on Postgres, its round trips per minute."""
    from roundtrips import RoundTripProxy

    db.reset()
    log_dir = procs.scratch("idle-")
    proxy = RoundTripProxy(db.url) if db.dialect == "postgres" else None
    worker = procs.spawn(
        ["-m", "tickq", "worker", "bench_app:q"],
        output=log_dir / "worker.out",
        TICKQ_BENCH_URL=proxy.url if proxy else db.url,
        TICKQ_BENCH_LOG_DIR=str(log_dir),
    )
    try:
        q = bench_app.make_queue(db.url)
        try:
            q.enqueue("noop", {"n": 0})
        finally:
            q.close()
        procs.wait_for(lambda: bool(bench_app.read_log(log_dir)), 60, "the worker's first job")
        time.sleep(1.0)  # let it fall idle
        before, started = cpu_seconds(worker.pid), time.monotonic()
        trips = proxy.count if proxy else 0
        time.sleep(IDLE_SECONDS)
        used, elapsed = cpu_seconds(worker.pid) - before, time.monotonic() - started
        trips = (proxy.count if proxy else 0) - trips
    finally:
        procs.stop(worker)
        if proxy:
            proxy.close()
    return used / elapsed * 100, trips * 60 / elapsed


def cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` so far, every thread's (user + system, in clock ticks). Summing
    ``/proc/PID/task/*`` instead raced with threads ending (the lease keeper's ends once
    it holds nothing) and left out the time of those that had ended."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


# -- alert delay ---------------------------------------------------------------------------
class Receiver:
    """A real HTTP server recording when each alert arrived (epoch seconds) and its body."""

    def __init__(self) -> None:
        self.got: list[tuple[float, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def count(self) -> int:
        with self.lock:
            return len(self.got)


@contextmanager
def receiver() -> Iterator[tuple[Receiver, str]]:
    import json

    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with rec.lock:
                rec.got.append((time.time(), body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec, f"http://127.0.0.1:{server.server_address[1]}/alert"
    finally:
        server.shutdown()
        server.server_close()


def alert_figures(db: Database, runs: int) -> list[Figure]:
    from figures import repeat

    figures = []
    with receiver() as (rec, url):
        for where, measure in (("worker", _in_worker), ("tick", _in_tick)):
            for count in (1, STORM):
                (series,) = repeat(runs, lambda m=measure, c=count: m(db, rec, url, c))
                what = "first failure" if count == 1 else f"storm of {count} failures"
                figures.append(
                    Figure(
                        f"alert_{where}_{'first' if count == 1 else 'storm'}",
                        f"Alert delay, {what}, in {'a worker' if where == 'worker' else 'a tick'}",
                        db.name,
                        "ms",
                        series,
                        note=f"final failure → webhook received; group_wait {GROUP_WAIT:g} s"
                        + ("" if where == "worker" else "; `q.tick()` delivers before returning"),
                    )
                )
    return figures


def _failed_at(q: Any, ids: list[int]) -> float:
    times = []
    for job_id in ids:
        job = q.get_job(job_id)
        check(None if job and job.finished_at else f"job {job_id} did not finish")
        times.append(job.finished_at.timestamp())
    return min(times)


def _one_alert(rec: Receiver, seen: int, count: int) -> float:
    """The new alert's arrival; raises ``Lost`` unless exactly one came for the failures."""
    time.sleep(0.3)  # a second alert for the same failures would have come by now
    new = rec.got[seen:]
    check(None if len(new) == 1 else f"{len(new)} alerts for {count} failure(s), expected 1")
    arrived, body = new[0]
    check(None if body.get("failed_jobs", 0) >= 1 else f"alert without failures: {body}")
    return arrived


def _in_worker(db: Database, rec: Receiver, url: str, count: int) -> float:
    db.reset()
    log_dir = procs.scratch("alert-")
    worker = procs.spawn(
        ["-m", "tickq", "worker", "bench_app:q"],
        output=log_dir / "worker.out",
        TICKQ_BENCH_URL=db.url,
        TICKQ_BENCH_LOG_DIR=str(log_dir),
        TICKQ_BENCH_ALERT_URL=url,
        TICKQ_BENCH_GROUP_WAIT=str(GROUP_WAIT),
    )
    q = bench_app.make_alerting_queue(db.url, url, GROUP_WAIT)
    try:
        q.enqueue("noop", {"n": 0})
        procs.wait_for(lambda: bool(bench_app.read_log(log_dir)), 60, "the worker's first job")
        seen = rec.count()
        ids = q.enqueue_many([("fail", {"n": n}) for n in range(count)])
        procs.wait_for(lambda: rec.count() > seen, 60, "the alert")
        arrived = _one_alert(rec, seen, count)
        return (arrived - _failed_at(q, ids)) * 1000
    finally:
        q.close()
        procs.stop(worker)


def _in_tick(db: Database, rec: Receiver, url: str, count: int) -> float:
    db.reset()
    q = bench_app.make_alerting_queue(db.url, url, GROUP_WAIT)  # a fresh process's state
    try:
        seen = rec.count()
        ids = q.enqueue_many([("fail", {"n": n}) for n in range(count)])
        report = q.tick(limit=count)
        check(None if report["jobs"]["failed"] == count else f"tick report: {report['jobs']}")
        if rec.count() == seen:
            raise Lost("the tick returned before its alert was delivered")
        arrived = _one_alert(rec, seen, count)
        return (arrived - _failed_at(q, ids)) * 1000
    finally:
        q.close()
