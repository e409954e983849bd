"""CLI output piped into a reader that stops early (``| head``) ends quietly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, tickq_env
from tickq import Queue


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m tickq ARGS`` whose stdout's reader is gone before it writes a byte."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tickq", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=tickq_env(), cwd=str(ROOT),
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # like `head` exiting: every later write gets EPIPE
    try:
        err = process.stderr.read()
        return subprocess.CompletedProcess(process.args, process.wait(60), "", err)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_schema_into_a_closed_pipe_exits_quietly(dialect: str) -> None:
    result = run_into_closed_pipe("schema", "--dialect", dialect)
    assert (result.returncode, result.stderr) == (141, "")


def test_show_into_a_closed_pipe_exits_quietly(db_url: str) -> None:
    q = Queue(db_url)
    q.migrate()

    @q.job()
    def welcome(user_id: int) -> None: ...

    job_id = welcome.enqueue(user_id=1)
    result = run_into_closed_pipe("show", str(job_id), "--url", db_url)
    assert (result.returncode, result.stderr) == (141, "")


def test_head_reads_the_first_line_and_the_rest_is_dropped() -> None:
    """A real shell pipe: `tickq schema | head -n 1` prints one line, no traceback."""
    command = f"{sys.executable} -m tickq schema --dialect postgres | head -n 1"
    result = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=tickq_env(),
        cwd=str(ROOT), timeout=60,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout.startswith("-- 0001")
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr
