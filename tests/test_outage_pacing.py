"""After an outage a worker looks again within ~2 s; a library prints nothing unasked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT, tickq_env
from tickq.errors import DatabaseUnavailable
from tickq.worker import Trouble


def test_retries_after_an_outage_are_at_most_two_seconds_apart() -> None:
    trouble = Trouble("database")
    delays = [trouble.happened(DatabaseUnavailable("down")) for _ in range(200)]
    assert delays[0] < 0.5
    assert max(delays) <= 2.0, max(delays)
    assert trouble.over()


def test_process_jobs_prints_nothing_when_the_app_configured_no_logging(tmp_path: Path) -> None:
    script = f"""
from tickq import FrozenClock, Queue
clock = FrozenClock()
q = Queue("sqlite:///{tmp_path}/quiet.db", clock=clock, lease_seconds=3)
q.migrate()
q.job(name="t", max_attempts=1)(lambda: None)
q.enqueue("t")
q.store.claim("someone-else", 1, 3)
clock.advance(seconds=10)
report = q.process_jobs()
assert report["rescued"] == 1 and report["failed"] == 1, report
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=tickq_env(), cwd=str(ROOT), timeout=60)  # fmt: skip
    assert done.stdout.strip() == "ok", done.stderr
    assert done.stderr == ""
