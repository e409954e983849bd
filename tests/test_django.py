"""The Django integration, run as the Django project's own pytest-django suite in real
subprocesses: Django 5.2 with the django-tasks backport (this venv, Python 3.11) and Django
6.1 (``.venv-dj6``, Python 3.12, built by ``.ci/django``), each on SQLite and on Postgres.
Also ``manage.py migrate`` from an empty database, the management commands, Django's own
test runner and the example served by runserver, gunicorn and uvicorn, as processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


# -- Django under real servers: a backend per thread or async context ---------------------
SECRET = "s3cret-token-for-the-tick-0123456789"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(python: str, server: str, port: int) -> list[str]:
    return {
        "runserver": [python, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        "gunicorn": [python, "-m", "gunicorn", "--workers", "1", "--threads", "4",
                     "--bind", f"127.0.0.1:{port}", "bookings_site.wsgi"],
        "uvicorn": [python, "-m", "uvicorn", "--port", str(port), "--log-level", "warning",
                    "bookings_site.asgi:application"],
    }[server]  # fmt: skip


def http(method: str, url: str, body: dict[str, Any] | None = None,
         token: str | None = None) -> tuple[int, dict[str, Any]]:  # fmt: skip
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@contextmanager
def serving(python: str, server: str, url: str) -> Iterator[str]:
    """The example project served by ``server`` in its own process, until it answers."""
    import time
    import urllib.error
    import urllib.request

    port = free_port()
    env = {**os.environ, "BOOKINGS_DATABASE_URL": url, "PYTHONPATH": str(ROOT / "src"),
           "CRON_SECRET": SECRET, "DJANGO_SETTINGS_MODULE": "bookings_site.settings"}  # fmt: skip
    process = subprocess.Popen(server_command(python, server, port), cwd=EXAMPLE, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                urllib.request.urlopen(f"{base}/api/cron/health", timeout=5).close()
                break
            except urllib.error.HTTPError:
                break  # it answers (503: no tick yet)
            except OSError:
                assert time.monotonic() < deadline, f"{server} never answered"
                time.sleep(0.1)
        yield base
        assert process.poll() is None, process.communicate()[0]
    finally:
        process.terminate()
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("server", ["runserver", "gunicorn", "uvicorn"])
@pytest.mark.parametrize("django", ["5.2+backport", "6.1"])
def test_the_example_under_a_threaded_or_async_server(
    django: str, server: str, database_url: str
) -> None:
    """runserver (threaded), gunicorn --threads and uvicorn make a backend per thread or
    async context: a task enqueued in a view runs through the tick URL, its result reads
    back in a view, and the schedule's slot is enqueued — in every request's thread."""
    python = python_for(django)
    run(python, "manage.py", "migrate", "--noinput", url=database_url)
    with serving(python, server, database_url) as base:
        assert http("GET", f"{base}/api/cron/health")[0] == 503  # no token needed; no tick yet
        status, signed_up = http("POST", f"{base}/signup", {"email": "t@example.com"})
        assert status == 201, signed_up
        status, report = http("POST", f"{base}/api/cron/tick", token=SECRET)
        assert status == 200, report
        assert report["jobs"]["retried"] == 0 and report["jobs"]["succeeded"] == 2, report
        assert [s["name"] for s in report["schedules_enqueued"]] == [
            "bookings.tasks.send_booking_reminders"
        ]  # fmt: skip
        status, result = http("GET", f"{base}/jobs/{signed_up['job']}")
        assert status == 200, result
        assert result["status"] == "SUCCESSFUL" and result["errors"] == []
        assert result["return_value"] == {"to": "t@example.com", "sent": True}  # the email
        reminder = report["schedules_enqueued"][0]["job_id"]
        assert http("GET", f"{base}/jobs/{reminder}")[1]["status"] == "SUCCESSFUL"
        status, health = http("GET", f"{base}/api/cron/health")
        assert status == 200 and health["ok"] is True


@pytest.mark.timeout(300)
@pytest.mark.parametrize("django", ["5.2+backport", "6.1"])
def test_djangos_own_test_runner_drops_its_test_database(django: str, database_url: str) -> None:
    """``manage.py test`` with the tickq backend: tickq's connections to the test database
    are let go, so Django can drop it ("N other sessions are using the database")."""
    python = python_for(django)
    environ = {**os.environ, "BOOKINGS_DATABASE_URL": database_url,
               "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
    environ.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run([python, "manage.py", "test", "dj_tests.runner_suite", "--noinput"],
                          cwd=EXAMPLE, env=environ, capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Ran 4 tests" in done.stderr and "OK" in done.stderr, done.stderr
    assert "Destroying test database" in done.stderr
    if database_url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            name = f"test_{database_url.rsplit('/', 1)[1]}"
            left = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            assert left.fetchall() == []
    else:
        assert not Path(database_url.removeprefix("sqlite:///") + "-test").exists()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", ["tickq_worker --burst", "tickq_tick"])
@pytest.mark.parametrize("django", ["5.2+backport", "6.1"])
def test_a_task_that_exits_fails_and_the_command_carries_on(
    django: str, command: str, database_url: str
) -> None:
    python = python_for(django)
    run(python, "manage.py", "migrate", "--noinput", url=database_url)
    enqueue = (
        "from dj_tests import tasks; from bookings.tasks import send_welcome_email as w; "
        "print(tasks.exits.enqueue(3).id, tasks.interrupts.enqueue().id, w.enqueue('e@x.io').id)"
    )
    ids = run(python, "manage.py", "shell", "-c", enqueue, url=database_url,
              BOOKINGS_TEST_TASKS="1").split()[-3:]  # fmt: skip
    out = run(python, "manage.py", *command.split(), url=database_url, BOOKINGS_TEST_TASKS="1")
    if command == "tickq_tick":
        jobs = json.loads(out)["jobs"]
        assert (jobs["failed"], jobs["succeeded"]) == (2, 2), out  # the reminder slot too
    else:
        assert "failed=2" in out and "succeeded=2" in out, out
    check = (
        "from tickq.contrib.django import backend_for; b = backend_for(); "
        f"print([[e.exception_class_path for e in b.get_result(i).errors] for i in {ids}], "
        f"b.get_result('{ids[2]}').status)"
    )
    shown = run(python, "manage.py", "shell", "-c", check, url=database_url,
                BOOKINGS_TEST_TASKS="1").strip().splitlines()[-1]  # fmt: skip
    assert shown == "[['builtins.SystemExit'], ['builtins.KeyboardInterrupt'], []] SUCCESSFUL"


def test_an_unknown_backend_is_a_command_error(database_url: str) -> None:
    python = python_for("5.2+backport")
    environ = {**os.environ, "BOOKINGS_DATABASE_URL": database_url,
               "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
    environ.pop("DJANGO_SETTINGS_MODULE", None)
    for command in (["tickq_worker", "--burst"], ["tickq_tick"]):
        done = subprocess.run([python, "manage.py", *command, "--backend", "unknown"],
                              cwd=EXAMPLE, env=environ, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            "CommandError: --backend unknown: there is no TASKS['unknown'] in settings "
            "(configured: 'default'); name one of those, or add it to TASKS"
        ], done.stderr
