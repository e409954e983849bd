"""Bookings: the guide's example app, built with tickq.

- Sign-up inserts the user and a ``send_welcome_email`` job in ONE transaction: both
  happen or neither does (a duplicate e-mail rolls back, and no email goes out).
- Every 15 minutes a schedule enqueues one ``send_reminder`` job per booking starting in
  the next 24 hours, with a unique key per booking, so duplicate or concurrent ticks can
  never send two reminders. The email shows the start in the user's own time zone; the
  database stores UTC.
- Nothing runs by itself: an external scheduler calls ``POST /api/cron/tick`` with
  ``Authorization: Bearer $CRON_SECRET`` (see .github/workflows/tick.yml), and each call
  processes a bounded batch and answers with a JSON summary.

Run the whole story with ``tickq demo``; or serve it yourself (it creates its tables):
``DATABASE_URL=sqlite:///bookings.db CRON_SECRET=... python -m examples.bookings --port 8000``
(``python -m tickq.demo`` where tickq is installed: the package ships this folder as
``tickq.demo``, so the demo runs from a wheel).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flask import Flask, request
from sqlalchemy import (
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    select,
)  # fmt: skip
from sqlalchemy.exc import IntegrityError

from tickq import JobContext, Queue

from .mail import sender_from_env

DATABASE_URL = os.environ.get("DATABASE_URL", "sqlite:///bookings.db")
engine = create_engine(DATABASE_URL)  # the app's tables and tickq's share this database
q = Queue(DATABASE_URL)

metadata = MetaData()
users = Table(
    "users", metadata,
    Column("id", Integer, primary_key=True),
    Column("email", String(200), nullable=False, unique=True),
    Column("name", String(200), nullable=False),
    Column("tz", String(64), nullable=False),  # the user's IANA time zone
)  # fmt: skip
bookings = Table(
    "bookings", metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", ForeignKey("users.id"), nullable=False),
    Column("title", String(200), nullable=False),
    Column("starts_at", DateTime(timezone=True), nullable=False),  # always UTC
    Column("reminded_at", DateTime(timezone=True)),
)  # fmt: skip
outbox = Table(
    "outbox", metadata,
    Column("id", Integer, primary_key=True),
    Column("to_addr", String(200), nullable=False),
    Column("subject", String(300), nullable=False),
    Column("body", String(4000), nullable=False),
    Column("idempotency_key", String(100), nullable=False, unique=True),
    Column("sent_at", DateTime(timezone=True), nullable=False),
)  # fmt: skip


def now() -> datetime:
    """The queue's clock (so ``tickq demo`` can fast-forward time); always UTC."""
    return q.clock.now()


mail = sender_from_env(engine, outbox, now)  # the outbox table, or SMTP when SMTP_URL is set


def migrate() -> None:
    """Create the app's tables and tickq's, in the same database."""
    metadata.create_all(engine)
    q.migrate()


def as_utc(value: datetime) -> datetime:
    """SQLite hands datetimes back without a zone; we only ever store UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# -- jobs ---------------------------------------------------------------------------------
@q.job(max_attempts=4, backoff=(60, 300, 1800))  # retry after 1, 5 and 30 minutes
def send_welcome_email(user_id: int, ctx: JobContext) -> None:
    with engine.connect() as conn:
        user = conn.execute(select(users).where(users.c.id == user_id)).one()
    mail.send(
        to=user.email,
        subject="Welcome to Bookings",
        body=f"Hi {user.name}, thanks for signing up!",
        idempotency_key=ctx.idempotency_key,  # the same on every retry: never sent twice
    )


@q.job(max_attempts=4, backoff=(60, 300, 1800))
def send_reminder(booking_id: int, ctx: JobContext) -> None:
    query = (
        select(bookings.c.title, bookings.c.starts_at, users.c.email, users.c.name, users.c.tz)
        .join(users, users.c.id == bookings.c.user_id)
        .where(bookings.c.id == booking_id)
    )
    with engine.connect() as conn:
        booking = conn.execute(query).one()
    local = as_utc(booking.starts_at).astimezone(ZoneInfo(booking.tz))
    mail.send(
        to=booking.email,
        subject=f"Reminder: {booking.title} at {local:%H:%M}",
        body=f"Hi {booking.name}, {booking.title} starts {local:%A %d %B at %H:%M} "
        f"({booking.tz} time).",
        idempotency_key=ctx.idempotency_key,
    )
    with engine.begin() as conn:  # what was sent is recorded: the schedule skips it now
        conn.execute(bookings.update().where(bookings.c.id == booking_id).values(reminded_at=now()))


@q.schedule("*/15 * * * *", tz="UTC")
def send_booking_reminders() -> None:
    """Enqueue one reminder per booking starting in the next 24 hours, at most once ever."""
    soon = (
        select(bookings.c.id)
        .where(bookings.c.reminded_at.is_(None))
        .where(bookings.c.starts_at > now(), bookings.c.starts_at <= now() + timedelta(hours=24))
    )
    with engine.begin() as conn:
        for (booking_id,) in conn.execute(soon).all():
            send_reminder.with_options(
                unique_key=f"reminder:{booking_id}", unique_scope="all"
            ).enqueue(booking_id=booking_id, conn=conn)


# -- the web app --------------------------------------------------------------------------
app = Flask(__name__)
app.register_blueprint(q.flask_blueprint())  # POST /api/cron/tick, GET /api/cron/health


def problem(message: str, status: int = 400) -> tuple[dict[str, object], int]:
    return {"error": message}, status


class Invalid(ValueError):
    """Bad input: answered 400 with one line naming the field at fault."""


@app.errorhandler(Invalid)
def invalid(exc: Invalid) -> tuple[dict[str, object], int]:
    return problem(str(exc))


def json_body() -> dict[str, Any]:
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise Invalid('send a JSON object, e.g. {"email": "ada@example.com", "name": "Ada"}')
    return data


def text(data: dict[str, Any], field: str, default: str | None = None, longest: int = 200) -> str:
    value = data.get(field)
    if value in (None, "") and default is not None:
        return default
    if not isinstance(value, str) or not value.strip() or len(value) > longest:
        raise Invalid(f"{field} must be text of 1 to {longest} characters, got {value!r:.60}")
    return value.strip()


@app.post("/signup")
def signup() -> tuple[dict[str, object], int]:
    data = json_body()
    email = text(data, "email")
    if "@" not in email:
        raise Invalid(f"email must be an address such as ada@example.com, got {email!r}")
    name, tz = text(data, "name", default=email), text(data, "tz", default="UTC", longest=64)
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise Invalid(f"tz must be an IANA time zone such as Europe/Berlin, got {tz!r}") from None
    try:
        with engine.begin() as conn:  # ONE transaction: the user and the welcome email job
            user_id = conn.execute(
                users.insert().values(email=email, name=name, tz=tz)
            ).inserted_primary_key[0]  # type: ignore[index]
            send_welcome_email.enqueue(user_id=user_id, conn=conn)
    except IntegrityError:  # duplicate e-mail: the user AND the job are rolled back
        return problem(f"{email} has already signed up", 409)
    return {"id": user_id}, 201


def start_time(raw: Any) -> datetime:
    """``starts_at`` as given (ISO-8601 with an offset) converted to UTC, for storing."""
    example = "e.g. 2026-12-01T09:00:00+01:00 or 2026-12-01T08:00:00Z"
    try:
        starts_at = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        starts_at = None
    if starts_at is None:
        raise Invalid(f"starts_at must be an ISO-8601 date and time, {example}; got {raw!r:.60}")
    if starts_at.tzinfo is None:
        raise Invalid(f"starts_at needs a time zone offset (it is stored in UTC), {example}; "
                      f"got {raw!r}")  # fmt: skip
    try:
        return starts_at.astimezone(UTC)
    except OverflowError:
        raise Invalid(f"starts_at is out of range in UTC, got {raw!r}") from None


@app.post("/bookings")
def create_booking() -> tuple[dict[str, object], int]:
    data = json_body()
    user_id = data.get("user_id")
    if type(user_id) is not int or not 0 < user_id < 2**31:  # bool is an int: not an id
        raise Invalid(f"user_id must be a user's id (a positive integer), got {user_id!r:.60}")
    title, starts_at = text(data, "title", default="Booking"), start_time(data.get("starts_at"))
    with engine.begin() as conn:
        if conn.execute(select(users.c.id).where(users.c.id == user_id)).first() is None:
            return problem(f"no user with id {user_id}", 404)
        booking_id = conn.execute(
            bookings.insert().values(user_id=user_id, title=title, starts_at=starts_at)
        ).inserted_primary_key[0]  # type: ignore[index]
    return {"id": booking_id, "starts_at": starts_at.isoformat()}, 201


@app.get("/bookings")
def list_bookings() -> dict[str, object]:
    query = select(bookings, users.c.tz).join(users, users.c.id == bookings.c.user_id)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(bookings.c.starts_at)).all()
    return {"bookings": [{
        "id": r.id, "user_id": r.user_id, "title": r.title,
        "starts_at": as_utc(r.starts_at).isoformat(),
        "starts_at_local": as_utc(r.starts_at).astimezone(ZoneInfo(r.tz)).isoformat(),
        "reminded_at": as_utc(r.reminded_at).isoformat() if r.reminded_at else None,
    } for r in rows]}  # fmt: skip


@app.get("/outbox")
def list_outbox() -> dict[str, object]:
    with engine.connect() as conn:
        rows = conn.execute(select(outbox).order_by(outbox.c.id)).all()
    return {"emails": [{"to": r.to_addr, "subject": r.subject, "body": r.body,
                        "sent_at": as_utc(r.sent_at).isoformat()} for r in rows]}  # fmt: skip
