"""Every example a newcomer runs must work as written."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, tickq_env


def test_quickstart_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True, text=True, timeout=60, env=tickq_env(), cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "sending welcome email to user 1" in result.stdout
    assert "rolled back: no user, and no job" in result.stdout


def test_batch_collect_later_example_runs() -> None:
    env = tickq_env()
    env.pop("TICKQ_DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "batch_collect_later.py")],
        capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" 1 snoozed;") == 3
    assert "collected after 3 snoozes, attempt 1: " in result.stdout
    assert "summary of 'first report'" in result.stdout
