"""After an outage a worker looks again within ~2 s; a library prints nothing unasked."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
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
q._store.record_and_claim("someone-else", [], 0, 3, started=q._store.claim("someone-else", 1, 3))
clock.advance(seconds=10)
report = q.process_jobs()
assert report["rescued"] == 1 and report["failed"] == 1, report
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=tickq_env(), cwd=str(ROOT), timeout=60)  # fmt: skip
    assert done.stdout.strip() == "ok", done.stderr
    assert done.stderr == ""


def test_the_tick_command_still_shows_warnings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    app = tmp_path / "tickapp.py"
    app.write_text(
        "from tickq import Queue\n"
        f"q = Queue({url!r}, lease_seconds=3)\n"
        "q.job(name='t', max_attempts=1)(lambda: None)\n"
    )
    from tickq import FrozenClock, Queue

    clock = FrozenClock(datetime.now(UTC) - timedelta(hours=1))
    q = Queue(url, clock=clock, strict=False)
    q.migrate()
    q.enqueue("t")
    # Claimed and started elsewhere; its lease ran out long before the tick below.
    q._store.record_and_claim(
        "someone-else", [], 0, 3, started=q._store.claim("someone-else", 1, 3)
    )
    q.close()
    env = tickq_env(PYTHONPATH=f"{tmp_path}:{ROOT / 'src'}")
    done = subprocess.run([sys.executable, "-m", "tickq", "tick", "tickapp:q"],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path),
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "lease expired on attempt 1" in done.stderr
    assert done.stderr.count("lease expired on attempt 1") == 1
