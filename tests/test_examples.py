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
