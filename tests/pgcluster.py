"""A throwaway PostgreSQL cluster of a test's own (``pg_createcluster``), to restart at will.

Never the shared server: each cluster gets a unique name and a free port, and is dropped
at the end. Without the Debian cluster tools the test is skipped on a laptop and fails
under CI=true.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

VERSION = os.environ.get("TICKQ_TEST_PG_VERSION", "15")


def _missing() -> str | None:
    tools = ("pg_createcluster", "pg_ctlcluster", "pg_dropcluster")
    absent = [t for t in tools if shutil.which(t) is None]
    if absent:
        return f"{', '.join(absent)} not found (Debian's postgresql-common)"
    if not os.path.isdir(f"/usr/lib/postgresql/{VERSION}/bin"):
        return f"PostgreSQL {VERSION} server binaries are not installed"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "pg_createcluster needs root to create a cluster of the test's own"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, name: str, port: int) -> None:
        self.name, self.port = name, port
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def ctl(self, action: str) -> None:
        subprocess.run(["pg_ctlcluster", VERSION, self.name, action], check=True,
                       capture_output=True, timeout=60)  # fmt: skip

    def restart(self) -> None:
        """Stop (fast: every connection is terminated) and start again; returns once the
        server accepts connections."""
        self.ctl("restart")


@contextmanager
def own_cluster() -> Iterator[Cluster]:
    problem = _missing()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"{problem} (CI=true: a test that cannot run is a failure)")
        pytest.skip(problem)
    name, port = f"tickq_{uuid.uuid4().hex[:10]}", _free_port()
    subprocess.run(
        ["pg_createcluster", VERSION, name, "-p", str(port), "--start",
         "--", "--auth=trust"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    try:
        yield Cluster(name, port)
    finally:
        subprocess.run(["pg_dropcluster", "--stop", VERSION, name], capture_output=True,
                       timeout=120)  # fmt: skip
