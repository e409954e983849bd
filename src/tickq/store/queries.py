"""Load the named SQL queries of a backend from ``sql/<dialect>.sql``."""

from __future__ import annotations

import re
from pathlib import Path

SQL_DIR = Path(__file__).parent / "sql"

JOB_COLUMNS = (
    "id", "type", "queue", "payload", "status", "priority", "attempts", "max_attempts",
    "run_after", "last_error", "unique_key", "created_at", "updated_at", "attempted_at",
    "finished_at", "lease_owner", "lease_expires_at", "meta",
)  # fmt: skip

_NAMED_PARAM = re.compile(r"(?<![:\w]):(\w+)")


def load_queries(dialect: str, paramstyle: str) -> dict[str, str]:
    """Return {name: sql}. ``paramstyle`` is "named" (:x) or "pyformat" (%(x)s)."""
    text = (SQL_DIR / f"{dialect}.sql").read_text()
    queries: dict[str, str] = {}
    for section in text.split("-- name: ")[1:]:
        name, _, body = section.partition("\n")
        lines = [ln for ln in body.splitlines() if not ln.lstrip().startswith("--")]
        queries[name.strip()] = format_query("\n".join(lines).strip(), paramstyle)
    return queries


def format_query(sql: str, paramstyle: str) -> str:
    sql = sql.replace("{job_columns_j}", ", ".join(f"j.{c}" for c in JOB_COLUMNS))
    sql = sql.replace("{job_columns}", ", ".join(JOB_COLUMNS))
    if paramstyle == "pyformat":
        sql = _NAMED_PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))
    return sql


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """[(version, name, sql)] shipped for ``dialect``, in order."""
    found = []
    for path in sorted((SQL_DIR / "migrations" / dialect).glob("*.sql")):
        version = int(path.name.split("_", 1)[0])
        found.append((version, path.stem, path.read_text()))
    return found
