"""``tickq migrate``, ``tickq schema`` and ``tickq enqueue`` (in ``cli/enqueue.py``)."""

from __future__ import annotations

import argparse
import os

from ..queue import Queue
from .app import add_app_argument, load_app
from .enqueue import register as register_enqueue


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    migrate = subparsers.add_parser("migrate", help="create or upgrade tickq's tables")
    add_app_argument(migrate, required=False)
    migrate.add_argument("--url", help="database URL instead of APP's (or $TICKQ_DATABASE_URL)")
    migrate.set_defaults(handler=run_migrate)

    schema = subparsers.add_parser(
        "schema", help="print the schema SQL (for Alembic, Django migrations or a DBA)"
    )
    schema.add_argument(
        "--dialect", choices=("sqlite", "postgres"), default=None,
        help="which database's SQL (default: from $TICKQ_DATABASE_URL, else sqlite)",
    )  # fmt: skip
    schema.set_defaults(handler=run_schema)
    register_enqueue(subparsers)


def _queue(args: argparse.Namespace) -> Queue:
    if args.url or (not args.app and os.environ.get("TICKQ_DATABASE_URL")):
        return Queue(args.url)
    return load_app(args.app)


def run_migrate(args: argparse.Namespace) -> int:
    q = _queue(args)
    applied = q.migrate()
    print(f"applied migrations {applied}" if applied else "schema is up to date")
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from ..store.queries import migrations

    dialect = args.dialect or (
        "postgres" if os.environ.get("TICKQ_DATABASE_URL", "").startswith("postgres") else "sqlite"
    )
    for _, name, sql in migrations(dialect):
        print(f"-- {name}\n{sql.strip()}\n")
    return 0
