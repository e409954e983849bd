"""`tickq demo --no-serve` tells the whole story and exits 0 (the README's first command)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from datetime import UTC, datetime, timedelta

from conftest import ROOT, run_tickq, tickq_env


def test_demo_runs_the_story_and_exits() -> None:
    result = run_tickq("demo", "--no-serve", "--port", "0", timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert "-> 409" in out, "the duplicate sign-up was refused"
    assert "Reminder: Dentist" in out and "Reminder: Conference" in out
    assert out.count("Reminder: Conference") == 1, "one reminder however many ticks"
    assert "is now failed after 4 attempts" in out
    title = "tickq: 1 job of type 'send_welcome_email' failed"
    assert f"webhook received: {title}" in out, "the alert reached the demo's webhook receiver"
    assert out.count("webhook received:") == 1, "one alert for the window, not one per attempt"
    assert "Latest error: ConnectionError: the email provider rejected carol@bounce.example" in out
    assert_readme_excerpt_in(result.stdout)


def assert_readme_excerpt_in(out: str) -> None:
    """The demo output the README shows (abridged) is what the demo prints, in order;
    clock times differ from run to run."""
    readme = (ROOT / "README.md").read_text()
    excerpt = re.search(r"```text\n(== 1\..*?)```", readme, flags=re.S)
    assert excerpt, "README shows the demo's output right after the two commands"
    printed = [mask_times(line) for line in out.splitlines()]
    at = 0
    for line in excerpt.group(1).splitlines():
        assert mask_times(line) in printed[at:], f"the demo no longer prints {line!r}"
        at = printed.index(mask_times(line), at) + 1


def mask_times(line: str) -> str:
    return re.sub(r"\d\d:\d\d", "HH:MM", line.rstrip())


def test_demo_serves_the_app_until_ctrl_c() -> None:
    """Without --no-serve the app keeps answering (time running again) until SIGINT."""
    env = tickq_env()
    env.pop("PYTHONUNBUFFERED", None)  # output to a pipe is block-buffered, as for users
    process = subprocess.Popen(
        [sys.executable, "-m", "tickq", "demo", "--port", "0"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=env, cwd=str(ROOT),
    )  # fmt: skip
    try:
        told = read_until(process, "serving until Ctrl-C")
        base = re.search(r"app:\s+(http://\S+)/bookings", told)
        token = re.search(r"Bearer (\S+)'", told)
        assert base and token, told
        signup = urllib.request.Request(
            base.group(1) + "/signup", data=json.dumps({"email": "dan@example.com"}).encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )  # fmt: skip
        with urllib.request.urlopen(signup, timeout=30) as response:
            assert response.status == 201
        tick = urllib.request.Request(
            base.group(1) + "/api/cron/tick", data=b"", method="POST",
            headers={"Authorization": f"Bearer {token.group(1)}"},
        )  # fmt: skip
        with urllib.request.urlopen(tick, timeout=30) as response:
            assert json.loads(response.read())["jobs"]["failed"] == 0
        with urllib.request.urlopen(base.group(1) + "/outbox", timeout=30) as response:
            emails = json.loads(response.read())["emails"]
        assert emails[-1]["to"] == "dan@example.com", emails
        sent_at = datetime.fromisoformat(emails[-1]["sent_at"])
        assert abs(sent_at - datetime.now(UTC)) < timedelta(minutes=5), "wall-clock time again"
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def read_until(process: subprocess.Popen[str], marker: str, timeout: float = 60) -> str:
    """The process's output up to the line holding ``marker`` (fails if it never comes)."""
    assert process.stdout is not None
    lines: list[str] = []
    timer = threading.Timer(timeout, process.kill)  # a hang ends the read with EOF
    timer.start()
    try:
        for line in process.stdout:
            lines.append(line)
            if marker in line:
                return "".join(lines)
    finally:
        timer.cancel()
    raise AssertionError(f"{marker!r} never came:\n{''.join(lines)}")
