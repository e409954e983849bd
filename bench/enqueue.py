"""Figure 1: enqueue one job per transaction, and many at once, beside the floor's inserts."""

from __future__ import annotations

from time import perf_counter
from typing import Any

from databases import Database
from figures import Figure, check, repeat
from floor import floor_for

from tickq import Queue

BULK_CHUNK = 1000  # tickq's enqueue_many chunk on Postgres; the floor inserts as many per statement


def enqueue_figures(db: Database, q: Queue, one: int, many: int, runs: int) -> list[Figure]:
    conn = db.connect()
    floor = floor_for(db.dialect, conn)
    try:
        singles = repeat(runs, lambda: _tickq_one(db, q, one), lambda: _floor_one(db, floor, one))
        bulk = repeat(runs, lambda: _tickq_many(db, q, many), lambda: _floor_many(db, floor, many))
    finally:
        conn.close()
    return [
        Figure(
            "enqueue_one",
            "Enqueue, one job per transaction",
            db.name,
            "jobs/s",
            *singles,
            note=f"{one} jobs; floor: single-row INSERT … RETURNING id",
        ),
        Figure(
            "enqueue_many",
            "Enqueue many (`enqueue_many`)",
            db.name,
            "jobs/s",
            *bulk,
            note=f"{many} jobs; floor: {BULK_CHUNK}-row INSERT per transaction",
        ),
    ]


def _timed_fill(db: Database, n: int, fill: Any) -> float:
    db.reset()
    started = perf_counter()
    fill()
    elapsed = perf_counter() - started
    check(db.check_stored(n))
    return n / elapsed


def _tickq_one(db: Database, q: Queue, n: int) -> float:
    def fill() -> None:
        for i in range(n):
            q.enqueue("noop", {"n": i})

    return _timed_fill(db, n, fill)


def _floor_one(db: Database, floor: Any, n: int) -> float:
    def fill() -> None:
        for i in range(n):
            floor.insert_one({"n": i})

    return _timed_fill(db, n, fill)


def _tickq_many(db: Database, q: Queue, n: int) -> float:
    jobs = [("noop", {"n": i}) for i in range(n)]
    return _timed_fill(db, n, lambda: q.enqueue_many(jobs))


def _floor_many(db: Database, floor: Any, n: int) -> float:
    payloads = [{"n": i} for i in range(n)]

    def fill() -> None:
        for start in range(0, n, BULK_CHUNK):
            floor.insert_many(payloads[start : start + BULK_CHUNK])

    return _timed_fill(db, n, fill)
