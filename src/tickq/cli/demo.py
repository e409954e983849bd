"""``tickq demo``: the guide's bookings app, end to end, on embedded SQLite.

Starts the example app (examples/bookings) on a real socket, signs people up, books
appointments, calls the tick endpoint the way a scheduler would, fast-forwards time to
show retries, the final ``failed`` state and the alert, then leaves the app running.
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
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    demo = subparsers.add_parser(
        "demo", help="run the guide's bookings app end to end (embedded SQLite, no set-up)"
    )
    demo.add_argument("--no-serve", action="store_true", help="run the story and exit")
    demo.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")
    demo.add_argument(
        "--database-url", help="app database (default: a fresh SQLite file in a temp folder)"
    )
    demo.set_defaults(handler=run_demo)


def find_examples() -> Path:
    """The checkout holding examples/bookings: the current folder or tickq's own source."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (root / "examples" / "bookings" / "app.py").is_file():
            return root
    raise ConfigurationError(
        "tickq demo runs examples/bookings from a tickq checkout; run it from the folder "
        "you cloned tickq into (git clone ... && cd tickq && tickq demo)"
    )


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


def heading(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}")


def say(text: str) -> None:
    print(f"   {text}")


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
    root = find_examples()
    folder = Path(tempfile.mkdtemp(prefix="tickq-demo-"))
    token = secrets.token_urlsafe(24)
    os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{folder / 'bookings.db'}"
    os.environ["CRON_SECRET"] = token
    os.environ["EMAIL_FAIL_FOR"] = "bounce.example"
    sys.path.insert(0, str(root))
    logging.basicConfig(level=logging.WARNING, format="   [log] %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    from examples.bookings import app as bookings
    from werkzeug.serving import make_server

    from ..testing import FrozenClock

    clock = FrozenClock()
    bookings.q.clock = clock  # the demo fast-forwards time instead of waiting for it
    bookings.migrate()
    server = make_server("127.0.0.1", _free_port(args.port), bookings.app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    story = Story(f"http://127.0.0.1:{server.port}", token)
    tell(story, clock, bookings)
    heading("Try it yourself")
    say(f"app:       {story.base}/bookings   {story.base}/outbox")
    say(f"health:    {story.base}/api/cron/health")
    say(f"tick:      curl -X POST -H 'Authorization: Bearer {token}' {story.base}/api/cron/tick")
    say(f"database:  {os.environ['DATABASE_URL']}")
    if args.no_serve:
        server.shutdown()
        return 0
    say("serving until Ctrl-C")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


def tell(story: Story, clock: Any, bookings: Any) -> None:
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

    heading("4. Fast-forward: retries after 1, 5 and 30 minutes, then failed + alert")
    for minutes in (1, 5, 30):
        clock.advance(minutes=minutes)
        say(f"... {minutes} minute(s) later, the next tick:")
        show_summary(story.tick())

    job = failing[0] if failing else None
    if job is not None:
        final = bookings.q.get_job(job.id)
        say(f"job {job.id} is now {final.status} after {final.attempts} attempts; every "
            f"attempt is kept: {len(bookings.q.attempts(job.id))} errors recorded")  # fmt: skip

    heading("5. Seven hours later the Conference is inside 24 hours; two ticks race")
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


def _free_port(preferred: int) -> int:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
