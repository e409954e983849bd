"""What a database's schema holds, as sorted one-line facts (a catalogue), per dialect.

Two databases hold the same schema exactly when their catalogues are equal; ``diff``
shows how they differ, one fact per line. Whitespace, comments and keyword case are
normalised away (``normal_sql``): they are how SQL is written, not what it creates.
"""

from __future__ import annotations

import difflib
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

_TOKEN = re.compile(
    r"'(?:[^']|'')*'"  # a string literal, kept as written
    r"|\"(?:[^\"]|\"\")*\""  # a quoted identifier, kept as written
    r"|--[^\n]*|/\*.*?\*/"  # comments, dropped
    r"|\s+"  # whitespace, one space at most
    r"|[^\s'\"-]+|-",
    re.DOTALL,
)


def normal_sql(sql: str) -> str:
    """``sql`` without comments, lower case outside quotes, with single spaces and none
    inside parentheses or before commas."""
    out: list[str] = []
    for token in _TOKEN.findall(sql):
        if token.startswith(("--", "/*")):
            continue
        if token.isspace():
            out.append(" ")
        else:
            out.append(token if token[0] in "'\"" else token.lower())
    text = re.sub(r" +", " ", "".join(out)).strip()
    return re.sub(r"\( | (?=[),])", lambda m: m.group(0).strip(), text)


def diff(expected: list[str], actual: list[str], expected_name: str, actual_name: str) -> str:
    """A unified diff of two catalogues ("" when they are equal)."""
    lines = difflib.unified_diff(
        expected, actual, fromfile=expected_name, tofile=actual_name, lineterm="", n=1
    )
    return "\n".join(lines)


# SQLite -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SqliteIndex:
    name: str
    table: str
    columns: tuple[str, ...]  # "name" or "name DESC"; an expression index's "<expr>"
    unique: bool
    origin: str  # "c": CREATE INDEX, "pk" / "u": made for a PRIMARY KEY / UNIQUE
    where: str | None  # the partial index's predicate, normalised


@dataclass
class SqliteSchema:
    """What the catalogue is made of, for the cross-dialect comparison too."""

    columns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    indexes: list[SqliteIndex] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)


def sqlite_schema(conn: sqlite3.Connection) -> SqliteSchema:
    schema = SqliteSchema()
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
    ).fetchall()
    for kind, name, table, sql in rows:
        if kind == "table":
            _sqlite_table(conn, name, sql, schema)
        elif kind in ("trigger", "view"):
            schema.facts.append(f"{kind} {name} on {table}: {normal_sql(sql)}")
    schema.facts.sort()
    return schema


def sqlite_catalogue(conn: sqlite3.Connection) -> list[str]:
    return sqlite_schema(conn).facts


def _sqlite_table(conn: sqlite3.Connection, table: str, sql: str, schema: SqliteSchema) -> None:
    facts = schema.facts
    (_, _, _, _, without_rowid, strict) = conn.execute(f"PRAGMA table_list({table})").fetchone()
    flags = [f for f, on in (("WITHOUT ROWID", without_rowid), ("STRICT", strict)) if on]
    if re.search(r"\bautoincrement\b", normal_sql(sql)):
        flags.append("AUTOINCREMENT")
    facts.append(f"table {table} {' '.join(flags)}".rstrip())
    schema.columns[table] = []
    for cid, name, type_, notnull, default, pk, hidden in conn.execute(
        f"PRAGMA table_xinfo({table})"
    ):
        column = {"name": name, "type": type_.upper(), "notnull": bool(notnull), "pk": pk}
        schema.columns[table].append(column)
        fact = f"table {table} column {cid:02d} {name} {type_.upper()}"
        fact += " NOT NULL" * bool(notnull)
        fact += "" if default is None else f" DEFAULT {normal_sql(default)}"
        fact += f" PRIMARY KEY#{pk}" * bool(pk) + f" HIDDEN {hidden}" * bool(hidden)
        facts.append(fact)
    facts.extend(f"table {table} check {check}" for check in _checks(sql))
    for row in conn.execute(f"PRAGMA foreign_key_list({table})"):
        facts.append(f"table {table} foreign key {row[3]} -> {row[2]}({row[4]}) {row[5:8]}")
    for _, index, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})"):
        found = _sqlite_index(conn, table, index, bool(unique), origin, bool(partial))
        schema.indexes.append(found)
        facts.append(
            f"index {found.name} on {table} ({', '.join(found.columns)})"
            + " UNIQUE" * found.unique
            + f" origin={origin}"
            + (f" WHERE {found.where}" if found.where else "")
        )


def _sqlite_index(
    conn: sqlite3.Connection, table: str, name: str, unique: bool, origin: str, partial: bool
) -> SqliteIndex:
    columns = []
    for _, cid, column, desc, collation, key in conn.execute(f"PRAGMA index_xinfo({name})"):
        if key:
            text = column if cid >= 0 else "<expr>" if cid == -2 else "<rowid>"
            text += " DESC" * bool(desc) + f" COLLATE {collation}" * (collation != "BINARY")
            columns.append(text)
    where = None
    if partial:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        where = normal_sql(sql).split(" where ", 1)[1]
    return SqliteIndex(name, table, tuple(columns), unique, origin, where)


def _checks(sql: str) -> list[str]:
    """The CHECK constraints of a CREATE TABLE statement, normalised, sorted."""
    text = normal_sql(sql)
    found = []
    for match in re.finditer(r"\bcheck ?\(", text):
        depth, start = 0, match.end() - 1
        for end in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                found.append(text[start : end + 1])
                break
    return sorted(found)


# PostgreSQL ---------------------------------------------------------------------------


def postgres_catalogue(conn: Any, schema: str) -> list[str]:
    """The catalogue of the objects in ``schema`` (its name is left out of every fact)."""
    facts: list[str] = []
    for table, position, name, type_, nullable, default, identity in conn.execute(
        """SELECT c.table_name, row_number() OVER (PARTITION BY c.table_name
                                                    ORDER BY c.ordinal_position),
                  c.column_name, format_type(a.atttypid, a.atttypmod), c.is_nullable,
                  c.column_default,
                  CASE WHEN c.is_identity = 'YES' THEN c.identity_generation END
           FROM information_schema.columns c
           JOIN pg_class r ON r.relname = c.table_name
                          AND r.relnamespace = c.table_schema::regnamespace
           JOIN pg_attribute a ON a.attrelid = r.oid AND a.attname = c.column_name
           WHERE c.table_schema = %s""",
        (schema,),
    ):
        fact = f"table {table} column {position:02d} {name} {type_}"
        fact += " NOT NULL" * (nullable == "NO")
        fact += f" DEFAULT {default}" * (default is not None)
        fact += f" GENERATED {identity} AS IDENTITY" * (identity is not None)
        facts.append(fact)
    for table, name, kind, definition in conn.execute(
        """SELECT r.relname, c.conname, c.contype, pg_get_constraintdef(c.oid)
           FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
           WHERE c.connamespace = %s::regnamespace""",
        (schema,),
    ):
        facts.append(f"table {table} constraint {name} ({kind}) {definition}")
    for table, name, definition in conn.execute(
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s",
        (schema,),
    ):
        facts.append(f"index {name} on {table}: {definition}")
    for name, definition in conn.execute(
        """SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p
           WHERE p.pronamespace = %s::regnamespace""",
        (schema,),
    ):
        lines = [normal_sql(line) for line in definition.splitlines()]
        facts.extend(
            f"function {name} {n:03d}: {line}"
            for n, line in enumerate(line for line in lines if line)
        )
    for table, name, definition in conn.execute(
        """SELECT r.relname, t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t
           JOIN pg_class r ON r.oid = t.tgrelid
           WHERE r.relnamespace = %s::regnamespace AND NOT t.tgisinternal""",
        (schema,),
    ):
        facts.append(f"trigger {name} on {table}: {definition}")
    for name, definition in conn.execute(
        "SELECT viewname, definition FROM pg_views WHERE schemaname = %s", (schema,)
    ):
        facts.append(f"view {name}: {normal_sql(definition)}")
    for row in conn.execute(
        """SELECT sequencename, data_type, start_value, increment_by, min_value, max_value,
                  cycle FROM pg_sequences WHERE schemaname = %s""",
        (schema,),
    ):
        facts.append(f"sequence {row[0]} {row[1:]}")
    for table, kind in conn.execute(
        """SELECT table_name, table_type FROM information_schema.tables
           WHERE table_schema = %s""",
        (schema,),
    ):
        facts.append(f"table {table} {kind}")
    return sorted(fact.replace(f"{schema}.", "") for fact in facts)


@dataclass(frozen=True)
class Index:
    """An index as both dialects can state it (primary keys are left to ``primary_keys``)."""

    table: str
    columns: tuple[str, ...]  # "name" or "name DESC"
    unique: bool
    where: str | None  # the partial index's predicate, as ``same_predicate`` writes it


@dataclass
class Tables:
    """Tables, columns, keys and indexes, for comparing the dialects."""

    columns: dict[str, dict[str, tuple[str, bool]]]  # table -> column -> (type, not null)
    primary_keys: dict[str, tuple[str, ...]]
    indexes: dict[str, Index]
    routines: set[str]  # "function NAME", "trigger NAME", "view NAME"


def sqlite_tables(conn: sqlite3.Connection) -> Tables:
    schema = sqlite_schema(conn)
    columns: dict[str, dict[str, tuple[str, bool]]] = {}
    keys = {}
    for table, found in schema.columns.items():
        # A key column holds no NULL: INTEGER PRIMARY KEY is the rowid, and tickq never
        # writes a NULL into another key (SQLite, unlike Postgres, would take one).
        columns[table] = {c["name"]: (c["type"], c["notnull"] or c["pk"] > 0) for c in found}
        ranked = sorted((c["pk"], c["name"]) for c in found if c["pk"])
        keys[table] = tuple(name for _, name in ranked)
    indexes = {
        i.name: Index(i.table, i.columns, i.unique, i.where and same_predicate(i.where))
        for i in schema.indexes
        if i.origin != "pk"
    }
    routines = {
        f"{kind} {name}"
        for kind, name in conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')"
        )
    }
    return Tables(columns, keys, indexes, routines)


def postgres_tables(conn: Any, schema: str) -> Tables:
    columns: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, name, type_, nullable in conn.execute(
        """SELECT table_name, column_name, data_type, is_nullable
           FROM information_schema.columns WHERE table_schema = %s""",
        (schema,),
    ):
        columns.setdefault(table, {})[name] = (type_, nullable == "NO")
    keys = {table: () for table in columns}
    for table, key in conn.execute(
        """SELECT r.relname, ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o)
                                   JOIN pg_attribute a ON a.attrelid = c.conrelid
                                                      AND a.attnum = k.n ORDER BY k.o)
           FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
           WHERE c.connamespace = %s::regnamespace AND c.contype = 'p'""",
        (schema,),
    ):
        keys[table] = tuple(key)
    indexes = {}
    for name, table, unique, key, where in conn.execute(
        """SELECT i.relname, t.relname, x.indisunique,
                  ARRAY(SELECT pg_get_indexdef(x.indexrelid, k, true)
                               || CASE WHEN x.indoption[k - 1] & 1 = 1 THEN ' DESC' ELSE '' END
                        FROM generate_series(1, x.indnkeyatts) k ORDER BY k),
                  pg_get_expr(x.indpred, x.indrelid, true)
           FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
           JOIN pg_class t ON t.oid = x.indrelid
           WHERE t.relnamespace = %s::regnamespace AND NOT x.indisprimary""",
        (schema,),
    ):
        indexes[name] = Index(table, tuple(key), unique, where and same_predicate(where))
    routines = {
        f"{kind} {name}"
        for kind, name in conn.execute(
            """SELECT 'function', proname FROM pg_proc
               WHERE pronamespace = %(s)s::text::regnamespace
               UNION ALL SELECT 'view', viewname FROM pg_views WHERE schemaname = %(s)s::text
               UNION ALL SELECT 'trigger', t.tgname FROM pg_trigger t
                         JOIN pg_class r ON r.oid = t.tgrelid
                         WHERE r.relnamespace = %(s)s::text::regnamespace
                           AND NOT t.tgisinternal""",
            {"s": schema},
        )
    }
    return Tables(columns, keys, indexes, routines)


def same_predicate(sql: str) -> str:
    """A partial index's predicate, written the same for both dialects: Postgres's casts
    (``'x'::text``) dropped, ``= ANY (ARRAY[...])`` as ``IN (...)``, and grouping
    parentheses dropped when no OR could make them matter."""
    text = re.sub(r"::[a-z_]+(\[\])?", "", normal_sql(sql))
    text = re.sub(r"= any \(array\[([^\]]*)\]\)", r"in (\1)", text)
    if " or " not in f" {text} ":
        text = re.sub(r"\bin \(([^()]*)\)", r"in [\1]", text)
        text = text.replace("(", "").replace(")", "")
    return text
