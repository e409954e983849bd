"""The one migrator: applies each shipped migration once, in order, and records it.

Each backend supplies only how to hold the migration lock (``_migrating``), how to run a
script (``_run_script``) and the bookkeeping queries' dialect (``migrations_*`` in its
``sql/<dialect>.sql``). What the migrations build is written out whole, table by table, in
``sql/schema/<dialect>.sql`` (the schema of record; a test keeps the two equal).
"""

from __future__ import annotations

from .queries import migrations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .plumbing import Plumbing

    Step = tuple[int, str, str]


def migrate(store: Plumbing, steps: list[Step] | None = None) -> list[int]:
    """Apply the ``steps`` (default: every shipped migration) not yet applied, in one
    transaction under the migration lock; returns their versions. Idempotent."""
    steps = migrations(store.dialect) if steps is None else steps
    sql = store._sql
    with store._errors():
        conn = store._connection()
        with store._migrating(conn):
            store._run(conn, sql["migrations_table"], {})
            applied = {int(r[0]) for r in store._run(conn, sql["migrations_applied"], {})}
            applied_now = []
            for version, name, script in steps:
                if version in applied:
                    continue
                store._run_script(conn, script)
                params = {"version": version, "name": name, "now": store._now()}
                store._run(conn, sql["migrations_record"], params)
                applied_now.append(version)
    return applied_now


def schema_sql(dialect: str) -> str:
    """Every migration's SQL, in order, for users who manage their own schema."""
    return "\n".join(f"-- {name}\n{sql.strip()}\n" for _, name, sql in migrations(dialect))
