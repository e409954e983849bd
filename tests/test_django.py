"""The Django integration, run as the Django project's own pytest-django suite in real
subprocesses: Django 5.2 with the django-tasks backport (this venv, Python 3.11) and Django
6.1 (``.venv-dj6``, Python 3.12, built by ``.ci/django``), each on SQLite and on Postgres.
Also ``manage.py migrate`` from an empty database and the management commands as processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PG_URL, ROOT, require_postgres

EXAMPLE = ROOT / "examples" / "django_bookings"
DJANGO6 = ROOT / ".venv-dj6" / "bin" / "python"


def python_for(django: str) -> str:
    if django == "5.2+backport":
        pytest.importorskip("django_tasks", reason="pip install -e '.[test]' (django-tasks)")
        return sys.executable
    if not DJANGO6.exists():
        message = f"{DJANGO6} is missing: run bash .ci/django (Python 3.12 + Django 6.1)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(DJANGO6)


@pytest.fixture
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A Django database that doesn't exist yet (a file, or a Postgres database created
    here and dropped afterwards; pytest-django makes its own test_<name> beside it)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'bookings.db'}"
        return
    require_postgres()
    import psycopg

    name = f"tickq_dj_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield PG_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"DROP DATABASE IF EXISTS test_{name} WITH (FORCE)")


def run(python: str, *args: str, url: str, timeout: float = 240, **env: str) -> str:
    environ = {**os.environ, "BOOKINGS_DATABASE_URL": url, "PYTHONPATH": str(ROOT / "src"),
               "CRON_SECRET": "", **env}  # fmt: skip
    environ.pop("DJANGO_SETTINGS_MODULE", None)
    environ.update(env)
    done = subprocess.run([python, *args], cwd=EXAMPLE, env=environ, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("django", ["5.2+backport", "6.1"])
def test_the_django_projects_own_suite_passes(django: str, database_url: str) -> None:
    out = run(python_for(django), "-m", "pytest", "-q", "-p", "no:xdist", "-x",
              url=database_url)  # fmt: skip
    assert " passed" in out and "failed" not in out and "skipped" not in out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("django", ["5.2+backport", "6.1"])
def test_migrate_from_empty_then_the_commands_as_processes(django: str, database_url: str) -> None:
    python = python_for(django)
    run(python, "manage.py", "migrate", "--noinput", url=database_url)
    enqueue = (
        "from bookings.tasks import send_welcome_email as t; print(t.enqueue('k@example.com').id)"
    )
    job_id = run(python, "manage.py", "shell", "-c", enqueue, url=database_url).split()[-1]
    out = run(python, "manage.py", "tickq_worker", "--burst", "--concurrency", "2",
              url=database_url)  # fmt: skip
    assert "succeeded=2" in out  # the welcome email and the reminders' first slot
    check = (
        "from bookings.tasks import send_welcome_email as t; "
        f"r = t.get_result('{job_id}'); print(r.status, r.return_value['to'])"
    )
    assert run(python, "manage.py", "shell", "-c", check, url=database_url).split()[-2:] == [
        "SUCCESSFUL", "k@example.com"
    ]  # fmt: skip
    report = json.loads(run(python, "manage.py", "tickq_tick", url=database_url))
    assert report["jobs"]["claimed"] == 0 and report["remaining_due"] == 0


def test_the_tickq_cli_sets_django_up(backend: str, database_url: str) -> None:
    python = python_for("5.2+backport")
    run(python, "manage.py", "migrate", "--noinput", url=database_url)
    cli = [python, "-m", "tickq"]
    env = {**os.environ, "BOOKINGS_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT / "src")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    refused = subprocess.run([*cli, "tick", "dj_tests.plain:q"], cwd=EXAMPLE, env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 1
    assert refused.stderr.strip().count("\n") == 0, refused.stderr
    assert "set DJANGO_SETTINGS_MODULE" in refused.stderr
    run(python, "-m", "tickq", "migrate", "dj_tests.plain:q", url=database_url,
        DJANGO_SETTINGS_MODULE="bookings_site.settings")  # fmt: skip
    enqueue = "from dj_tests.plain import count_groups; print(count_groups.enqueue())"
    run(python, "manage.py", "shell", "-c", enqueue, url=database_url)
    out = run(python, "-m", "tickq", "tick", "dj_tests.plain:q", url=database_url,
              DJANGO_SETTINGS_MODULE="bookings_site.settings")  # fmt: skip
    assert json.loads(out)["jobs"]["succeeded"] == 1, out
    enqueue = "from bookings.tasks import send_welcome_email as t; print(t.enqueue('m@x.io').id)"
    task_id = run(python, "manage.py", "shell", "-c", enqueue, url=database_url).split()[-1]
    shown = run(python, "-m", "tickq", "show", "tickq.contrib.django:q", task_id,
                url=database_url, DJANGO_SETTINGS_MODULE="bookings_site.settings")  # fmt: skip
    assert "bookings.tasks.send_welcome_email" in shown and "m@x.io" in shown
    run(python, "-m", "tickq", "migrate", "tickq.contrib.django:q", url=database_url,
        DJANGO_SETTINGS_MODULE="bookings_site.settings")  # fmt: skip


def test_the_worker_command_runs_until_sigterm(backend: str, database_url: str) -> None:
    import signal
    import time

    python = python_for("5.2+backport")
    run(python, "manage.py", "migrate", "--noinput", url=database_url)
    env = {**os.environ, "BOOKINGS_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT / "src")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    worker = subprocess.Popen(
        [python, "manage.py", "tickq_worker", "--queues", "emails", "--concurrency", "2"],
        cwd=EXAMPLE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        enqueue = (
            "from bookings.tasks import send_welcome_email as t; print(t.enqueue('w@x.io').id)"
        )
        job_id = run(python, "manage.py", "shell", "-c", enqueue, url=database_url).split()[-1]
        check = (
            "from bookings.tasks import send_welcome_email as t; "
            f"print(t.get_result('{job_id}').status)"
        )
        deadline = time.monotonic() + 30
        status = ""
        while time.monotonic() < deadline and status != "SUCCESSFUL":
            status = run(python, "manage.py", "shell", "-c", check, url=database_url).split()[-1]
            time.sleep(0.2)
        assert status == "SUCCESSFUL"
    finally:
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, out
