"""Internal: the options of the tick, health and metrics endpoints, checked once.

Public as ``tickq.web.EndpointOptions`` / ``EndpointSettings``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import TypedDict

from ..errors import DISK_FULL, LOCKED, READ_ONLY, TOO_MANY_CONNECTIONS, ConfigurationError

SECRET_ENV = "CRON_SECRET"
PREVIOUS_SECRET_ENV = "CRON_SECRET_PREVIOUS"
CURRENT_SOURCES = ("secret=", SECRET_ENV)
METRICS_TOKEN_ENV = "TICKQ_METRICS_TOKEN"
MIN_SECRET_LENGTH = 16
MAX_AUTH_HEADER = 4096
SECRET_OPTIONS = ("secret", "previous_secret", "metrics_token")
HIDDEN_OPTIONS = (*SECRET_OPTIONS, "heartbeat_url")  # a ping URL's path is often its secret
TICK_PARAMS = ("limit", "strict")
RETRY_AFTER_SECONDS = 30
SEE_LOG = "the app's log (logger 'tickq') has the details"
DATABASE_DOWN = (
    "the database is unreachable or dropped the connection; try again later (tickq "
    "reconnects on the next call). If it lasts, check that the database is up and that the "
    f"app's database URL points at it; {SEE_LOG}"
)
DATABASE_TROUBLE = {
    READ_ONLY: (
        "the database is read-only (a replica? after a failover the app may still reach the "
        "old primary); try again later (tickq reconnects on the next call). If it lasts, "
        f"point the app's database URL at the primary; {SEE_LOG}"
    ),
    DISK_FULL: (
        "the database is out of space (disk full); try again later. Free space on the "
        f"database's disk; {SEE_LOG}"
    ),
    TOO_MANY_CONNECTIONS: (
        "the database refused a connection: too many connections; try again later. If it "
        "lasts, raise the database's connection limit, put a pooler in front of it or run "
        f"fewer processes; {SEE_LOG}"
    ),
    LOCKED: (
        "the database stayed locked by another writer; try again later. If it lasts, look "
        f"for a process holding a write transaction open; {SEE_LOG}"
    ),
}


def database_trouble(reason: str) -> str:
    """What an HTTP answer says when the database can't be used for ``reason``: what
    happened and what to do, never where the database lives."""
    return DATABASE_TROUBLE.get(reason, DATABASE_DOWN)


SCHEMA_MISSING = (
    "tickq's tables are missing or out of date in this database: run q.migrate() or "
    f"`tickq migrate APP` when deploying; {SEE_LOG}"
)
MISCONFIGURED = (
    "tickq is misconfigured (e.g. the database named in the URL does not exist, or the "
    f"login was refused): fix the configuration; {SEE_LOG}"
)
SECRET_HINT = (
    "set it to a long random value, e.g. the output of "
    'python -c "import secrets; print(secrets.token_urlsafe(32))", as a secret both in the '
    "app's environment and in the scheduler that calls this endpoint"
)


class EndpointSettings(TypedDict, total=False):
    """Keyword options of ``q.asgi_app()``, ``q.wsgi_app()``, ``q.flask_blueprint()`` and
    ``q.django_urls()``; see ``EndpointOptions`` for their meaning."""

    path: str
    health_path: str
    secret: str | None
    previous_secret: str | None
    allow_get: bool
    limit: int
    max_limit: int
    time_budget: float
    expected_interval: timedelta
    max_wait: timedelta
    heartbeat_url: str | None
    metrics: bool
    metrics_path: str
    metrics_token: str | None


@dataclass(frozen=True)
class EndpointOptions:
    """How the endpoints behave.

    - ``path`` / ``health_path``: where the tick and the health check answer.
    - ``secret`` / ``previous_secret``: the bearer tokens accepted; None reads
      ``$CRON_SECRET`` / ``$CRON_SECRET_PREVIOUS`` on each request. Each needs at least 16
      printable ASCII characters. Without a current secret (a previous one alone is not
      enough) the tick answers 503 and runs nothing.
    - ``allow_get``: accept GET as well as POST (Vercel Cron calls with GET).
    - ``limit`` / ``max_limit``: jobs per tick by default, and the cap on ``?limit=``.
    - ``time_budget``: seconds after which a tick starts no new job.
    - ``expected_interval``: how often the scheduler calls; health fails after twice that.
    - ``max_wait``: with ``?strict=1``, a due job older than this makes the tick answer 500.
    - ``heartbeat_url``: pinged after each tick (None reads ``$TICKQ_HEARTBEAT_URL``).
    - ``metrics``: also serve Prometheus metrics at ``metrics_path`` (``GET /metrics``),
      protected by its own bearer token, ``metrics_token`` or ``$TICKQ_METRICS_TOKEN``
      (at least 16 characters; 503 while unset). Needs ``pip install 'tickq[metrics]'``.
    """

    path: str = "/api/cron/tick"
    health_path: str = "/api/cron/health"
    secret: str | None = None
    previous_secret: str | None = None
    allow_get: bool = False
    limit: int = 100
    max_limit: int = 1000
    time_budget: float = 20.0
    expected_interval: timedelta = timedelta(minutes=15)
    max_wait: timedelta = timedelta(hours=1)
    heartbeat_url: str | None = None
    metrics: bool = False
    metrics_path: str = "/metrics"
    metrics_token: str | None = None

    def __post_init__(self) -> None:
        for name in ("path", "health_path", "metrics_path"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.startswith("/"):
                raise ConfigurationError(f"{name} must start with '/', got {value!r}")
        paths = [self.path, self.health_path] + ([self.metrics_path] if self.metrics else [])
        if len(set(paths)) < len(paths):
            raise ConfigurationError(f"the endpoints need different paths, got {paths}")
        if self.max_limit < 1:
            raise ConfigurationError(f"max_limit must be >= 1, got {self.max_limit}")
        if not 0 <= self.limit <= self.max_limit:
            raise ConfigurationError(
                f"limit must be between 0 and max_limit ({self.max_limit}), got {self.limit}"
            )
        if self.time_budget <= 0:
            raise ConfigurationError(
                f"time_budget must be positive seconds, got {self.time_budget}"
            )
        for name in ("expected_interval", "max_wait"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise ConfigurationError(f"{name} must be a positive timedelta, got {value!r}")
        for name in SECRET_OPTIONS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigurationError(
                    f"{name} must be a str or None, got {type(value).__name__}"
                )
            if value and (problem := secret_problem(value)):
                raise ConfigurationError(f"{name}= {problem}")

    def __repr__(self) -> str:
        shown = (f"{f.name}={self._shown(f.name)}" for f in fields(self))
        return f"EndpointOptions({', '.join(shown)})"

    def _shown(self, name: str) -> str:
        value = getattr(self, name)
        return "<set>" if name in HIDDEN_OPTIONS and value else repr(value)

    def secrets(self) -> list[tuple[str, str]]:
        """[(where it came from, value)] of the tokens accepted now, current first."""
        found = []
        for value, env, option in (
            (self.secret, SECRET_ENV, "secret="),
            (self.previous_secret, PREVIOUS_SECRET_ENV, "previous_secret="),
        ):
            if value is None:
                value, option = os.environ.get(env, "").strip(), env
            if value:
                found.append((option, value))
        return found

    def metrics_secrets(self) -> list[tuple[str, str]]:
        """[(where it came from, value)] of the metrics token, if one is set."""
        if self.metrics_token is not None:
            return [("metrics_token=", self.metrics_token)] if self.metrics_token else []
        value = os.environ.get(METRICS_TOKEN_ENV, "").strip()
        return [(METRICS_TOKEN_ENV, value)] if value else []


def secret_problem(secret: str) -> str | None:
    """Why ``secret`` cannot protect the endpoint, or None."""
    if not secret.isascii() or not secret.isprintable() or " " in secret:
        return "must be printable ASCII without spaces (it travels in an HTTP header)"
    if len(secret) < MIN_SECRET_LENGTH:
        return (
            f"is too short ({len(secret)} characters; at least {MIN_SECRET_LENGTH}): {SECRET_HINT}"
        )
    return None


def unprotected_problem(options: EndpointOptions) -> str | None:
    """Why the tick endpoint built with ``options`` would refuse every call (503), as a
    start-up warning, or None when it has a usable current secret."""
    from .qstash import signing_keys

    found = options.secrets()
    if signing_keys() and (not found or found[0][0] not in CURRENT_SOURCES):
        return None  # QStash's signed calls are let in: no bearer token needed
    if not found or found[0][0] not in CURRENT_SOURCES:
        return (
            f"{SECRET_ENV} is not set, so the tick endpoint at {options.path} will answer 503 "
            f"and run nothing until it is: {SECRET_HINT}"
        )
    for source, value in found:
        if problem := secret_problem(value):
            return f"the tick endpoint at {options.path} will answer 503: {source} {problem}"
    return None
