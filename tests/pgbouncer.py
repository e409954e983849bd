"""A real pgbouncer for tests: its own ini, a free port, one database alias per schema.

pgbouncer refuses to run as root, so as root it is started with ``-u postgres``. It rejects
libpq's ``options`` startup parameter, so each test's schema comes from a role of the same
name whose ``search_path`` is that schema (a role setting survives the ``DISCARD ALL``
session mode runs between clients). Missing pgbouncer: a skip on a laptop, a failure under
CI=true.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import PG_URL


def pgbouncer_binary() -> str:
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None
    )
    if found is None:
        problem = "pgbouncer is not installed (apt-get install -y pgbouncer; see .ci/setup)"
        if os.environ.get("CI"):
            pytest.fail(f"{problem} (CI=true: a missing tool is a failure, not a skip)")
        pytest.skip(problem)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgBouncer:
    """pgbouncer in ``pool_mode`` in front of PG_URL's server; ``url(schema)`` goes through it."""

    def __init__(self, pool_mode: str, schemas: list[str], pool_size: int = 4) -> None:
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="tickq-pgbouncer-"))
        self.folder.chmod(0o755)  # read by the postgres user pgbouncer switches to
        server = urlsplit(PG_URL)
        dbname = server.path.lstrip("/") or "postgres"
        target = f"host={server.hostname or '127.0.0.1'} port={server.port or 5432}"
        (self.folder / "users.txt").write_text("".join(f'"{s}" ""\n' for s in schemas))
        (self.folder / "pgbouncer.ini").write_text(
            f"[databases]\n{dbname} = {target} dbname={dbname}\n[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.folder / 'users.txt'}\n"
            f"pool_mode = {pool_mode}\ndefault_pool_size = {pool_size}\n"
            "max_client_conn = 500\n"
        )  # fmt: skip
        self.dbname = dbname
        command = [pgbouncer_binary(), str(self.folder / "pgbouncer.ini")]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "postgres"]
        self.log = (self.folder / "pgbouncer.log").open("w")
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def url(self, schema: str) -> str:
        """Through pgbouncer as the role named after ``schema`` (see ``schema_role``)."""
        return f"postgresql://{schema}@127.0.0.1:{self.port}/{self.dbname}"

    def _wait_ready(self, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"pgbouncer exited: {self.read_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"pgbouncer not listening after {timeout}s: {self.read_log()}")

    def read_log(self) -> str:
        self.log.flush()
        return (self.folder / "pgbouncer.log").read_text()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def create_schema_role(schema: str) -> None:
    """A schema and a login role of the same name whose search_path is that schema."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {schema} LOGIN SUPERUSER")
        conn.execute(f"ALTER ROLE {schema} SET search_path = {schema}")
        conn.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {schema}")


def drop_schema_role(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
            (schema,),
        )
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"DROP OWNED BY {schema} CASCADE")
        conn.execute(f"DROP ROLE IF EXISTS {schema}")
