"""The databases a benchmark run uses: a scratch SQLite file, a scratch Postgres schema.

Both hold tickq's own tables, created by tickq's migrations; the raw-SQL floor uses the
same table and indexes, so tickq and the floor pay for exactly the same schema. Every
measured run starts from empty tables.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
import uuid
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


class Database:
    """One backend's scratch database: its tickq URL, a driver connection, table checks."""

    name = ""
    dialect = ""

    url: str

    def connect(self) -> Any:
        raise NotImplementedError

    def reset(self) -> None:
        """Empty tickq's tables before a measured run."""
        raise NotImplementedError

    def summary(self) -> dict[str, int]:
        """Rows, distinct ``n``, rows done, attempts summed, and the smallest/largest n."""
        raise NotImplementedError

    def finished_at_range(self) -> tuple[float, float]:
        """First and last ``finished_at`` of done jobs, as local epoch seconds."""
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    def drop(self) -> None:
        raise NotImplementedError

    def analyze(self) -> None:
        with self.connect() as conn:
            conn.execute("ANALYZE tickq_jobs")

    def check_stored(self, n: int) -> str | None:
        """None when the table holds exactly jobs 0..n-1, once each; else what is wrong."""
        s = self.summary()
        if (
            s["rows"] == n
            and s["distinct_n"] == n
            and (n == 0 or (s["min_n"], s["max_n"]) == (0, n - 1))
        ):
            return None
        return (
            f"expected jobs 0..{n - 1} stored once each, found {s['rows']} rows with "
            f"{s['distinct_n']} distinct n"
        )

    def check_done(self, n: int) -> str | None:
        """None when exactly jobs 0..n-1 exist, each done after one attempt."""
        problem = self.check_stored(n)
        if problem:
            return problem
        s = self.summary()
        if s["done"] != n or s["attempts"] != n:
            return (
                f"expected {n} jobs done after 1 attempt each, found {s['done']} done "
                f"and {s['attempts']} attempts"
            )
        return None

    def check_retried(self, n: int) -> str | None:
        """None when exactly jobs 0..n-1 exist, none done, each after one attempt (which
        raised: the job is pending again, its retry due later)."""
        problem = self.check_stored(n)
        if problem:
            return problem
        s = self.summary()
        if s["done"] != 0 or s["attempts"] != n:
            return (
                f"expected {n} jobs retried after 1 attempt each, found {s['done']} done "
                f"and {s['attempts']} attempts"
            )
        return None


class SQLiteDatabase(Database):
    name = dialect = "sqlite"

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="tickq-bench-"))
        self.path = self.folder / "bench.db"
        self.url = f"sqlite:///{self.path}"

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA synchronous=FULL")  # tickq's default durability
        return conn

    def reset(self) -> None:
        with closing(self.connect()) as conn:
            conn.execute("DELETE FROM tickq_jobs")
            conn.execute("DELETE FROM tickq_attempts")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def summary(self) -> dict[str, int]:
        with closing(self.connect()) as conn:
            row = conn.execute(
                "SELECT count(*), count(DISTINCT json_extract(payload, '$.n')), "
                "coalesce(sum(status = 'done'), 0), coalesce(sum(attempts), 0), "
                "min(json_extract(payload, '$.n')), max(json_extract(payload, '$.n')) "
                "FROM tickq_jobs"
            ).fetchone()
        return dict(
            zip(("rows", "distinct_n", "done", "attempts", "min_n", "max_n"), row, strict=True)
        )

    def finished_at_range(self) -> tuple[float, float]:
        with closing(self.connect()) as conn:
            first, last = conn.execute(
                "SELECT min(finished_at), max(finished_at) FROM tickq_jobs WHERE status = 'done'"
            ).fetchone()
        return _epoch(first), _epoch(last)

    def analyze(self) -> None:
        with closing(self.connect()) as conn:
            conn.execute("ANALYZE tickq_jobs")

    def version(self) -> str:
        return f"SQLite {sqlite3.sqlite_version}"

    def drop(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class PostgresDatabase(Database):
    """A schema of its own (``bench_<random>``) in the given database, dropped afterwards."""

    name = dialect = "postgres"

    def __init__(self, server_url: str) -> None:
        import psycopg

        self.psycopg = psycopg
        self.server_url = server_url
        self.schema = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(server_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE SCHEMA {self.schema}")
        sep = "&" if "?" in server_url else "?"
        self.url = f"{server_url}{sep}options={quote(f'-csearch_path={self.schema}')}"
        self.offset = self._clock_offset()

    def connect(self) -> Any:
        return self.psycopg.connect(self.url, autocommit=True)

    def reset(self) -> None:
        with self.connect() as conn:
            conn.execute("TRUNCATE tickq_jobs, tickq_attempts RESTART IDENTITY")

    def summary(self) -> dict[str, int]:
        with self.connect() as conn:
            row = conn.execute(
                "SELECT count(*), count(DISTINCT (payload->>'n')::int), "
                "count(*) FILTER (WHERE status = 'done'), coalesce(sum(attempts), 0), "
                "min((payload->>'n')::int), max((payload->>'n')::int) FROM tickq_jobs"
            ).fetchone()
        return dict(
            zip(("rows", "distinct_n", "done", "attempts", "min_n", "max_n"), row, strict=True)
        )

    def finished_at_range(self) -> tuple[float, float]:
        with self.connect() as conn:
            first, last = conn.execute(
                "SELECT extract(epoch FROM min(finished_at))::float8, "
                "extract(epoch FROM max(finished_at))::float8 "
                "FROM tickq_jobs WHERE status = 'done'"
            ).fetchone()
        return first - self.offset, last - self.offset

    def _clock_offset(self) -> float:
        """Server clock minus ours, so server timestamps compare with local ones."""
        with self.connect() as conn:
            before = time.time()
            (server,) = conn.execute(
                "SELECT extract(epoch FROM clock_timestamp())::float8"
            ).fetchone()
            after = time.time()
        offset = server - (before + after) / 2
        return offset if abs(offset) > (after - before) else 0.0

    def version(self) -> str:
        with self.connect() as conn:
            (v,) = conn.execute("SHOW server_version").fetchone()
        return f"PostgreSQL {v.split()[0]} (psycopg {self.psycopg.__version__})"

    def drop(self) -> None:
        with self.psycopg.connect(self.server_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


def _epoch(iso: str | None) -> float:
    return datetime.fromisoformat(iso).astimezone(UTC).timestamp() if iso else float("nan")
