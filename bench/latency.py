"""Figure 3: an idle worker; jobs enqueued ``gap`` apart; enqueue call -> job start.

Latency is measured from just before the enqueue call (so the insert and its commit are
inside it) to the moment the job function starts, both on this machine's clock. The
floor on Postgres is a raw consumer that LISTENs and claims on each NOTIFY sent in the
inserting transaction. SQLite has no notifications, so it has no latency floor.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import procs
from bench_app import read_log
from databases import Database
from figures import Figure, Series, exactly_once, percentile, repeat
from floor import PostgresFloor

from tickq import Queue

PERCENTILES = (50, 95, 99)
CHANNEL = "tickq_bench_floor"
WARM_UP = -1


def latency_figures(
    db: Database, q: Queue, jobs: int, gap: float, runs: int, worker: bool
) -> list[Figure]:
    samples: dict[str, list[list[float]]] = {"tickq": [], "floor": []}
    measures: list[Callable[[], float]] = []
    if worker:
        measures.append(lambda: _record(samples["tickq"], _tickq_run(db, q, jobs, gap)))
    if db.dialect == "postgres":
        measures.append(lambda: _record(samples["floor"], _floor_run(db, jobs, gap)))
    outcome = iter(repeat(runs, *measures))
    tickq_series = next(outcome) if worker else None
    floor_series = next(outcome) if db.dialect == "postgres" else None
    note = f"{jobs} jobs {gap * 1000:g} ms apart into an idle worker; " + (
        "floor: LISTEN + claim on NOTIFY"
        if floor_series
        else "no floor: SQLite has no notifications"
    )
    figures = [
        Figure(
            f"latency_p{p}",
            f"Latency enqueue → start, p{p}",
            db.name,
            "ms",
            _percentiles(samples["tickq"], p, tickq_series),
            _percentiles(samples["floor"], p, floor_series),
            note=note,
            unavailable=None if worker else "`tickq worker` is not in this build",
        )
        for p in PERCENTILES
    ]
    if worker and db.dialect == "sqlite":
        figures += _several_workers(db, q, jobs, gap, runs)
    return figures


def _several_workers(db: Database, q: Queue, jobs: int, gap: float, runs: int) -> list[Figure]:
    """The same with two worker processes on one file: each must hear the other's peers."""
    per_run: list[list[float]] = []
    (series,) = repeat(runs, lambda: _record(per_run, _tickq_run(db, q, jobs, gap, workers=2)))
    return [
        Figure(
            f"latency_2_workers_p{p}",
            f"Latency enqueue → start, 2 workers on one file, p{p}",
            db.name,
            "ms",
            _percentiles(per_run, p, series),
            note=f"{jobs} jobs {gap * 1000:g} ms apart into two idle `tickq worker` processes",
        )
        for p in (50, 99)
    ]


def _record(store: list[list[float]], latencies: list[float]) -> float:
    store.append(latencies)
    return percentile(latencies, 50)


def _percentiles(per_run: list[list[float]], p: int, series: Series | None) -> Series | None:
    if series is None:
        return None
    return Series([percentile(run, p) for run in per_run], error=series.error)


def _enqueue_paced(enqueue: Callable[[int], None], jobs: int, gap: float) -> dict[int, float]:
    """Call ``enqueue(n)`` every ``gap`` seconds (no drift); returns n -> call time."""
    called, start = {}, time.monotonic()
    for n in range(jobs):
        time.sleep(max(0.0, start + n * gap - time.monotonic()))
        called[n] = time.time()
        enqueue(n)
    return called


def _latencies(runs: list[tuple[int, float]], called: dict[int, float]) -> list[float]:
    exactly_once((n for n, _ in runs if n >= 0), called)
    return [(started - called[n]) * 1000 for n, started in runs if n >= 0]


def _tickq_run(db: Database, q: Queue, jobs: int, gap: float, workers: int = 1) -> list[float]:
    db.reset()
    log_dir = procs.scratch("latency-")
    outputs = [log_dir / f"worker{i}.out" for i in range(workers)]
    spawned = [
        procs.spawn(
            ["-m", "tickq", "worker", "bench_app:q"],
            output=output,
            TICKQ_BENCH_URL=db.url,
            TICKQ_BENCH_LOG_DIR=str(log_dir),
        )
        for output in outputs
    ]
    try:
        for n in range(WARM_UP, WARM_UP - workers, -1):
            q.enqueue("noop", {"n": n})
        procs.wait_for(
            lambda: len(read_log(log_dir)) >= workers, 60, "the workers to run a first job"
        )
        time.sleep(0.3)  # let them fall idle
        called = _enqueue_paced(lambda n: q.enqueue("noop", {"n": n}), jobs, gap)
        procs.wait_for(
            lambda: len(read_log(log_dir)) >= jobs + workers, 30, "the workers to run every job"
        )
    finally:
        codes = [procs.stop(worker) for worker in spawned]
    for code, output in zip(codes, outputs, strict=True):
        if code:
            raise RuntimeError(
                f"tickq worker exited {code} after SIGTERM (expected 0): {procs.last_line(output)}"
            )
    return _latencies(read_log(log_dir), called)


def _floor_run(db: Database, jobs: int, gap: float) -> list[float]:
    db.reset()
    listener = procs.spawn(["drain.py", "listen", db.url, CHANNEL])
    conn = db.connect()
    try:
        assert listener.stdout is not None
        if listener.stdout.readline().strip() != "ready":
            raise RuntimeError("the floor listener did not start")
        floor = PostgresFloor(conn)
        called = _enqueue_paced(lambda n: floor.insert_and_notify({"n": n}, CHANNEL), jobs, gap)
        conn.execute(f"NOTIFY {CHANNEL}, 'stop'")
        runs = procs.result(listener, timeout=60)["runs"]
    finally:
        conn.close()
        procs.stop(listener)
    return _latencies([(n, t) for n, t in runs], called)
