"""The floor: the least SQL a table queue needs, with the same driver tickq uses.

It runs on tickq's own ``tickq_jobs`` table (same columns, same partial indexes), and
does what any correct table queue must: return the new job's id on insert; claim due
pending jobs in priority order, counting the attempt and taking a lease (so a crashed
worker's job can be found again); mark them done. Nothing else: no unique keys, no
guards on the owner, no attempt history, no logging. The gap between a tickq figure and
its floor is what tickq's own code costs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

LEASE = timedelta(seconds=60)


def _now() -> str:
    # tickq's SQLite text format, so run_after comparisons behave exactly as for tickq.
    return datetime.now(UTC).isoformat(timespec="microseconds")


class SQLiteFloor:
    """Autocommit sqlite3 connection: one statement per transaction, except bulk inserts."""

    INSERT = (
        "INSERT INTO tickq_jobs (type, payload, run_after, created_at, updated_at) "
        "VALUES ('noop', ?, ?, ?, ?) RETURNING id"
    )
    CLAIM = """
        UPDATE tickq_jobs SET status = 'running', attempts = attempts + 1, lease_expires_at = ?
        WHERE id IN (SELECT id FROM tickq_jobs WHERE status = 'pending' AND run_after <= ?
                     ORDER BY priority DESC, run_after, id LIMIT ?)
        RETURNING id, payload"""
    DONE = (
        "UPDATE tickq_jobs SET status = 'done', finished_at = ?, lease_expires_at = NULL "
        "WHERE id IN (SELECT value FROM json_each(?))"
    )

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def insert_one(self, payload: dict[str, Any]) -> int:
        now = _now()
        return int(
            self.conn.execute(self.INSERT, (json.dumps(payload), now, now, now)).fetchone()[0]
        )

    def insert_many(self, payloads: list[dict[str, Any]]) -> list[int]:
        now = _now()
        self.conn.execute("BEGIN IMMEDIATE")
        ids = [
            self.conn.execute(self.INSERT, (json.dumps(p), now, now, now)).fetchone()[0]
            for p in payloads
        ]
        self.conn.execute("COMMIT")
        return ids

    def claim(self, limit: int) -> list[tuple[int, dict[str, Any]]]:
        # One UPDATE statement is atomic in autocommit mode: it takes the write lock first.
        now = datetime.now(UTC)
        lease = (now + LEASE).isoformat(timespec="microseconds")
        rows = self.conn.execute(
            self.CLAIM, (lease, now.isoformat(timespec="microseconds"), limit)
        ).fetchall()
        return [(job_id, json.loads(payload)) for job_id, payload in rows]

    def done(self, ids: list[int]) -> None:
        self.conn.execute(self.DONE, (_now(), json.dumps(ids)))


class PostgresFloor:
    """Autocommit psycopg 3 connection: every statement is its own transaction."""

    INSERT = "INSERT INTO tickq_jobs (type, payload) VALUES ('noop', %s::json) RETURNING id"
    INSERT_MANY = (
        "INSERT INTO tickq_jobs (type, payload) "
        "SELECT 'noop', p::json FROM unnest(%s::text[]) AS p RETURNING id"
    )
    # ANY(ARRAY(...)) makes the planner fetch the claimed rows by primary key; the
    # UPDATE ... FROM (CTE) shape tickq uses can plan as a hash join over a seq scan.
    CLAIM = """
        UPDATE tickq_jobs SET status = 'running', attempts = attempts + 1,
               lease_expires_at = now() + interval '60 seconds'
        WHERE id = ANY(ARRAY(
            SELECT id FROM tickq_jobs WHERE status = 'pending' AND run_after <= now()
            ORDER BY priority DESC, run_after, id LIMIT %s FOR UPDATE SKIP LOCKED))
        RETURNING id, payload"""
    DONE = (
        "UPDATE tickq_jobs SET status = 'done', finished_at = now(), lease_expires_at = NULL "
        "WHERE id = ANY(%s)"
    )

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def insert_one(self, payload: dict[str, Any]) -> int:
        return int(self.conn.execute(self.INSERT, (json.dumps(payload),)).fetchone()[0])

    def insert_many(self, payloads: list[dict[str, Any]]) -> list[int]:
        rows = self.conn.execute(self.INSERT_MANY, ([json.dumps(p) for p in payloads],)).fetchall()
        return [r[0] for r in rows]

    def claim(self, limit: int) -> list[tuple[int, dict[str, Any]]]:
        return [(r[0], r[1]) for r in self.conn.execute(self.CLAIM, (limit,)).fetchall()]

    def done(self, ids: list[int]) -> None:
        self.conn.execute(self.DONE, (ids,))

    def insert_and_notify(self, payload: dict[str, Any], channel: str) -> None:
        """Enqueue and wake a listener in one transaction (NOTIFY is sent at commit)."""
        with self.conn.transaction():
            self.conn.execute(self.INSERT, (json.dumps(payload),))
            self.conn.execute(f"NOTIFY {channel}")


def floor_for(dialect: str, conn: Any) -> SQLiteFloor | PostgresFloor:
    return SQLiteFloor(conn) if dialect == "sqlite" else PostgresFloor(conn)


def drain(floor: SQLiteFloor | PostgresFloor, batch: int) -> list[tuple[int, float]]:
    """Claim ``batch`` at a time and mark them done until nothing is due.

    Returns ``(n, start_time)`` per job, start being when its claim returned.
    """
    import time

    runs: list[tuple[int, float]] = []
    while True:
        jobs = floor.claim(batch)
        if not jobs:
            return runs
        started = time.time()
        runs.extend((payload["n"], started) for _, payload in jobs)
        floor.done([job_id for job_id, _ in jobs])
