"""Sending email, pluggably: a local outbox for the demo, real SMTP for production.

Every sender takes the job's idempotency key, so a retried job can never send twice: the
outbox refuses a second row with the same key; over SMTP the key becomes the Message-ID
(providers and receivers drop duplicates of a Message-ID).
"""

from __future__ import annotations

import os
import smtplib
from collections.abc import Callable
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from sqlalchemy import Engine, Table
from sqlalchemy.exc import IntegrityError


class Sender(Protocol):
    def send(self, to: str, subject: str, body: str, idempotency_key: str) -> None: ...


class OutboxSender:
    """Writes each message to the ``outbox`` table, so a newcomer sees every email.
    ``now`` stamps ``sent_at`` (the app's clock, which the demo fast-forwards)."""

    def __init__(self, engine: Engine, table: Table, now: Callable[[], datetime]) -> None:
        self.engine, self.table, self.now = engine, table, now

    def send(self, to: str, subject: str, body: str, idempotency_key: str) -> None:
        row = {"to_addr": to, "subject": subject, "body": body,
               "idempotency_key": idempotency_key, "sent_at": self.now()}  # fmt: skip
        try:
            with self.engine.begin() as conn:
                conn.execute(self.table.insert().values(**row))
        except IntegrityError:
            pass  # already sent by an earlier attempt of the same job: nothing to do


class SmtpSender:
    """Sends through an SMTP server: ``SMTP_URL=smtp://user:pass@host:587?starttls=1``."""

    def __init__(self, url: str, sender: str = "bookings@example.com") -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "localhost", parts.port or 25
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        self.starttls = parse_qs(parts.query).get("starttls", ["0"])[-1] == "1"
        self.sender = sender

    def send(self, to: str, subject: str, body: str, idempotency_key: str) -> None:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = self.sender, to, subject
        message["Message-ID"] = f"<{idempotency_key}@bookings.example>"
        message.set_content(body)
        with smtplib.SMTP(self.host, self.port, timeout=30) as smtp:
            if self.starttls:
                smtp.starttls()
            if self.username:
                smtp.login(self.username, self.password or "")
            smtp.send_message(message)


class FailingFor:
    """Wraps a sender so addresses at the given domains fail: the demo's retry switch."""

    def __init__(self, inner: Sender, domains: list[str]) -> None:
        self.inner, self.domains = inner, domains

    def send(self, to: str, subject: str, body: str, idempotency_key: str) -> None:
        if to.rsplit("@", 1)[-1] in self.domains:
            raise ConnectionError(f"the email provider rejected {to} (EMAIL_FAIL_FOR)")
        self.inner.send(to, subject, body, idempotency_key)


def sender_from_env(
    engine: Engine, outbox: Table, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> Sender:
    """``SMTP_URL`` set: real SMTP; otherwise the outbox table. ``EMAIL_FAIL_FOR`` (a
    comma-separated list of domains) makes sending to those domains fail."""
    smtp_url = os.environ.get("SMTP_URL")
    sender: Sender = SmtpSender(smtp_url) if smtp_url else OutboxSender(engine, outbox, now)
    failing = [d.strip() for d in os.environ.get("EMAIL_FAIL_FOR", "").split(",") if d.strip()]
    return FailingFor(sender, failing) if failing else sender
