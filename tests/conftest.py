"""Shared fixtures: every test gets its own SQLite file or its own Postgres schema.

Postgres is the real server at $TICKQ_TEST_POSTGRES_URL (default: the local one). Without
it Postgres tests are skipped on a laptop but fail under CI=true.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tickq import FrozenClock, Queue

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("TICKQ_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ("sqlite", "postgres")


def _postgres_problem() -> str | None:
    try:
        import psycopg

        psycopg.connect(PG_URL, connect_timeout=3).close()
    except Exception as exc:  # pragma: no cover - depends on the machine
        return f"PostgreSQL not reachable at {PG_URL}: {exc}"
    return None


_PG_PROBLEM: list[str | None] = []


def require_postgres() -> None:
    if not _PG_PROBLEM:
        _PG_PROBLEM.append(_postgres_problem())
    problem = _PG_PROBLEM[0]
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"{problem} (CI=true: a missing Postgres is a failure, not a skip)")
        pytest.skip(problem)


def with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A fresh, empty Postgres schema; its URL sets search_path to it."""
    require_postgres()
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_search_path(PG_URL, schema)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """An empty database of the parametrised backend."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'tickq.db'}"
    return str(request.getfixturevalue("pg_schema_url"))


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def queue(db_url: str) -> Iterator[Queue]:
    """A migrated Queue on the real clock."""
    q = Queue(db_url)
    q.migrate()
    yield q
    q.close()


@pytest.fixture
def frozen_queue(db_url: str, clock: FrozenClock) -> Iterator[Queue]:
    """A migrated Queue whose time moves only with ``clock.advance()``."""
    q = Queue(db_url, clock=clock)
    q.migrate()
    yield q
    q.close()


def tickq_env(**extra: str) -> dict[str, str]:
    """Environment for subprocesses: this checkout's src first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), str(ROOT / "tests"), env.get("PYTHONPATH")) if p
    )
    env.update(extra)
    return env


def run_tickq(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tickq ARGS`` from this checkout and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "tickq", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=tickq_env(**env),
        cwd=str(ROOT),
    )
