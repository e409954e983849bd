"""Jobs at a steady offered rate with and without a transaction held open elsewhere.

    python bench/horizon.py [--quick] [--holder 600] [--rate 100] [--postgres-url URL]
                            [--no-scans]

Postgres only. One worker (a thread, ``run_worker``) runs no-op jobs that a producer
enqueues at ``--rate`` per second. Three phases of ``--holder`` seconds each, in one run,
on one fresh schema: *baseline* (nothing held), *holder* (a REPEATABLE READ transaction on
another connection, its snapshot taken, open for the whole phase), then *scans* (three
overlapping REPEATABLE READ transactions of ``--holder`` seconds each, started a third
apart, as three long report queries would be). After each held phase the producer goes
on until the empty tick is back within 1.5x of the baseline's: that is the recovery time.

Per phase: completed jobs/s, enqueue->finish p50/p99, the empty tick's median/p95 ms (a
``tick(limit=0)`` of a second Queue every 0.5 s), and the worker's WARNING of the held
horizon (its threshold: 60 s, or half a phase when shorter; it looks every 60 s, or a
quarter phase). ``--quick``: 20 s phases (a smoke run). ``run(...)`` returns the figures.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tickq import Queue  # noqa: E402

PG_URL = os.environ.get("TICKQ_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _url(base: str, schema: str) -> str:
    return base + ("&" if "?" in base else "?") + f"options=-csearch_path%3D{schema}"


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "long_transaction":
            self.lines.append(record.getMessage())


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def run(holder: float = 600.0, rate: float = 100.0, base_url: str = PG_URL,
        scans: bool = True) -> dict[str, Any]:  # fmt: skip
    """Run the phases; returns {phase: figures}."""
    import psycopg

    schema = f"bench_horizon_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base_url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    url = _url(base_url, schema)
    q = Queue(url)
    q.migrate()
    q.job(name="noop")(lambda: None)
    q._runtime.store.long_transaction_seconds = min(60.0, holder / 2)  # type: ignore[attr-defined]
    q._runtime.horizon_every = min(60.0, holder / 4)
    ticker = Queue(url, strict=False)  # the empty tick: limit=0, another Queue (its own connection)
    warnings = Warnings()
    logging.getLogger("tickq").addHandler(warnings)
    stop_worker, stop_producer = threading.Event(), threading.Event()
    worker = threading.Thread(target=q.run_worker, kwargs={"stop": stop_worker,
                              "concurrency": 4}, daemon=True)  # fmt: skip
    producer_q = Queue(url, strict=False)

    def produce() -> None:
        start, n = time.monotonic(), 0
        while not stop_producer.is_set():
            due = start + n / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer_q.enqueue("noop", {})
            n += 1

    def tick_ms() -> float:
        began = time.perf_counter()
        ticker.tick(limit=0)
        return (time.perf_counter() - began) * 1000

    def phase(seconds: float, hold: list[tuple[float, float]]) -> dict[str, Any]:
        """``hold``: (start offset, length) of each held transaction."""
        began_db = _db_now(url)
        began = time.monotonic()
        holders: list[psycopg.Connection[Any]] = []
        pending = sorted(hold)
        ends: list[tuple[float, psycopg.Connection[Any]]] = []
        ticks: list[float] = []
        warned_before = len(warnings.lines)
        while (elapsed := time.monotonic() - began) < seconds or ends:
            while pending and pending[0][0] <= elapsed:
                offset, length = pending.pop(0)
                conn = psycopg.connect(url, autocommit=True, application_name="bench-holder")
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                conn.execute("SELECT count(*) FROM tickq_jobs")
                holders.append(conn)
                ends.append((began + offset + length, conn))
            for end, conn in list(ends):
                if time.monotonic() >= end:
                    conn.execute("ROLLBACK")
                    conn.close()
                    ends.remove((end, conn))
            ticks.append(tick_ms())
            time.sleep(0.5)
        wall = time.monotonic() - began
        figures = _jobs_between(url, began_db, _db_now(url))
        figures.update(
            seconds=round(wall, 1), offered_per_s=rate,
            jobs_per_s=round(figures.pop("done") / wall, 1),
            empty_tick_ms_p50=round(statistics.median(ticks), 2),
            empty_tick_ms_p95=round(_pct(ticks, 0.95) or 0, 2),
            empty_tick_ms_last=round(statistics.median(ticks[-5:]), 2),
            warnings=len(warnings.lines) - warned_before,
        )  # fmt: skip
        return figures

    def recovery(baseline_tick: float, limit: float = 120.0) -> float | None:
        began = time.monotonic()
        window: list[float] = []
        while time.monotonic() - began < limit:
            window = [*window[-4:], tick_ms()]
            if len(window) == 5 and statistics.median(window) <= 1.5 * baseline_tick:
                return round(time.monotonic() - began, 1)
            time.sleep(0.5)
        return None

    results: dict[str, Any] = {}
    worker.start()
    prod = threading.Thread(target=produce, daemon=True)
    prod.start()
    try:
        time.sleep(min(5.0, holder / 4))  # warm up
        results["baseline"] = phase(holder, [])
        base_tick = results["baseline"]["empty_tick_ms_p50"]
        results["holder"] = phase(holder, [(0.0, holder)])
        results["holder"]["recovery_s"] = recovery(base_tick)
        if scans:
            third = holder / 3
            results["3 overlapping scans"] = phase(holder, [(0.0, holder), (third, holder),
                                                            (2 * third, holder)])  # fmt: skip
            results["3 overlapping scans"]["recovery_s"] = recovery(base_tick)
    finally:
        stop_producer.set()
        prod.join(10)
        stop_worker.set()
        worker.join(60)
        logging.getLogger("tickq").removeHandler(warnings)
        for each in (q, ticker, producer_q):
            each.close()
        with psycopg.connect(base_url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return results


def _db_now(url: str) -> Any:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


def _jobs_between(url: str, start: Any, end: Any) -> dict[str, Any]:
    """Jobs finished in [start, end): how many, enqueue->finish p50/p99 ms."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), "
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY finished_at - created_at), "
            "percentile_cont(0.99) WITHIN GROUP (ORDER BY finished_at - created_at) "
            "FROM tickq_jobs WHERE status = 'done' AND finished_at >= %s AND finished_at < %s",
            (start, end),
        ).fetchone()
    assert row is not None
    ms = [round(v.total_seconds() * 1000, 1) if v is not None else None for v in row[1:]]
    return {
        "done": int(row[0]),
        "enqueue_to_finish_ms_p50": ms[0],
        "enqueue_to_finish_ms_p99": ms[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 s phases")
    parser.add_argument("--holder", type=float, default=600.0, help="seconds per phase")
    parser.add_argument("--rate", type=float, default=100.0, help="jobs enqueued per second")
    parser.add_argument("--postgres-url", default=PG_URL)
    parser.add_argument("--no-scans", action="store_true")
    args = parser.parse_args()
    if args.holder <= 0 or args.rate <= 0:
        parser.error("--holder and --rate must be > 0")
    holder = 20.0 if args.quick else args.holder
    print(f"load average: {os.getloadavg()}", flush=True)
    results = run(holder, args.rate, args.postgres_url, not args.no_scans)
    base = results["baseline"]
    for name, fig in results.items():
        ratio = fig["jobs_per_s"] / base["jobs_per_s"] if base["jobs_per_s"] else 0
        tick = fig["empty_tick_ms_p50"] / base["empty_tick_ms_p50"]
        print(f"{name:>20}: {fig['jobs_per_s']:7.1f} jobs/s ({ratio:.2f}x)  "
              f"p50/p99 enqueue->finish {fig['enqueue_to_finish_ms_p50']}/"
              f"{fig['enqueue_to_finish_ms_p99']} ms  empty tick p50 "
              f"{fig['empty_tick_ms_p50']} ms ({tick:.2f}x), p95 {fig['empty_tick_ms_p95']}, "
              f"at end {fig['empty_tick_ms_last']}  recovery {fig.get('recovery_s', '-')} s  "
              f"warnings {fig['warnings']}")  # fmt: skip
    print(f"load average: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
