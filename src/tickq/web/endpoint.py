"""The tick and health endpoints, written once for every adapter (ASGI, WSGI, Flask, Django).

An adapter turns its request into a ``Request``, asks ``Endpoint.check`` (method and token:
no I/O) and then runs the route's handler (database work: off the event loop), and sends
the ``Response`` back. The route table is the one place a new endpoint goes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigurationError
from ..heartbeat import heartbeat_url, ping
from ..logger import library_logger
from ..tick import strict_problems
from .options import (
    CURRENT_SOURCES,
    MAX_AUTH_HEADER,
    METRICS_TOKEN_ENV,
    MISCONFIGURED,
    RETRY_AFTER_SECONDS,
    SCHEMA_MISSING,
    SECRET_ENV,
    SECRET_HINT,
    SEE_LOG,
    TICK_PARAMS,
    EndpointOptions,
    database_trouble,
    secret_problem,
)
from .qstash import HEADER as QSTASH_HEADER
from .qstash import Claims, Refused, check_body, check_token, signing_keys
from .query import QueryError, parse_flag, parse_limit, parse_query

if TYPE_CHECKING:
    from ..store import SqlStore

    class TickTarget(Protocol):
        """What the endpoints need of a ``Queue``: its tick, health and stats."""

        def tick(self, limit: int = 100, time_budget: float | None = 20.0) -> dict[str, Any]: ...
        def health(
            self, expected_interval: timedelta = ..., *, alert: bool = True
        ) -> dict[str, Any]: ...
        def stats(self) -> dict[str, Any]: ...
        @property
        def _store(self) -> SqlStore: ...


log = library_logger("tickq")
TICK_MAX_BODY = 64 * 1024
"""The tick reads its body (for a QStash signature's body hash) up to this many bytes."""


@dataclass(frozen=True, slots=True)
class Request:
    """What the endpoints need of an HTTP request."""

    method: str
    path: str
    query: str = ""
    authorization: bytes | None = None
    """The raw ``Authorization`` header; None when absent, b"" when unusable."""
    headers: tuple[tuple[str, str], ...] = ()
    """Every header as (lower-case name, value decoded as latin-1), in order."""
    body: bytes = b""
    """The body, read only for routes that take one (webhooks), within their limit."""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower case), or None."""
        return next((value for key, value in self.headers if key == name), None)

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
            headers=headers_of(environ),
        )


def headers_of(environ: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The headers of a WSGI environ (``HTTP_X_HUB_SIGNATURE_256`` -> x-hub-signature-256)."""
    found = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            found.append((key[5:].replace("_", "-").lower(), str(value)))
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            found.append((key.replace("_", "-").lower(), str(value)))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    length: int | None = None
    """The ``Content-Length`` when it is not the body's (the answer to HEAD)."""

    @property
    def reason(self) -> str:
        return HTTPStatus(self.status).phrase

    @property
    def content_length(self) -> int:
        return len(self.body) if self.length is None else self.length

    def all_headers(self) -> list[tuple[str, str]]:
        return [
            ("content-type", self.content_type),
            ("cache-control", "no-store"),
            ("content-length", str(self.content_length)),
            *self.headers,
        ]


def json_response(status: int, data: Any, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return Response(status, json.dumps(data).encode(), tuple(headers))


def error(status: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return json_response(status, {"error": message}, headers)


@dataclass(frozen=True)
class Route:
    """One endpoint: ``protected`` routes need the bearer token; ``max_body`` is how many
    bytes of body the handler reads at most (0: it reads none); with ``body_header``, only
    a request carrying that header has its body read (the tick: QStash's signed calls)."""

    name: str
    path: str
    methods: tuple[str, ...]
    handler: Callable[[Request], Response]
    protected: bool = False
    max_body: int = 0
    body_header: str | None = None

    def reads_body(self, request: Request) -> bool:
        """Whether the handler takes ``request``'s body."""
        if not self.max_body:
            return False
        return self.body_header is None or request.header(self.body_header) is not None


class RouteSource(Protocol):
    """Routes added after the endpoint was built (webhooks), looked up on each request."""

    def find(self, path: str) -> Route | None: ...
    def routes(self) -> list[Route]: ...


@dataclass
class Endpoint:
    """The routes of one Queue, shared by every adapter."""

    queue: TickTarget
    options: EndpointOptions = field(default_factory=EndpointOptions)
    webhooks: RouteSource | None = None
    routes: list[Route] = field(init=False)

    def __post_init__(self) -> None:
        tick_methods = ("GET", "POST") if self.options.allow_get else ("POST",)
        self.routes = [
            Route(
                "tick",
                self.options.path,
                tick_methods,
                self.tick,
                protected=True,
                max_body=TICK_MAX_BODY,
                body_header=QSTASH_HEADER,
            ),
            Route("health", self.options.health_path, ("GET", "HEAD"), self.health),
        ]
        if self.options.metrics:
            self.routes.append(
                Route("metrics", self.options.metrics_path, ("GET", "HEAD"), self.metrics, True)
            )
        taken = {route.path: route.name for route in self.routes}
        for route in self.webhooks.routes() if self.webhooks else ():
            if route.path in taken:
                raise ConfigurationError(
                    f"webhook path {route.path!r} is where the {taken[route.path]} endpoint "
                    "answers; pick another path for one of them"
                )

    def all_routes(self) -> list[Route]:
        """The fixed routes and the webhooks registered so far (for URL tables)."""
        return self.routes + (self.webhooks.routes() if self.webhooks else [])

    def openapi(self, title: str = "tickq endpoints") -> dict[str, Any]:
        """The OpenAPI 3.0 description of these endpoints, as served (paths, methods)."""
        from .openapi import describe

        return describe(self.options, title)

    # -- dispatch ------------------------------------------------------------------------
    def find(self, path: str) -> Route | None:
        found = next((r for r in self.routes if r.path == path), None)
        if found is None and self.webhooks is not None:
            return self.webhooks.find(path)
        return found

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

    def handle(
        self,
        request: Request,
        route: Route | None = None,
        read: Callable[[int], bytes] | None = None,
    ) -> Response:
        """Check and run ``request`` here (blocking); for WSGI and framework views.
        ``read(n)`` reads the body, for routes that take one. The answer to HEAD has no
        body."""
        return head_or_get(request, self._handle(request, route, read))

    def _handle(
        self, request: Request, route: Route | None, read: Callable[[int], bytes] | None
    ) -> Response:
        route = route or self.find(request.path)
        refused = self.check(route, request)
        if refused is not None or route is None:  # check() answers 404 for no route
            return refused or error(404, f"no tickq endpoint at {request.path!r}")
        if route.reads_body(request):
            from .body import BodyRefused, declared_length, read_all

            try:
                length = declared_length(request.header("content-length"), route.max_body)
                body = read_all(read, length, route.max_body) if read is not None else b""
            except BodyRefused as exc:
                return error(exc.status, exc.message)
            request = replace(request, body=body)
        return route.handler(request)

    def authorize(self, request: Request) -> Response | None:
        keys = signing_keys()
        if keys and request.header(QSTASH_HEADER) is not None:
            return self.authorize_qstash(request, keys)
        secrets = self.options.secrets()
        if keys and (not secrets or secrets[0][0] not in CURRENT_SOURCES):
            return error(
                401,
                "missing Upstash-Signature header: this tick accepts calls signed by QStash "
                f"(or 'Authorization: Bearer <{SECRET_ENV}>' once {SECRET_ENV} is set)",
                [("www-authenticate", "Bearer")],
            )
        if not secrets or secrets[0][0] not in CURRENT_SOURCES:
            # An old token alone is never enough: rotation means a new one is in place.
            previous = (
                f" (only {secrets[0][0]} is: a previous token alone is refused)" if secrets else ""
            )
            return error(
                503,
                f"the tick endpoint is disabled because {SECRET_ENV} is not set{previous}: "
                f"{SECRET_HINT}",
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

    def authorize_qstash(self, request: Request, keys: list[str]) -> Response | None:
        """Let in a call signed by QStash; its body and whether it was seen before are
        checked once the body is read (``refused_qstash_call``, in the tick)."""
        try:
            self.qstash_claims(request, keys)
        except Refused as exc:
            return error(401, f"QStash signature refused: {exc}")
        return None

    def qstash_claims(self, request: Request, keys: list[str]) -> Claims:
        import time

        token, host = request.header(QSTASH_HEADER) or "", request.header("host")
        return check_token(token, keys, host, request.path, request.query, time.time())

    def refused_qstash_call(self, request: Request) -> Response | None:
        """For a signed call: 401 when the body is not the one signed or the token was
        used before (remembered in the database until it expires), else None."""
        keys = signing_keys()
        if not keys or request.header(QSTASH_HEADER) is None:
            return None
        try:
            claims = self.qstash_claims(request, keys)
            check_body(claims, request.body)
            if not self.queue._store.remember_token(claims.jti, claims.expires_at):
                raise Refused(f"token {claims.jti!r} was used before (a replay)")
        except Refused as exc:
            return error(401, f"QStash signature refused: {exc}")
        return None

    def authorize_metrics(self, request: Request) -> Response | None:
        secrets = self.options.metrics_secrets()
        if not secrets:
            return error(503, f"metrics are off: set {METRICS_TOKEN_ENV} to turn them on")
        if problem := secret_problem(secrets[0][1]):
            return error(503, f"metrics are off: {secrets[0][0]} {problem}")
        if request.authorization is None or not token_matches(
            request.authorization, [v for _, v in secrets]
        ):
            return error(401, "missing or wrong bearer token", [("www-authenticate", "Bearer")])
        return None

    # -- handlers ------------------------------------------------------------------------
    def tick(self, request: Request) -> Response:
        try:
            refused = self.refused_qstash_call(request)
        except Exception as exc:
            return failure_response("the tick ran nothing", exc)
        if refused is not None:
            return refused
        try:
            params = parse_query(request.query, TICK_PARAMS)
            limit = parse_limit(params.get("limit"), self.options.limit, self.options.max_limit)
            strict = parse_flag("strict", params.get("strict"))
        except QueryError as exc:
            return error(400, str(exc))
        try:
            summary = self.queue.tick(limit=limit, time_budget=self.options.time_budget)
        except Exception as exc:
            response = failure_response("the tick ran nothing", exc)
            self._ping(ok=False, body=response.body)
            return response
        summary["limit"] = limit
        if strict:
            problems = strict_problems(summary, self.options.max_wait)
            summary["strict"] = {"ok": not problems, "problems": problems}
        response = json_response(500 if strict and problems else 200, summary)
        self._ping(ok=response.status == 200, body=response.body)
        return response

    def _ping(self, ok: bool, body: bytes) -> None:
        # Pinged before answering: a host that sleeps may freeze the process right after.
        url = heartbeat_url(self.options.heartbeat_url)
        if url:
            ping(url, ok, body)

    def health(self, request: Request) -> Response:
        # Public: it reads, never acts. Only a caller with the tick's token may have it
        # raise and deliver the overdue alert (an anonymous request must cause no work).
        alert = request.authorization is not None and self.authorize(request) is None
        try:
            report = self.queue.health(self.options.expected_interval, alert=alert)
        except Exception as exc:
            refused = failure_response("the health check failed", exc)
            message = json.loads(refused.body)["error"]
            report = {
                "ok": False,
                "status": "error",
                "error": type(exc).__name__,
                "message": message,
            }
            return json_response(503, report, refused.headers)
        return json_response(200 if report["ok"] else 503, report)

    def metrics(self, request: Request) -> Response:
        from ..exposition import CONTENT_TYPE, render

        try:
            body = render(self.queue).encode()
        except Exception as exc:
            return failure_response("no metrics", exc)
        return Response(200, body, content_type=CONTENT_TYPE)


def warn_at_start_up(message: str) -> None:
    """Log ``message`` as a warning on tickq's logger, and, when the app has configured no
    logging that would show it (tickq's logger has only a ``NullHandler``), on stderr too:
    a start-up problem must be seen by the person starting the app."""
    import logging
    import sys

    logger = logging.getLogger("tickq")
    logger.warning(message)
    if not _shown_by_logging(logger):
        print(f"tickq: warning: {message}", file=sys.stderr, flush=True)


def _shown_by_logging(logger: Any) -> bool:
    import logging

    current = logger
    while current is not None:
        for handler in current.handlers:
            if not isinstance(handler, logging.NullHandler) and handler.level <= logging.WARNING:
                return True
        current = current.parent if current.propagate else None
    return False


def head_or_get(request: Request, response: Response) -> Response:
    """A HEAD request gets the status and headers a GET would, ``Content-Length``
    included, and no body: whatever the answer (404, 405, 401, 503...). A server that
    passed a body on would have the client read it as the start of the next response on
    a kept-alive connection."""
    if request.method != "HEAD" or not response.body:
        return response
    return replace(response, body=b"", length=len(response.body))


def failure_response(what: str, exc: Exception) -> Response:
    """The answer when a handler raised; ``what`` opens its message. 503 when the database
    is down (with ``Retry-After``), not migrated or refused by configuration, else 500.
    The body says what to do, never where the database lives nor the exception's text:
    the log has those."""
    from ..errors import DatabaseUnavailable, SchemaMissing

    if isinstance(exc, DatabaseUnavailable):
        log.warning("tickq %s: %s", what, exc)
        retry = [("retry-after", str(RETRY_AFTER_SECONDS))]
        return error(503, f"{what} ({type(exc).__name__}): {database_trouble(exc.reason)}", retry)
    if isinstance(exc, SchemaMissing):
        log.error("tickq %s: %s", what, exc)
        return error(503, f"{what} ({type(exc).__name__}): {SCHEMA_MISSING}")
    if isinstance(exc, ConfigurationError):
        log.error("tickq %s: %s", what, exc)
        return error(503, f"{what} ({type(exc).__name__}): {MISCONFIGURED}")
    log.error("tickq %s", what, exc_info=exc)
    return error(500, f"{what} ({type(exc).__name__}); {SEE_LOG}")


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
