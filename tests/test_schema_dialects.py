"""SQLite and Postgres hold the same tables, columns and indexes, meaning the same.

Both are built by ``q.migrate()`` from empty, then compared: the same tables; per table
the same columns (names, NOT NULL, and types of one meaning through ``SAME_MEANING``);
the same primary keys; indexes of the same name on the same table and columns, equally
unique, with equivalent predicates. Where they differ on purpose, ``ON_PURPOSE`` says so
and why; any other difference fails, and so does an entry there that no longer differs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from schema_catalogue import Index, Tables, postgres_tables, same_predicate, sqlite_tables
from tickq import Queue

SAME_MEANING = {
    # (SQLite's declared type, Postgres's data_type): what the column holds
    ("INTEGER", "smallint"): "integer",
    ("INTEGER", "integer"): "integer",
    ("INTEGER", "bigint"): "integer",
    ("INTEGER", "boolean"): "a flag (SQLite: 0 or 1)",
    ("REAL", "double precision"): "floating point number",
    ("TEXT", "text"): "text",
    ("TEXT", "timestamp with time zone"): "a time (SQLite: ISO-8601 UTC text)",
    ("TEXT", "json"): "JSON, the text as written",
    ("TEXT", "jsonb"): "JSON (Postgres keeps it parsed)",
}

ON_PURPOSE = {
    "function tickq_workflow_step_ended": "Postgres only: a trigger's body is a function there; "
    "SQLite writes it inside its trigger of the same name",
    "function tickq_workflow_run_moved": "Postgres only: a trigger's body is a function there; "
    "SQLite writes it inside its trigger of the same name",
    "table tickq_clocks": "SQLite only: each process's wall clock against the host's "
    "monotonic clock, so schedules come due when most live clocks say so; on Postgres the "
    "database's own clock decides",
    "column tickq_jobs.lease_clock": "SQLite only: the monotonic clock a lease was measured "
    "on, so no wall-clock step rescues a live job; Postgres leases use the database's clock",
    "column tickq_jobs.lease_mono": "SQLite only: when the lease runs out on lease_clock",
    "type tickq_starts.at": "SQLite counts rate-limit starts in epoch seconds (REAL) against "
    "`per` seconds; Postgres stores timestamptz and subtracts make_interval(secs => per)",
    "function tickq_due": "Postgres only: claims pick and lock due rows in a function that "
    "forces the claim index (SKIP LOCKED); SQLite's claim statements do it inline under "
    "BEGIN IMMEDIATE",
    "function tickq_due_ahead": "Postgres only: tickq_due for claims ahead",
    "function tickq_due_limited": "Postgres only: the claim of limited types, under an "
    "advisory lock per type; SQLite's claim_limited statement runs alone under BEGIN IMMEDIATE",
    "function tickq_due_keyed": "Postgres only: the claim of one keyed type, key by key, "
    "under its type's advisory lock; SQLite runs claim_keyed per key under BEGIN IMMEDIATE",
    "function tickq_count_attempts": "Postgres only: a trigger's body is a function there; "
    "SQLite writes it inside its trigger of the same name",
    "function tickq_count_done": "Postgres only: a trigger's body is a function there",
    "function tickq_count_pruned": "Postgres only: a trigger's body is a function there",
    "function tickq_duration_bucket": "Postgres only: the histogram bucket of a duration, for "
    "the counting triggers; SQLite's triggers write the CASE out",
    "column tickq_totals.shard": "Postgres only: counters split by backend so concurrent "
    "finishes seldom wait on one row's lock; SQLite has one writer at a time",
    "column tickq_pruned.shard": "Postgres only: as tickq_totals.shard",
    "primary key tickq_totals": "Postgres adds shard (see column tickq_totals.shard)",
    "primary key tickq_pruned": "Postgres adds shard (see column tickq_pruned.shard)",
}


def differences(sqlite: Tables, postgres: Tables) -> dict[str, str]:
    """{what differs: how}, e.g. {"column tickq_jobs.x": "only in sqlite"}."""
    found: dict[str, str] = {}
    _compare_names(found, "table", sqlite.columns, postgres.columns)
    for table in sqlite.columns.keys() & postgres.columns.keys():
        _compare_columns(found, table, sqlite.columns[table], postgres.columns[table])
        if sqlite.primary_keys[table] != postgres.primary_keys[table]:
            found[f"primary key {table}"] = (
                f"sqlite {sqlite.primary_keys[table]}, postgres {postgres.primary_keys[table]}"
            )
    _compare_names(found, "index", sqlite.indexes, postgres.indexes)
    for name in sqlite.indexes.keys() & postgres.indexes.keys():
        if sqlite.indexes[name] != postgres.indexes[name]:
            found[f"index {name}"] = (
                f"sqlite {sqlite.indexes[name]}, postgres {postgres.indexes[name]}"
            )
    _compare_names(found, "", {r: r for r in sqlite.routines}, {r: r for r in postgres.routines})
    return found


def _compare_names(found: dict[str, str], kind: str, sqlite: Any, postgres: Any) -> None:
    for name in sqlite.keys() - postgres.keys():
        found[f"{kind} {name}".strip()] = "only in sqlite"
    for name in postgres.keys() - sqlite.keys():
        found[f"{kind} {name}".strip()] = "only in postgres"


def _compare_columns(
    found: dict[str, str],
    table: str,
    sqlite: dict[str, tuple[str, bool]],
    postgres: dict[str, tuple[str, bool]],
) -> None:
    _compare_names(found, "column", {f"{table}.{c}": 0 for c in sqlite},
                   {f"{table}.{c}": 0 for c in postgres})  # fmt: skip
    for column in sqlite.keys() & postgres.keys():
        (lite_type, lite_not_null), (pg_type, pg_not_null) = sqlite[column], postgres[column]
        if (lite_type, pg_type) not in SAME_MEANING:
            found[f"type {table}.{column}"] = f"sqlite {lite_type}, postgres {pg_type}"
        if lite_not_null != pg_not_null:
            found[f"not null {table}.{column}"] = (
                f"sqlite {'NOT NULL' if lite_not_null else 'NULL'}, "
                f"postgres {'NOT NULL' if pg_not_null else 'NULL'}"
            )


def report(found: dict[str, str]) -> str:
    new = [f"  {key}: {how}" for key, how in sorted(found.items()) if key not in ON_PURPOSE]
    gone = [f"  {key}" for key in sorted(ON_PURPOSE) if key not in found]
    lines = []
    if new:
        lines += ["SQLite and Postgres differ (make them agree, or list the difference "
                  "in ON_PURPOSE with its reason):", *new]  # fmt: skip
    if gone:
        lines += ["listed in ON_PURPOSE but no longer different (remove them):", *gone]
    return "\n".join(lines)


def migrated_sqlite(path: Path) -> Tables:
    q = Queue(f"sqlite:///{path}")
    q.migrate()
    q.close()
    with sqlite3.connect(path) as conn:
        return sqlite_tables(conn)


def migrated_postgres(url: str) -> Tables:
    import psycopg

    q = Queue(url)
    q.migrate()
    q.close()
    conn: Any
    with psycopg.connect(url) as conn:
        (schema,) = conn.execute("SELECT current_schema()").fetchone()
        return postgres_tables(conn, schema)


def test_both_dialects_hold_the_same_tables(tmp_path: Path, pg_schema_url: str) -> None:
    found = differences(migrated_sqlite(tmp_path / "tickq.db"), migrated_postgres(pg_schema_url))
    problems = report(found)
    assert not problems, problems


def test_a_new_difference_fails_and_says_what_it_is(tmp_path: Path, pg_schema_url: str) -> None:
    sqlite, postgres = migrated_sqlite(tmp_path / "tickq.db"), migrated_postgres(pg_schema_url)
    sqlite.columns["tickq_jobs"]["forgotten"] = ("TEXT", False)
    sqlite.columns["tickq_jobs"]["queue"] = ("TEXT", False)
    sqlite.columns["tickq_attempts"]["duration"] = ("TEXT", False)
    postgres.indexes["tickq_jobs_lease"] = Index(
        "tickq_jobs", ("lease_expires_at",), False, "status = 'pending'"
    )
    postgres.routines.discard("function tickq_due")
    lines = report(differences(sqlite, postgres)).splitlines()
    assert "  column tickq_jobs.forgotten: only in sqlite" in lines
    assert "  not null tickq_jobs.queue: sqlite NULL, postgres NOT NULL" in lines
    assert "  type tickq_attempts.duration: sqlite TEXT, postgres double precision" in lines
    assert any(line.startswith("  index tickq_jobs_lease: sqlite") for line in lines)
    assert lines[-2:] == [
        "listed in ON_PURPOSE but no longer different (remove them):",
        "  function tickq_due",
    ]


def test_predicates_of_both_dialects_read_the_same() -> None:
    postgres = "unique_key IS NOT NULL AND (status = ANY (ARRAY['pending'::text, 'running'::text]))"
    sqlite = "unique_key IS NOT NULL AND status IN ('pending', 'running')"
    assert same_predicate(postgres) == same_predicate(sqlite)
    assert same_predicate("(status = 'pending'::text)") == same_predicate("status = 'pending'")
    assert same_predicate("status = 'pending'") != same_predicate("status = 'running'")
