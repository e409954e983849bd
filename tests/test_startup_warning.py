"""An app whose tick endpoint has no usable CRON_SECRET says so when it starts, once, with
how to make one, instead of waiting for the scheduler's first call to get 503."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import tickq_env
from tickq import Queue

SECRET = "s3cret-token-0123456789"
WARNING = "CRON_SECRET is not set, so the tick endpoint at /api/cron/tick will answer 503"


def tickq_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "tickq" and r.levelno == logging.WARNING]  # fmt: skip


@pytest.mark.parametrize("factory", ["asgi_app", "wsgi_app", "flask_blueprint", "fastapi_router",
                                     "django_urls", "endpoint"])  # fmt: skip
def test_each_adapter_warns_once_at_construction_without_a_secret(
    queue: Queue, factory: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CRON_SECRET", raising=False)
    caplog.set_level(logging.WARNING, logger="tickq")
    getattr(queue, factory)()
    (message,) = tickq_warnings(caplog)
    assert message.startswith(WARNING) and "secrets.token_urlsafe(32)" in message


def test_no_warning_with_a_secret_or_without_a_tick_route(
    queue: Queue, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="tickq")
    monkeypatch.delenv("CRON_SECRET", raising=False)
    queue.asgi_app(secret=SECRET)
    queue.django_urls(tick=False)  # webhooks only: no tick to protect
    monkeypatch.setenv("CRON_SECRET", SECRET)
    queue.asgi_app()
    assert tickq_warnings(caplog) == []


def test_a_secret_too_short_is_said_at_start_up(
    queue: Queue, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRON_SECRET", "short")
    caplog.set_level(logging.WARNING, logger="tickq")
    queue.wsgi_app()
    (message,) = tickq_warnings(caplog)
    assert "will answer 503: CRON_SECRET is too short (5 characters; at least 16)" in message


APP = """
from tickq import Queue

q = Queue("sqlite:///app.db")
app = q.asgi_app()
print("started", flush=True)
"""


def test_an_app_without_logging_set_up_still_shows_it_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    env = tickq_env()
    env.pop("CRON_SECRET", None)
    run = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert run.returncode == 0 and run.stdout == "started\n", run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"tickq: warning: {WARNING}")
    env["CRON_SECRET"] = SECRET
    quiet = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert quiet.stderr == "" and quiet.stdout == "started\n"
