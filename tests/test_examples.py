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


def test_webhook_receiver_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "webhook_receiver.py")],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env=tickq_env(TICKQ_DATABASE_URL="", STRIPE_WEBHOOK_SECRET=""),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count('200 {"received": true, "job_id": 1}') == 3, out
    assert "forged: 401" in out and "stale:  401" in out and "s old" in out
    assert out.count("invoice in_1 paid: 2000 (event evt_1)") == 1, out


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
