"""The guide's bookings app end to end: a real server process on each backend, driven over
HTTP the way browsers and a scheduler would, with a shared clock fast-forwarded instead of
waiting. What the app promises is checked in its own tables (users, outbox) and tickq's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import create_engine, text

from conftest import ROOT, run_tickq, tickq_env
from receivers import http_receiver
from tickq import JobState, Queue
from tickq.testing import SharedClock

TOKEN = "e2e-token-0123456789abcdef"
START_TIMEOUT = 30.0
ALERT_ENV = ("TICKQ_ALERT_WEBHOOK_URL", "TICKQ_ALERT_WEBHOOK_FORMAT", "TICKQ_ALERT_EMAIL_TO",
             "TICKQ_SMTP_URL", "TICKQ_ALERT_EMAIL_FROM", "EMAIL_FAIL_FOR", "SMTP_URL")  # fmt: skip


def call(
    base: str, method: str, path: str, body: Any = None, token: str | None = None
) -> tuple[int, Any]:
    """One HTTP request to the app: (status, decoded JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@dataclass
class App:
    """The running app, and test-side views of its database."""

    base: str
    clock: SharedClock
    queue: Queue
    count: Callable[[str], int]
    log: Path
    ticks: list[dict[str, Any]] = field(default_factory=list)

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        return call(self.base, "POST", path, body)

    def sign_up(self, email: str, name: str = "", tz: str = "UTC") -> int:
        status, body = self.post("/signup", {"email": email, "name": name, "tz": tz})
        assert status == 201, body
        return int(body["id"])

    def book(self, user_id: int, title: str, hours: float) -> int:
        starts = (self.clock.now() + timedelta(hours=hours)).isoformat()
        status, body = self.post("/bookings", {"user_id": user_id, "title": title,
                                               "starts_at": starts})  # fmt: skip
        assert status == 201, body
        return int(body["id"])

    def tick(self) -> dict[str, Any]:
        status, summary = call(self.base, "POST", "/api/cron/tick", token=TOKEN)
        assert status == 200, (summary, self.log.read_text())
        self.ticks.append(summary)
        return summary  # type: ignore[no-any-return]

    def emails(self, subject: str = "") -> list[dict[str, Any]]:
        status, body = call(self.base, "GET", "/outbox")
        assert status == 200, body
        return [e for e in body["emails"] if e["subject"].startswith(subject)]

    def jobs(self, job_type: str) -> list[Any]:
        return self.queue.list_jobs(type=job_type, limit=1000)


@pytest.fixture
def app_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The app's database: a SQLite file, or a Postgres schema in SQLAlchemy's spelling."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'bookings.db'}"
    url = str(request.getfixturevalue("pg_schema_url"))
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture
def start_app(app_url: str, tmp_path: Path) -> Iterator[Callable[..., App]]:
    """Start ``python -m examples.bookings`` (each call a new process on the same database
    and clock); every process is stopped when the test ends."""
    processes: list[subprocess.Popen[bytes]] = []
    clock = SharedClock(tmp_path / "clock")
    queue = Queue(app_url, clock=clock)  # tickq reads the SQLAlchemy-style URL as it is
    engine = create_engine(app_url)

    def count(table: str) -> int:
        with engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())

    def start(**env: str) -> App:
        log = tmp_path / f"app-{len(processes)}.log"
        settings = tickq_env(DATABASE_URL=app_url, CRON_SECRET=TOKEN, **env)
        for name in set(ALERT_ENV) - set(env):
            settings.pop(name, None)
        settings["PYTHONPATH"] += os.pathsep + str(ROOT)  # so `examples` imports
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "examples.bookings", "--port", "0",
                 "--clock-file", str(clock.path)],
                stdout=out, stderr=subprocess.STDOUT, env=settings, cwd=tmp_path,
            )  # fmt: skip
        processes.append(process)
        return App(wait_for_server(process, log), clock, queue, count, log)

    try:
        yield start
    finally:
        for process in processes:
            stop(process)
        queue.close()
        engine.dispose()


def wait_for_server(process: subprocess.Popen[bytes], log: Path) -> str:
    """The base URL the app prints once it listens; fails if it exits or never does."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if found := re.search(r"bookings app on (http://\S+)", log.read_text()):
            return found.group(1)
        if process.poll() is not None:
            pytest.fail(f"the app exited with {process.returncode}:\n{log.read_text()}")
        time.sleep(0.02)
    pytest.fail(f"the app did not start within {START_TIMEOUT:g}s:\n{log.read_text()}")


def stop(process: subprocess.Popen[Any]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def settle(app: App, rounds: int = 10) -> None:
    """Tick until a tick finds nothing to do (a tick runs what an earlier job enqueued)."""
    for _ in range(rounds):
        if not app.tick()["jobs"]["claimed"]:
            return
    pytest.fail(f"still busy after {rounds} ticks: {app.ticks[-1]}")


def test_sign_up_creates_the_user_and_exactly_one_welcome_email(
    start_app: Callable[..., App],
) -> None:
    app = start_app()
    user_id = app.sign_up("ada@example.com", "Ada", "Europe/Berlin")

    assert app.count("users") == 1
    [job] = app.jobs("send_welcome_email")
    assert (job.status, job.payload) == (JobState.PENDING, {"user_id": user_id})
    assert app.emails() == [], "nothing runs until the scheduler calls the tick"

    summary = app.tick()
    assert summary["jobs"]["succeeded"] >= 1
    settle(app)
    [email] = app.emails()
    assert (email["to"], email["subject"]) == ("ada@example.com", "Welcome to Bookings")
    assert "Hi Ada" in email["body"]
    [job] = app.jobs("send_welcome_email")
    assert (job.status, job.attempts) == (JobState.DONE, 1)


def test_a_rolled_back_sign_up_leaves_no_job_and_no_user(start_app: Callable[..., App]) -> None:
    app = start_app()
    app.sign_up("ada@example.com", "Ada")

    status, body = app.post("/signup", {"email": "ada@example.com", "name": "Ada again"})
    assert status == 409
    assert "ada@example.com" in body["error"]
    assert app.count("users") == 1
    assert len(app.jobs("send_welcome_email")) == 1, "the rolled-back job was never inserted"

    settle(app)
    assert len(app.emails("Welcome")) == 1


def race(app: App, ticks: int = 2) -> None:
    """Fire ``ticks`` tick calls at the same instant, as overlapping schedulers would."""
    barrier = threading.Barrier(ticks)
    errors: list[BaseException] = []

    def racer() -> None:
        try:
            barrier.wait(10)
            app.tick()
        except BaseException as exc:  # reported from the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=racer) for _ in range(ticks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors


def test_concurrent_ticks_send_each_due_reminder_exactly_once(
    start_app: Callable[..., App],
) -> None:
    app = start_app(EMAIL_FAIL_FOR="bounce.example")
    ada = app.sign_up("ada@example.com", "Ada", "Europe/Berlin")
    bob = app.sign_up("bob@example.com", "Bob", "America/New_York")
    carol = app.sign_up("carol@bounce.example", "Carol")
    due = {app.book(ada, "Dentist", 2), app.book(bob, "Haircut", 5), app.book(ada, "Gym", 20)}
    bounced = app.book(carol, "Yoga", 4)  # her reminder keeps failing: reminded_at stays empty
    later = app.book(bob, "Conference", 30)

    # A new schedule slot each round: the schedule finds Yoga unreminded every time while
    # its one job retries (1, 5, 30 minutes); the unique key stops a second job.
    for _ in range(6):
        race(app)
        settle(app)
        app.clock.advance(minutes=15)

    reminders = app.emails("Reminder:")
    assert sorted(e["subject"].split(" at ")[0] for e in reminders) == [
        "Reminder: Dentist", "Reminder: Gym", "Reminder: Haircut"]  # fmt: skip
    jobs = {j.payload["booking_id"]: j for j in app.jobs("send_reminder")}
    assert len(app.jobs("send_reminder")) == len(jobs) == 4, "one job per booking, ever"
    assert set(jobs) == due | {bounced}
    assert all(jobs[b].status == JobState.DONE and jobs[b].attempts == 1 for b in due)
    assert (jobs[bounced].status, jobs[bounced].attempts) == (JobState.FAILED, 4)
    haircut = next(e for e in reminders if "Haircut" in e["subject"])
    assert "(America/New_York time)" in haircut["body"], "shown in the user's own zone"

    race(app, ticks=3)  # more ticks, at later slots too, send nothing more
    app.clock.advance(minutes=15)
    race(app, ticks=3)
    settle(app)
    assert len(app.emails("Reminder:")) == 3 and len(app.jobs("send_reminder")) == 4
    _, listing = call(app.base, "GET", "/bookings")
    reminded = {b["id"]: b["reminded_at"] for b in listing["bookings"]}
    assert all(reminded[b] for b in due) and reminded[later] is None


def test_a_booking_30_hours_away_is_reminded_once_it_is_within_24_hours(
    start_app: Callable[..., App],
) -> None:
    app = start_app()
    ada = app.sign_up("ada@example.com", "Ada", "Asia/Tokyo")
    booking = app.book(ada, "Conference", 30)
    starts = app.clock.now() + timedelta(hours=30)

    settle(app)
    assert app.emails("Reminder:") == []
    app.clock.advance(hours=5)  # 25 hours away: still outside the window
    settle(app)
    assert app.emails("Reminder:") == []
    assert app.jobs("send_reminder") == []

    app.clock.advance(hours=2)  # 23 hours away
    settle(app)
    [reminder] = app.emails("Reminder:")
    local = starts.astimezone(ZoneInfo("Asia/Tokyo"))
    assert reminder["subject"] == f"Reminder: Conference at {local:%H:%M}"
    [job] = app.jobs("send_reminder")
    assert job.payload == {"booking_id": booking} and job.status == JobState.DONE

    app.clock.advance(hours=1)
    settle(app)
    assert len(app.emails("Reminder:")) == 1


def test_a_failing_sender_ends_failed_after_4_attempts_and_alerts_once(
    start_app: Callable[..., App],
) -> None:
    with http_receiver() as receiver:
        app = start_app(EMAIL_FAIL_FOR="bounce.example", TICKQ_ALERT_WEBHOOK_URL=receiver.url)
        app.sign_up("ada@example.com", "Ada")
        carol = app.sign_up("carol@bounce.example", "Carol")
        [job_id] = [j.id for j in app.jobs("send_welcome_email") if j.payload["user_id"] == carol]

        app.tick()
        for attempt, wait in ((1, 1), (2, 5), (3, 30)):  # retry after 1, 5, 30 minutes
            job = app.queue.get_job(job_id)
            assert (job.status, job.attempts) == (JobState.PENDING, attempt)
            assert job.run_after is not None
            left = job.run_after - app.clock.now()
            assert timedelta(minutes=wait - 1) < left <= timedelta(minutes=wait)
            app.tick()  # not due yet: the attempt is not taken early
            assert app.queue.get_job(job_id).attempts == attempt
            app.clock.advance(minutes=wait)
            app.tick()

        job = app.queue.get_job(job_id)
        assert (job.status, job.attempts) == (JobState.FAILED, 4)
        attempts = app.queue.attempts(job_id)
        assert [a.outcome for a in attempts] == ["error"] * 4
        assert all("bounce.example" in (a.error_message or "") for a in attempts)
        assert [e["to"] for e in app.emails()] == ["ada@example.com"]
        # The tick that recorded the failure sent its alert before returning: on a
        # sleeping host nothing else would run until the next call.
        assert len(receiver.requests) == 1

        app.clock.advance(minutes=11)  # past the 10-minute window: no follow-up to send
        settle(app)
        app.clock.advance(hours=1)  # later ticks send no second alert
        settle(app)

        alerts = [r.json() for r in receiver.requests]
        assert len(alerts) == 1, alerts
        [alert] = alerts
        assert (alert["kind"], alert["job_type"]) == ("failed", "send_welcome_email")
        assert alert["failed_jobs"] == 1 and alert["job_ids"] == [job_id]
        assert "send_welcome_email" in alert["title"]
        assert f"tickq show {job_id}" in alert["text"]
        assert "carol@bounce.example" in alert["last_error"]


def test_the_tick_endpoint_rejects_a_missing_or_wrong_token_and_runs_nothing(
    start_app: Callable[..., App],
) -> None:
    app = start_app()
    ada = app.sign_up("ada@example.com", "Ada")
    app.book(ada, "Dentist", 2)

    for token in (None, "wrong-token-0123456789", TOKEN + "x"):
        status, body = call(app.base, "POST", "/api/cron/tick", token=token)
        assert status == 401, body
        assert body["error"]
    status, _ = call(app.base, "GET", "/api/cron/tick", token=TOKEN)
    assert status == 405

    [job] = app.jobs("send_welcome_email")
    assert (job.status, job.attempts) == (JobState.PENDING, 0)
    assert app.jobs("send_booking_reminders") == [], "no schedule slot was enqueued"
    assert app.emails() == []

    settle(app)  # with the token, the same work runs
    assert len(app.emails("Welcome")) == 1 and len(app.emails("Reminder: Dentist")) == 1


BAD_SIGN_UPS = [
    ([1, 2], "JSON object"),
    ({"email": "not-an-address"}, "email"),
    ({"email": "x" * 300 + "@example.com"}, "email"),
    ({"email": "ada@example.com", "name": 5}, "name"),
    ({"email": "ada@example.com", "name": "x" * 201}, "name"),
    ({"email": "ada@example.com", "tz": "Mars/Olympus"}, "tz"),
    ({"email": "ada@example.com", "tz": 5}, "tz"),
]
BAD_BOOKINGS = [
    ({"user_id": "1", "starts_at": "2030-01-01T09:00:00Z"}, "user_id"),
    ({"user_id": True, "starts_at": "2030-01-01T09:00:00Z"}, "user_id"),
    ({"user_id": 2**70, "starts_at": "2030-01-01T09:00:00Z"}, "user_id"),
    ({"user_id": 1, "starts_at": "2030-01-01T09:00:00"}, "time zone offset"),
    ({"user_id": 1, "starts_at": "tomorrow"}, "ISO-8601"),
    ({"user_id": 1, "starts_at": 12}, "ISO-8601"),
    ({"user_id": 1, "starts_at": "0001-01-01T00:30:00+01:00"}, "out of range"),
    ({"user_id": 1, "starts_at": "2030-01-01T09:00:00Z", "title": "t" * 300}, "title"),
]


def test_bad_input_is_refused_with_one_line_naming_the_field(
    start_app: Callable[..., App],
) -> None:
    app = start_app()
    for body, named in BAD_SIGN_UPS:
        status, answer = app.post("/signup", body)
        assert status == 400 and named in answer["error"], (body, status, answer)
    assert app.count("users") == 0 and app.jobs("send_welcome_email") == []

    ada = app.sign_up("ada@example.com")
    assert ada == 1
    for body, named in BAD_BOOKINGS:
        status, answer = app.post("/bookings", body)
        assert status == 400 and named in answer["error"], (body, status, answer)
    status, answer = app.post("/bookings", {"user_id": 99, "starts_at": "2030-01-01T09:00Z"})
    assert (status, answer) == (404, {"error": "no user with id 99"})
    assert app.count("bookings") == 0

    status, answer = app.post("/bookings", {"user_id": ada, "title": "Dentist",
                                            "starts_at": "2030-01-01T09:00:00+01:00"})  # fmt: skip
    assert (status, answer["starts_at"]) == (201, "2030-01-01T08:00:00+00:00"), answer


def test_a_second_app_process_shares_the_clock_database_and_unique_keys(
    start_app: Callable[..., App],
) -> None:
    """Two server processes (as on a host that scales out) tick the same database."""
    first, second = start_app(), start_app()
    ada = first.sign_up("ada@example.com", "Ada")
    second.book(ada, "Dentist", 3)
    assert second.post("/signup", {"email": "ada@example.com"})[0] == 409

    threads = [threading.Thread(target=app.tick) for app in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    settle(first)
    settle(second)
    assert len(first.emails("Welcome")) == 1 and len(second.emails("Reminder:")) == 1


def test_the_workflow_is_what_the_scheduler_command_prints_today() -> None:
    workflow = ROOT / "examples" / "bookings" / ".github" / "workflows" / "tick.yml"
    readme = (ROOT / "examples" / "bookings" / "README.md").read_text()
    command = "tickq scheduler github-actions --every 15m --name bookings-tick"
    assert command in readme, "the example's README names the command that wrote it"
    result = run_tickq(*command.split()[1:])
    assert result.returncode == 0, result.stderr
    assert workflow.read_text() == result.stdout, f"regenerate it: {command} --out {workflow}"


def test_the_commands_in_the_example_readme_work(tmp_path: Path) -> None:
    """Run the README's two blocks as written (from a checkout with a .venv), on a free
    port instead of 8000: the server, then the curl calls with the token it printed."""
    readme = (ROOT / "examples" / "bookings" / "README.md").read_text()
    serve, calls = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    assert "--port 8000" in serve and ".venv/bin/python -m examples.bookings" in serve
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    script = serve.replace("--port 8000", "--port 0").replace(".venv/bin/", "exec .venv/bin/")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", "-ec", script], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
            env=tickq_env(),
        )  # fmt: skip
    try:
        base = wait_for_server(process, log)
        found = re.search(r"tick token: (\S+)", log.read_text())
        assert found, log.read_text()
        port = base.rsplit(":", 1)[1]
        result = subprocess.run(
            ["bash", "-ec", calls.replace("localhost:8000", f"127.0.0.1:{port}")],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
            env=tickq_env(CRON_SECRET=found.group(1)),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        signup, booking, tick, outbox = json_values(result.stdout)
        assert signup == {"id": 1}
        assert booking["starts_at"] == "2030-01-01T08:00:00+00:00"
        assert tick["jobs"]["succeeded"] >= 1, tick
        [email] = outbox["emails"]
        assert (email["to"], email["subject"]) == ("ada@example.com", "Welcome to Bookings")
        assert (tmp_path / "bookings.db").is_file(), "DATABASE_URL from the command was used"
    finally:
        stop(process)


def json_values(text: str) -> list[Any]:
    """The JSON documents printed one after another (not every answer ends in a newline)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while at < len(text.rstrip()):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return values
