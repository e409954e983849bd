"""The schema of record (``store/sql/schema/<dialect>.sql``) is what the migrations build.

Per dialect, one database is built from the schema file and one by ``q.migrate()`` from
empty; their catalogues (tables, columns, constraints, indexes, functions, triggers,
views) must be equal. A migration added without its change to the schema file fails here
with a diff of the facts that differ.
"""

from __future__ import annotations

import sqlite3
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import PG_URL, ROOT, require_postgres, with_search_path
from schema_catalogue import diff, postgres_catalogue, sqlite_catalogue
from tickq import Queue
from tickq.store.migrate import migrate
from tickq.store.queries import SQL_DIR, migrations

Step = tuple[int, str, str]
SCHEMA_DIR = Path(SQL_DIR) / "schema"
ADDED_COLUMN: Step = (999, "0999_forgotten", "ALTER TABLE tickq_jobs ADD COLUMN forgotten TEXT")


def schema_file(dialect: str) -> str:
    return (SCHEMA_DIR / f"{dialect}.sql").read_text(encoding="utf-8")


def mismatch(of_record: list[str], migrated: list[str], dialect: str) -> str:
    """What a failing comparison says ("" when the schemas agree)."""
    found = diff(of_record, migrated, f"schema/{dialect}.sql", "migrations applied")
    if not found:
        return ""
    return (
        f"store/sql/schema/{dialect}.sql is not what the migrations build: update it "
        f"(- only in the schema file, + only after migrating):\n{found}"
    )


def migrated(url: str, steps: list[Step] | None = None) -> None:
    q = Queue(url)
    try:
        migrate(q._store, steps)
    finally:
        q.close()


# SQLite -------------------------------------------------------------------------------


def sqlite_of_record(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        conn.executescript(schema_file("sqlite"))
        return sqlite_catalogue(conn)


def sqlite_migrated(path: Path, steps: list[Step] | None = None) -> list[str]:
    migrated(f"sqlite:///{path}", steps)
    with sqlite3.connect(path) as conn:
        return sqlite_catalogue(conn)


def test_sqlite_migrations_build_the_schema_of_record(tmp_path: Path) -> None:
    expected = sqlite_of_record(tmp_path / "of_record.db")
    problems = mismatch(expected, sqlite_migrated(tmp_path / "migrated.db"), "sqlite")
    assert not problems, problems


def test_a_sqlite_migration_missing_from_the_schema_file_fails_with_a_diff(
    tmp_path: Path,
) -> None:
    expected = sqlite_of_record(tmp_path / "of_record.db")
    steps = [*migrations("sqlite"), ADDED_COLUMN]
    problems = mismatch(expected, sqlite_migrated(tmp_path / "migrated.db", steps), "sqlite")
    assert "+table tickq_jobs column 28 forgotten TEXT" in problems.splitlines()
    assert "update it" in problems


def test_the_catalogue_sees_sqlite_checks_defaults_and_partial_indexes(tmp_path: Path) -> None:
    expected = sqlite_of_record(tmp_path / "of_record.db")
    changed = sqlite_migrated(
        tmp_path / "migrated.db",
        [
            *migrations("sqlite"),
            (997, "0997_index", "DROP INDEX tickq_jobs_lease;\nCREATE INDEX tickq_jobs_lease "
                                "ON tickq_jobs (lease_expires_at) WHERE status = 'pending'"),
            (998, "0998_table", "CREATE TABLE tickq_more (a INTEGER DEFAULT 1 CHECK (a > 0))"),
        ],
    )  # fmt: skip
    lines = mismatch(expected, changed, "sqlite").splitlines()
    assert "+index tickq_jobs_lease on tickq_jobs (lease_expires_at) origin=c WHERE " \
        "status = 'pending'" in lines  # fmt: skip
    assert "+table tickq_more check (a > 0)" in lines
    assert "+table tickq_more column 00 a INTEGER DEFAULT 1" in lines


# PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture
def pg_schemas() -> Iterator[tuple[str, str]]:
    """Two fresh, empty Postgres schemas: one for each way of building tickq's tables."""
    require_postgres()
    import psycopg

    names = (f"t_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for name in names:
            conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield names
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def pg_catalogue(schema: str) -> list[str]:
    import psycopg

    conn: Any
    with psycopg.connect(PG_URL) as conn:
        return postgres_catalogue(conn, schema)


def pg_of_record(schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(with_search_path(PG_URL, schema)) as conn:
        conn.execute(schema_file("postgres").encode())  # no parameters: the script as is
    return pg_catalogue(schema)


def pg_migrated(schema: str, steps: list[Step] | None = None) -> list[str]:
    migrated(with_search_path(PG_URL, schema), steps)
    return pg_catalogue(schema)


def test_postgres_migrations_build_the_schema_of_record(pg_schemas: tuple[str, str]) -> None:
    of_record, by_migrations = pg_schemas
    problems = mismatch(pg_of_record(of_record), pg_migrated(by_migrations), "postgres")
    assert not problems, problems


def test_a_postgres_migration_missing_from_the_schema_file_fails_with_a_diff(
    pg_schemas: tuple[str, str],
) -> None:
    of_record, by_migrations = pg_schemas
    latest = [sql for _, _, sql in migrations("postgres")
              if "CREATE OR REPLACE FUNCTION tickq_due_ahead" in sql][-1]  # fmt: skip
    replaced = latest.split("CREATE OR REPLACE FUNCTION tickq_due_ahead")
    changed_function = "CREATE OR REPLACE FUNCTION tickq_due_ahead" + replaced[1].replace(
        "ahead < 2", "ahead < 1", 1
    )
    steps = [*migrations("postgres"), ADDED_COLUMN, (1000, "1000_function", changed_function)]
    problems = mismatch(pg_of_record(of_record), pg_migrated(by_migrations, steps), "postgres")
    lines = problems.splitlines()
    assert "+table tickq_jobs column 27 forgotten text" in lines
    was = ": and (queues is null or queue = any(queues)) and ahead < 2"
    [line] = [ln.split()[2].rstrip(":") for ln in lines
              if ln.startswith("-function tickq_due_ahead ") and ln.endswith(was)]  # fmt: skip
    assert f"+function tickq_due_ahead {line}{was.replace('< 2', '< 1')}" in lines


# Packaging ----------------------------------------------------------------------------


def test_the_schema_files_ship_in_the_wheel() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        package_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["tickq"]
    package = ROOT / "src" / "tickq"
    shipped = {path for pattern in package_data for path in package.glob(pattern)}
    for dialect in ("sqlite", "postgres"):
        path = SCHEMA_DIR / f"{dialect}.sql"
        assert path in shipped, f"no package-data pattern in pyproject.toml ships {path}"
