"""``tickq demo``: the guide's bookings app, end to end, on embedded SQLite.

Starts the example app (examples/bookings, shipped in the package as ``tickq.demo``) on a
real socket, signs people up, books appointments, calls the tick endpoint the way a
scheduler would, fast-forwards time to show retries, the final ``failed`` state and the
alert (delivered to a small webhook receiver the demo runs), then leaves the app running.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .tables import port_number

DEFAULT_PORT = 8000


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    demo = subparsers.add_parser(
        "demo", help="run the guide's bookings app end to end (embedded SQLite, no set-up)",
        description="Run the guide's bookings app end to end on this machine, with nothing to "
        "set up: a Flask app on an embedded SQLite database, where a signup enqueues its "
        "welcome email in the same transaction; the tick endpoint called as a scheduler "
        "would (and refused without the secret); a failing email retried with backoff on a "
        "fast-forwarded clock; an alert delivered to a webhook; one reminder per booking "
        "however many ticks. Then it serves the app on 127.0.0.1 until Ctrl-C, for you to "
        "try (--no-serve stops after the story).",
    )  # fmt: skip
    demo.add_argument("--no-serve", action="store_true", help="run the story and exit")
    demo.add_argument(
        "--port", type=port_number, default=None,
        help=f"port to serve on (default {DEFAULT_PORT}, or another free one if it is busy)",
    )  # fmt: skip
    demo.add_argument(
        "--database-url",
        help="app database (default: a fresh SQLite file, deleted when the demo exits)",
    )
    demo.set_defaults(handler=run_demo)


def load_bookings() -> Any:
    """The bookings example app, shipped in the package as ``tickq.demo``."""
    try:
        from ..demo import app
    except ImportError as exc:
        raise ConfigurationError(
            f"tickq demo needs Flask and SQLAlchemy ({exc.name} is missing); "
            "pip install 'tickq[demo]'"
        ) from None
    return app


def serve(app: Any, port: int, explicit: bool) -> Any:
    """A threaded server for ``app`` on ``port``; a busy default port is replaced loudly,
    a busy port asked for with ``--port`` is an error."""
    import socket

    from werkzeug.serving import make_server

    try:
        listener = socket.create_server(("127.0.0.1", port))
    except OSError as exc:
        if explicit or port == 0:
            raise ConfigurationError(
                f"cannot serve the demo on port {port} ({exc.strerror}); "
                "pick another with --port N, or --port 0 for any free port"
            ) from None
        listener = socket.create_server(("127.0.0.1", 0))
        say(f"port {port} is busy: serving on port {listener.getsockname()[1]} instead "
            "(--port N picks one)")  # fmt: skip
    with listener:  # werkzeug serves on a duplicate of it
        return make_server("127.0.0.1", 0, app, threaded=True, fd=listener.fileno())


class Story:
    """Narrates the demo: HTTP calls to the running app, printed readably."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token

    def call(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def tick(self) -> dict[str, Any]:
        status, summary = self.call("POST", "/api/cron/tick", token=self.token)
        if status != 200:
            raise RuntimeError(f"tick answered {status}: {summary}")
        return summary  # type: ignore[no-any-return]


class AlertInbox:
    """A webhook receiver on a free local port, standing in for Slack or a pager."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        self.live = False  # once the story is told, print alerts as they arrive
        inbox = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    inbox.receive(json.loads(body))
                    self.send_response(204)
                except ValueError:
                    self.send_response(400)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def receive(self, alert: dict[str, Any]) -> None:
        self.alerts.append(alert)
        if self.live:
            say(f"[webhook] alert received: {alert.get('title')}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


STORY_SPAN = timedelta(hours=8)
"""The story fast-forwards less than this, so it starts this far back and ends before now."""


class MovingClock:
    """Time running again after the story, from where the story left it."""

    def __init__(self, now: datetime) -> None:
        self.offset = now - datetime.now(UTC)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


class FirstLine(logging.Formatter):
    """Log lines cut to their first line: the alert's full text is shown from the webhook."""

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).split("\n", 1)[0]


def heading(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}")


def say(text: str) -> None:
    print(f"   {text}" if text else "")


def show_summary(summary: dict[str, Any]) -> None:
    jobs = summary["jobs"]
    slots = ", ".join(f"{s['name']} @ {s['slot'][11:16]}Z" for s in summary["schedules_enqueued"])
    say(f"schedules enqueued: {slots or 'none'}")
    say(
        f"jobs: {jobs['claimed']} claimed, {jobs['succeeded']} succeeded, "
        f"{jobs['retried']} retried, {jobs['failed']} failed; "
        f"{summary['remaining_due']} left for the next call"
    )


def show_new_emails(story: Story, seen: list[Any]) -> None:
    _, outbox = story.call("GET", "/outbox")
    new = outbox["emails"][len(seen) :]
    for email in new:
        say(f"email to {email['to']}: {email['subject']!r}")
    seen.extend(new)
    if not new:
        say("no new email")


def run_demo(args: argparse.Namespace) -> int:
    with sigterm_as_ctrl_c(), tempfile.TemporaryDirectory(prefix="tickq-demo-") as folder:
        return run_in(Path(folder), args)


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM ends the demo as Ctrl-C does, so its temporary folder is deleted."""
    import signal

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_in(folder: Path, args: argparse.Namespace) -> int:
    """The demo with its SQLite file in ``folder``, which is deleted when it exits."""
    token = secrets.token_urlsafe(24)
    os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{folder / 'bookings.db'}"
    os.environ["CRON_SECRET"] = token
    os.environ["EMAIL_FAIL_FOR"] = "bounce.example"
    for name in ("SMTP_URL", "TICKQ_ALERT_EMAIL_TO", "TICKQ_ALERT_WEBHOOK_FORMAT"):
        os.environ.pop(name, None)  # the demo sends no real email, and alerts only locally
    bookings = None
    inbox = AlertInbox()
    os.environ["TICKQ_ALERT_WEBHOOK_URL"] = inbox.url  # read when the app's Queue is made
    handler = logging.StreamHandler()
    handler.setFormatter(FirstLine("   [log] %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    try:
        bookings = load_bookings()
        return tell_and_serve(bookings, inbox, token, args)
    finally:
        inbox.close()
        if bookings is not None:
            bookings.q.close()
            bookings.engine.dispose()


def tell_and_serve(bookings: Any, inbox: AlertInbox, token: str, args: argparse.Namespace) -> int:
    from ..testing import FrozenClock

    clock = FrozenClock(datetime.now(UTC) - STORY_SPAN)
    bookings.q.clock = clock  # the demo fast-forwards time instead of waiting for it
    bookings.migrate()
    port = 0 if args.no_serve and args.port is None else args.port
    server = serve(bookings.app, DEFAULT_PORT if port is None else port, args.port is not None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    story = Story(f"http://127.0.0.1:{server.port}", token)
    try:
        tell(story, clock, bookings, inbox)
        if args.no_serve:
            heading("Done")
            say("--no-serve: the app stops here; run `tickq demo` without it to try the app "
                "yourself")  # fmt: skip
            return 0
        try_it_yourself(story, token, inbox, args)
        # Real time again (a jump forward, as the story ends before now), so bookings
        # and retries you try by hand happen when the wall clock says.
        bookings.q.clock = MovingClock(max(clock.now(), datetime.now(UTC)))
        inbox.live = True
        say("serving until Ctrl-C")
        sys.stdout.flush()  # a pipe (| tee) sees the URLs now, not at exit
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


def try_it_yourself(story: Story, token: str, inbox: AlertInbox, args: argparse.Namespace) -> None:
    heading("Try it yourself")
    say(f"app:       {story.base}/bookings   {story.base}/outbox")
    say(f"health:    {story.base}/api/cron/health")
    say(f"tick:      curl -X POST -H 'Authorization: Bearer {token}' {story.base}/api/cron/tick")
    say(f"alerts:    POSTed to {inbox.url} (a receiver in this demo)")
    kept = " (a temporary file, deleted when the demo exits)" if not args.database_url else ""
    say(f"database:  {os.environ['DATABASE_URL']}{kept}")


def tell(story: Story, clock: Any, bookings: Any, inbox: AlertInbox) -> None:
    emails: list[Any] = []
    heading("1. People sign up: the user row and a send_welcome_email job, one transaction")
    people = [("ada@example.com", "Ada", "Europe/Berlin"), ("bob@example.com", "Bob",
              "America/New_York"), ("carol@bounce.example", "Carol", "Asia/Tokyo")]  # fmt: skip
    ids = {}
    for email, name, tz in people:
        status, body = story.call("POST", "/signup", {"email": email, "name": name, "tz": tz})
        ids[name] = body["id"]
        say(f"POST /signup {email} ({tz}) -> {status}")
    status, body = story.call("POST", "/signup", {"email": "ada@example.com", "name": "Ada"})
    say(f"POST /signup ada@example.com again -> {status} {body['error']!r}")
    say("   rolled back: no second user and no second welcome email job")

    heading("2. Bookings, stored in UTC")
    now = clock.now()
    for name, title, hours in (("Ada", "Dentist", 3), ("Bob", "Haircut", 20),
                               ("Ada", "Conference", 30)):  # fmt: skip
        starts = (now + timedelta(hours=hours)).isoformat(timespec="minutes")
        status, _ = story.call("POST", "/bookings", {"user_id": ids[name], "title": title,
                                                     "starts_at": starts})  # fmt: skip
        say(f"{name}: {title} in {hours} h -> {status}")

    heading("3. A scheduler calls POST /api/cron/tick with the bearer token")
    status, body = story.call("POST", "/api/cron/tick", token="wrong-token")
    say(f"with a wrong token -> {status} {body.get('error', '')!r}: nothing ran")
    summary = story.tick()
    show_summary(summary)
    show_new_emails(story, emails)
    say("the 30-hour Conference gets no reminder yet; carol's provider refused the email:")
    failing = bookings.q.list_jobs(type="send_welcome_email", status="pending")
    for job in failing:
        wait = job.run_after - clock.now()
        error = (job.last_error or "").split("\n", 1)[0]
        say(f"   job {job.id} attempt {job.attempts} failed ({error})")
        say(f"   next try in {int(wait.total_seconds() // 60)} minute(s)")

    heading("4. Fast-forward: retries after 1, 5 and 30 minutes, then failed")
    for minutes in (1, 5, 30):
        clock.advance(minutes=minutes)
        say(f"... {minutes} minute(s) later, the next tick:")
        show_summary(story.tick())

    job = failing[0] if failing else None
    if job is not None:
        final = bookings.q.get_job(job.id)
        say(f"job {job.id} is now {final.status} after {final.attempts} attempts; every "
            f"attempt is kept: {len(bookings.q.attempts(job.id))} errors recorded")  # fmt: skip

    heading("5. The alert: failures of one type are grouped per 10-minute window")
    clock.advance(minutes=11)
    say("... 11 minutes later the window has closed; the next tick runs the alert job:")
    show_summary(story.tick())
    for alert in inbox.alerts:
        say(f"webhook received: {alert['title']}")
        for line in alert["text"].splitlines():
            say(f"   {line}" if line else "")
    if not inbox.alerts:
        say("no alert arrived at the webhook (see the log lines above)")

    heading("6. Seven hours later the Conference is inside 24 hours; two ticks race")
    clock.advance(hours=7)
    results: list[dict[str, Any]] = []
    racers = [threading.Thread(target=lambda: results.append(story.tick())) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
    for summary in results:
        show_summary(summary)
    show_new_emails(story, emails)
    say("one reminder per booking, however many ticks: a unique key per booking")

    heading("The JSON summary a scheduler sees")
    print(json.dumps(story.tick(), indent=2))
