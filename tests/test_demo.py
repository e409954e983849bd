"""`tickq demo --no-serve` tells the whole story and exits 0 (the README's first command)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import ROOT, run_tickq, tickq_env


def test_demo_runs_the_story_and_exits(tmp_path: Path) -> None:
    result = run_tickq("demo", "--no-serve", timeout=120, TMPDIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert "Try it yourself" not in out and "curl" not in out, "no URLs of a stopped server"
    assert list(tmp_path.iterdir()) == [], "the demo's temporary folder is deleted"
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


def test_demo_serves_the_app_until_ctrl_c(tmp_path: Path) -> None:
    """Without --no-serve the app keeps answering (time running again) until SIGINT."""
    env = tickq_env(TMPDIR=str(tmp_path))
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
        assert "deleted when the demo exits" in told
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
        assert list(tmp_path.iterdir()) == [], "the demo's temporary folder is deleted"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_a_busy_port_is_never_replaced_silently(tmp_path: Path) -> None:
    """--port N that is taken is an error naming it; the default port, taken, is replaced
    and the demo says so before it serves."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run_tickq("demo", "--port", port, timeout=60, TMPDIR=str(tmp_path))
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.startswith(f"tickq: error: cannot serve the demo on port {port}")
        assert "--port 0" in result.stderr and list(tmp_path.iterdir()) == []


def test_the_default_port_busy_is_said_loudly(tmp_path: Path) -> None:
    env = tickq_env(TMPDIR=str(tmp_path))
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", 8000))
        except OSError:
            pass  # something else holds port 8000 already: just as busy
        else:
            taken.listen()
        process = subprocess.Popen(
            [sys.executable, "-m", "tickq", "demo"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, env=env, cwd=str(ROOT),
        )  # fmt: skip
        try:
            told = read_until(process, "serving until Ctrl-C")
            moved = re.search(r"port 8000 is busy: serving on port (\d+) instead", told)
            assert moved, told
            assert f"http://127.0.0.1:{moved.group(1)}/bookings" in told
            process.terminate()  # SIGTERM ends it as Ctrl-C does
            assert process.wait(30) == 0
            assert list(tmp_path.iterdir()) == []
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def test_without_the_demo_extra_it_says_what_to_install() -> None:
    """Flask missing (as after a plain `pip install tickq`): one line naming the extra."""
    code = (
        "import sys; sys.modules['flask'] = None; from tickq.cli import main; "
        "sys.exit(main(['demo', '--no-serve']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env=tickq_env(), cwd=str(ROOT),
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        "tickq: error: tickq demo needs Flask and SQLAlchemy (flask is missing); "
        "pip install 'tickq[demo]'"
    )


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
