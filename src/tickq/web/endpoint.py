"""The tick and health endpoints, written once for every adapter (ASGI, WSGI, Flask, Django).

An adapter turns its request into a ``Request``, asks ``Endpoint.check`` (method and token:
no I/O) and then runs the route's handler (database work: off the event loop), and sends
the ``Response`` back. The route table is the one place a new endpoint goes.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import parse_qs

from ..errors import ConfigurationError
from ..heartbeat import heartbeat_url, ping
from ..logger import library_logger
from ..tick import strict_problems, tick_health

if TYPE_CHECKING:
    from ..queue import Queue

log = library_logger("tickq")

SECRET_ENV = "CRON_SECRET"
PREVIOUS_SECRET_ENV = "CRON_SECRET_PREVIOUS"
METRICS_TOKEN_ENV = "TICKQ_METRICS_TOKEN"
MIN_SECRET_LENGTH = 16
MAX_AUTH_HEADER = 4096
MAX_QUERY_FIELDS = 20
TRUE_WORDS = ("1", "true", "yes", "on")
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
      ``$CRON_SECRET`` / ``$CRON_SECRET_PREVIOUS`` on each request. Without any secret the
      tick answers 503 and runs nothing.
    - ``allow_get``: accept GET as well as POST (Vercel Cron calls with GET).
    - ``limit`` / ``max_limit``: jobs per tick by default, and the cap on ``?limit=``.
    - ``time_budget``: seconds after which a tick starts no new job.
    - ``expected_interval``: how often the scheduler calls; health fails after twice that.
    - ``max_wait``: with ``?strict=1``, a due job older than this makes the tick answer 500.
    - ``heartbeat_url``: pinged after each tick (None reads ``$TICKQ_HEARTBEAT_URL``).
    - ``metrics``: also serve Prometheus metrics at ``metrics_path`` (``GET /metrics``),
      protected by its own bearer token, ``metrics_token`` or ``$TICKQ_METRICS_TOKEN``
      (503 while unset). Needs ``pip install 'tickq[metrics]'``.
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


@dataclass(frozen=True, slots=True)
class Request:
    """What the endpoints need of an HTTP request."""

    method: str
    path: str
    query: str = ""
    authorization: bytes | None = None
    """The raw ``Authorization`` header; None when absent, b"" when unusable."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, Any]) -> Request:
        """From a WSGI environ (also Flask's ``request.environ``, Django's ``request.META``)."""
        raw = environ.get("HTTP_AUTHORIZATION")
        try:
            auth = None if raw is None else str(raw).encode("latin-1")
        except UnicodeEncodeError:  # not what a server could have received
            auth = b""
        return cls(
            method=str(environ.get("REQUEST_METHOD", "GET")).upper(),
            path=str(environ.get("PATH_INFO", "") or "/"),
            query=str(environ.get("QUERY_STRING", "")),
            authorization=auth,
        )


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"

    @property
    def reason(self) -> str:
        return HTTPStatus(self.status).phrase

    def all_headers(self) -> list[tuple[str, str]]:
        return [
            ("content-type", self.content_type),
            ("cache-control", "no-store"),
            ("content-length", str(len(self.body))),
            *self.headers,
        ]


def json_response(status: int, data: Any, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return Response(status, json.dumps(data).encode(), tuple(headers))


def error(status: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return json_response(status, {"error": message}, headers)


@dataclass(frozen=True)
class Route:
    """One endpoint: ``protected`` routes need the bearer token."""

    name: str
    path: str
    methods: tuple[str, ...]
    handler: Callable[[Request], Response]
    protected: bool = False


@dataclass
class Endpoint:
    """The routes of one Queue, shared by every adapter."""

    queue: Queue
    options: EndpointOptions = field(default_factory=EndpointOptions)
    routes: list[Route] = field(init=False)

    def __post_init__(self) -> None:
        tick_methods = ("GET", "POST") if self.options.allow_get else ("POST",)
        self.routes = [
            Route("tick", self.options.path, tick_methods, self.tick, protected=True),
            Route("health", self.options.health_path, ("GET", "HEAD"), self.health),
        ]
        if self.options.metrics:
            self.routes.append(
                Route("metrics", self.options.metrics_path, ("GET", "HEAD"), self.metrics, True)
            )

    # -- dispatch ------------------------------------------------------------------------
    def find(self, path: str) -> Route | None:
        return next((r for r in self.routes if r.path == path), None)

    def check(self, route: Route | None, request: Request) -> Response | None:
        """The answer when ``request`` must not reach the handler; cheap, no I/O."""
        if route is None:
            return error(404, f"no tickq endpoint at {request.path!r}")
        if request.method not in route.methods:
            allowed = ", ".join(route.methods)
            hint = " (GET too with allow_get=True)" if route.name == "tick" else ""
            return error(
                405,
                f"{request.method} is not allowed here; use {allowed}{hint}",
                [("allow", allowed)],
            )
        if not route.protected:
            return None
        return (
            self.authorize_metrics(request) if route.name == "metrics" else self.authorize(request)
        )

    def handle(self, request: Request, route: Route | None = None) -> Response:
        """Check and run ``request`` here (blocking); for WSGI and framework views."""
        route = route or self.find(request.path)
        refused = self.check(route, request)
        return refused if refused or route is None else route.handler(request)

    def authorize(self, request: Request) -> Response | None:
        secrets = self.options.secrets()
        if not secrets:
            return error(
                503, f"the tick endpoint is disabled because {SECRET_ENV} is not set: {SECRET_HINT}"
            )
        for source, value in secrets:
            if problem := secret_problem(value):
                return error(503, f"the tick endpoint is disabled: {source} {problem}")
        if request.authorization is None:
            return error(
                401,
                f"missing Authorization header: send 'Authorization: Bearer <{SECRET_ENV}>'",
                [("www-authenticate", "Bearer")],
            )
        if not token_matches(request.authorization, [v for _, v in secrets]):
            return error(401, "wrong bearer token", [("www-authenticate", "Bearer")])
        return None

    def authorize_metrics(self, request: Request) -> Response | None:
        secrets = self.options.metrics_secrets()
        if not secrets:
            return error(503, f"metrics are off: set {METRICS_TOKEN_ENV} to turn them on")
        if request.authorization is None or not token_matches(
            request.authorization, [v for _, v in secrets]
        ):
            return error(401, "missing or wrong bearer token", [("www-authenticate", "Bearer")])
        return None

    # -- handlers ------------------------------------------------------------------------
    def tick(self, request: Request) -> Response:
        try:
            params = parse_qs(request.query, max_num_fields=MAX_QUERY_FIELDS)
        except ValueError:
            return error(400, f"too many query parameters (at most {MAX_QUERY_FIELDS})")
        limit = self._limit(params)
        if isinstance(limit, Response):
            return limit
        strict = params.get("strict", [""])[-1].lower() in TRUE_WORDS
        try:
            summary = self.queue.tick(limit=limit, time_budget=self.options.time_budget)
        except Exception as exc:
            log.exception("tickq tick failed")
            first_line = (str(exc).strip().splitlines() or [""])[0]
            response = error(500, f"tick failed: {type(exc).__name__}: {first_line}")
            self._ping(ok=False, body=response.body)
            return response
        summary["limit"] = limit
        if strict:
            problems = strict_problems(summary, self.options.max_wait)
            summary["strict"] = {"ok": not problems, "problems": problems}
        response = json_response(500 if strict and problems else 200, summary)
        self._ping(ok=response.status == 200, body=response.body)
        return response

    def _limit(self, params: dict[str, list[str]]) -> int | Response:
        raw = params.get("limit", [None])[-1]
        if raw is None or raw == "":
            return self.options.limit
        if not raw.isascii() or not raw.isdigit():
            return error(
                400,
                f"limit must be a whole number from 0 to "
                f"{self.options.max_limit}, got {raw[:40]!r}",
            )
        return min(
            int(raw[:9]) if len(raw) <= 9 else self.options.max_limit, self.options.max_limit
        )

    def _ping(self, ok: bool, body: bytes) -> None:
        # Pinged before answering: a host that sleeps may freeze the process right after.
        url = heartbeat_url(self.options.heartbeat_url)
        if url:
            ping(url, ok, body)

    def health(self, request: Request) -> Response:
        try:
            report = tick_health(self.queue, self.options.expected_interval)
        except Exception as exc:
            log.exception("tickq health check failed")
            report = {"ok": False, "status": "error", "error": type(exc).__name__}
        response = json_response(200 if report["ok"] else 503, report)
        return Response(response.status, b"") if request.method == "HEAD" else response

    def metrics(self, request: Request) -> Response:
        from ..errors import TickqError
        from ..metrics import CONTENT_TYPE, render

        try:
            body = render(self.queue).encode()
        except TickqError as exc:
            return error(503, str(exc))
        return Response(200, b"" if request.method == "HEAD" else body, content_type=CONTENT_TYPE)


def secret_problem(secret: str) -> str | None:
    """Why ``secret`` cannot protect the endpoint, or None."""
    if not secret.isascii() or not secret.isprintable() or " " in secret:
        return "must be printable ASCII without spaces (it travels in an HTTP header)"
    if len(secret) < MIN_SECRET_LENGTH:
        return (
            f"is too short ({len(secret)} characters; at least {MIN_SECRET_LENGTH}): {SECRET_HINT}"
        )
    return None


def token_matches(header: bytes, secrets: Sequence[str]) -> bool:
    """Constant-time check of ``Bearer <token>`` against every accepted secret."""
    if not header or len(header) > MAX_AUTH_HEADER:
        return False
    scheme, _, token = header.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    token = token.strip()
    matched = False
    for secret in secrets:  # no early exit: timing says nothing about which one matched
        matched |= hmac.compare_digest(token, secret.encode("ascii"))
    return matched
