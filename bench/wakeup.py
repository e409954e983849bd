"""Figure 4: what a sleeping host pays per wake-up, beside the least the driver can do.

- in-process time of an empty tick and of a tick that runs 100 due no-op jobs (warm
  process and connection: what the app's handler spends);
- round trips per empty tick: Postgres through a counting TCP proxy; SQLite has no
  network, so there it is statements executed (``set_trace_callback``);
- a cold ``tickq tick APP`` process with nothing due, beside a bare Python process that
  imports the driver, connects and runs ``SELECT 1``;
- ``import tickq`` (with the backend's store module) from ``python -X importtime``.

Until ``q.tick()`` / ``tickq tick`` exist, ``q.process_jobs(limit=100)`` stands in (the
tick runs it after enqueueing due schedule slots) and is labelled so.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from time import perf_counter
from typing import Any

import bench_app
import procs
from databases import Database
from figures import Figure, Series, check, exactly_once, repeat
from floor import floor_for
from roundtrips import RoundTripProxy

from tickq import Queue

DUE = 100


def has_tick() -> bool:
    return hasattr(Queue, "tick")


def _tick(q: Queue) -> Callable[[], Any]:
    return (lambda: q.tick(limit=DUE)) if has_tick() else (lambda: q.process_jobs(limit=DUE))  # type: ignore[attr-defined]


def _label() -> str:
    return (
        "`q.tick(limit=100)`"
        if has_tick()
        else "STAND-IN: no `q.tick()` in this build; `q.process_jobs(limit=100)`"
    )


def wakeup_figures(
    db: Database, q: Queue, samples: int, runs: int, cold_runs: int, tick_cli: bool
) -> list[Figure]:
    db.reset()
    conn = db.connect()
    floor = floor_for(db.dialect, conn)
    try:
        empty = _empty(q, floor, samples)
        due = repeat(runs, lambda: _due_tickq(db, q), lambda: _due_floor(db, floor))
        failing = repeat(runs, lambda: _due_tickq(db, q, "boom"), lambda: _due_tickq(db, q))
        trips = _round_trips(db, q)
    finally:
        conn.close()
    return [
        Figure(
            "tick_empty",
            "Empty tick, in-process time",
            db.name,
            "ms",
            *empty,
            note=f"{_label()}; warm connection; floor: one claim query finding nothing",
        ),
        Figure(
            "tick_100",
            f"Tick running {DUE} due no-op jobs, in-process time",
            db.name,
            "ms",
            *due,
            note=f"{_label()}; floor: claim {DUE} + mark done",
        ),
        Figure(
            "tick_100_failing",
            f"Tick running {DUE} due jobs that raise, in-process time",
            db.name,
            "ms",
            *failing,
            note=f"{_label()}; each attempt raises and is retried later. Beside it, NOT the "
            f"SQL floor: the same tick of {DUE} jobs that succeed, so the ratio is what "
            "failing costs",
        ),
        Figure(
            "tick_round_trips",
            "Round trips per empty tick"
            if db.dialect == "postgres"
            else "SQL statements per empty tick (no network)",
            db.name,
            "count",
            *trips,
            note="counted by a TCP proxy" if db.dialect == "postgres" else "sqlite3 trace callback",
        ),
        _cold(db, cold_runs, tick_cli),
        _import(db, cold_runs),
    ]


def _timed_ms(fn: Callable[[], Any]) -> float:
    started = perf_counter()
    fn()
    return (perf_counter() - started) * 1000


def _empty(q: Queue, floor: Any, samples: int) -> list[Series]:
    tick = _tick(q)
    for _ in range(3):  # warm up: connections, prepared statements
        tick()
        floor.claim(DUE)
    return repeat(samples, lambda: _timed_ms(tick), lambda: _timed_ms(lambda: floor.claim(DUE)))


def _due_tickq(db: Database, q: Queue, job_type: str = "noop") -> float:
    db.reset()
    q.enqueue_many([(job_type, {"n": i}) for i in range(DUE)])
    log_dir = procs.scratch("tick-")
    bench_app.use_log_dir(log_dir)
    elapsed = _timed_ms(_tick(q))
    exactly_once((n for n, _ in bench_app.read_log(log_dir)), range(DUE))
    if job_type == "noop":
        check(db.check_done(DUE))
    else:
        check(db.check_retried(DUE))
    return elapsed


def _due_floor(db: Database, floor: Any) -> float:
    db.reset()
    floor.insert_many([{"n": i} for i in range(DUE)])
    ran: list[int] = []

    def tick() -> None:
        jobs = floor.claim(DUE)
        ran.extend(payload["n"] for _, payload in jobs)
        floor.done([job_id for job_id, _ in jobs])

    elapsed = _timed_ms(tick)
    exactly_once(ran, range(DUE))
    check(db.check_done(DUE))
    return elapsed


def _round_trips(db: Database, q: Queue) -> list[Series]:
    db.reset()
    if db.dialect == "sqlite":
        conn = db.connect()
        try:
            return [
                _count_statements(q._store._connection(), _tick(q)),
                _count_statements(conn, lambda: floor_for("sqlite", conn).claim(DUE)),
            ]
        finally:
            conn.close()
    proxy = RoundTripProxy(db.url)
    counted = bench_app.make_queue(proxy.url)
    conn = db.psycopg.connect(proxy.url, autocommit=True)  # type: ignore[attr-defined]
    try:
        return [
            _count_proxy(proxy, _tick(counted)),
            _count_proxy(proxy, lambda: floor_for("postgres", conn).claim(DUE)),
        ]
    finally:
        counted.close()
        conn.close()
        proxy.close()


def _count_statements(conn: Any, fn: Callable[[], Any]) -> Series:
    fn()  # warm up
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        values = []
        for _ in range(3):
            seen.clear()
            fn()
            values.append(float(len(seen)))
    finally:
        conn.set_trace_callback(None)
    return Series(values)


def _count_proxy(proxy: RoundTripProxy, fn: Callable[[], Any]) -> Series:
    fn()  # warm up: the connection is opened and counted here, not below
    values = []
    for _ in range(3):
        before = proxy.count
        fn()
        values.append(float(proxy.count - before))
    return Series(values)


def _cold(db: Database, runs: int, tick_cli: bool) -> Figure:
    db.reset()
    env = {"TICKQ_BENCH_URL": db.url, "TICKQ_BENCH_LOG_DIR": str(procs.scratch("cold-"))}
    if tick_cli:
        args, label = ["-m", "tickq", "tick", "bench_app:q"], "`tickq tick bench_app:q`"
    else:
        args = [
            "-c",
            "from tickq.cli.app import load_app; load_app('bench_app:q').process_jobs(limit=100)",
        ]
        label = "STAND-IN: no `tickq tick` in this build; python -c load_app + process_jobs(100)"
    bare = _bare_driver_args(db)
    cold = repeat(
        runs, lambda: procs.wall_time(args, **env) * 1000, lambda: procs.wall_time(bare) * 1000
    )
    trips = f"; {_cold_round_trips(db, args, env)}" if db.dialect == "postgres" else ""
    return Figure(
        "tick_cold",
        "Cold process, nothing due: wall time",
        db.name,
        "ms",
        *cold,
        note=f"{label}; floor: python imports the driver, connects, SELECT 1{trips}",
    )


def _cold_round_trips(db: Database, args: list[str], env: dict[str, str]) -> str:
    """Round trips of one cold process, connection set-up included, beside the bare one's."""
    proxy = RoundTripProxy(db.url)
    try:
        procs.wall_time(args, **{**env, "TICKQ_BENCH_URL": proxy.url})
        tickq_trips = proxy.count
        procs.wall_time(_bare_driver_args(db, proxy.url))
        return f"round trips incl. connecting: {tickq_trips} vs {proxy.count - tickq_trips}"
    finally:
        proxy.close()


def _bare_driver_args(db: Database, url: str | None = None) -> list[str]:
    if db.dialect == "sqlite":
        code = f"import sqlite3; sqlite3.connect({str(db.path)!r}).execute('SELECT 1').fetchall()"  # type: ignore[attr-defined]
    else:
        code = (
            f"import psycopg; psycopg.connect({url or db.url!r}, autocommit=True)"
            ".execute('SELECT 1').fetchall()"
        )
    return ["-c", code]


def _import(db: Database, runs: int) -> Figure:
    url = "sqlite:///unused.db" if db.dialect == "sqlite" else db.url
    tickq_code = f"import tickq; tickq.Queue({url!r})"
    driver = "sqlite3" if db.dialect == "sqlite" else "psycopg"
    startup = set(_top_level_imports("pass"))
    series = repeat(
        max(runs, 5),
        lambda: _import_ms(tickq_code, startup),
        lambda: _import_ms(f"import {driver}", startup),
    )
    return Figure(
        "import",
        f"`import tickq` + `Queue({db.dialect} URL)`",
        db.name,
        "ms",
        *series,
        note="python -X importtime: every module loaded beyond interpreter start-up "
        f"(drivers included); floor: import {driver}",
    )


LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def _top_level_imports(code: str) -> dict[str, int]:
    """Top-level module -> cumulative microseconds, from ``python -X importtime -c code``."""
    done = subprocess.run(
        [procs.PYTHON, "-X", "importtime", "-c", code],
        cwd=procs.BENCH,
        env=procs.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"python -c {code!r} failed: {done.stderr.strip().splitlines()[-1:]}")
    return {m.group(4): int(m.group(2)) for m in LINE.finditer(done.stderr) if len(m.group(3)) == 1}


def _import_ms(code: str, startup: set[str]) -> float:
    """Milliseconds ``code`` spends importing what interpreter start-up had not loaded."""
    return sum(us for name, us in _top_level_imports(code).items() if name not in startup) / 1000
