"""The tick, health and metrics endpoints, written once for every adapter (ASGI, WSGI,
Flask, Django, FastAPI: see ``routing``). The route table is the one place a new endpoint
goes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigurationError
from ..heartbeat import heartbeat_url, ping
from ..logger import library_logger
from ..tick import strict_problems
from .http import (
    JSON_HEADERS,
    Request,
    Response,
    error,
    extra_headers,
    head_or_get,
    json_response,
)
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
from .routing import Route, answer, serve

__all__ = [  # the request, response and route moved out; importable here as before
    "TICK_MAX_BODY", "Endpoint", "EndpointOptions", "Request", "Response", "Route", "error",
    "failure_response", "head_or_get", "json_response", "token_matches", "warn_at_start_up",
]  # fmt: skip

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
                guard=self.authorize,
                max_body=TICK_MAX_BODY,
                body_header=QSTASH_HEADER,
                method_hint=" (GET too with allow_get=True)",
            ),
            Route("health", self.options.health_path, ("GET", "HEAD"), self.health),
        ]
        if self.options.metrics:
            path, methods = self.options.metrics_path, ("GET", "HEAD")
            guard = self.authorize_metrics
            self.routes.append(Route("metrics", path, methods, self.metrics, guard))
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

    def not_found(self, request: Request) -> Response:
        return error(404, f"no tickq endpoint at {request.path!r}")

    def handle(
        self,
        request: Request,
        route: Route | None = None,
        read: Callable[[int], bytes] | None = None,
    ) -> Response:
        """Check and run ``request`` here (blocking), on ``route`` or the one at its path;
        ``read(n)`` reads the body, for routes that take one. The answer to HEAD has no
        body."""
        return serve(self, request, read) if route is None else answer(route, request, read)

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
        return check_token(token, keys, host, request.path, request.query_string,
                           time.time())  # fmt: skip

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
            params = parse_query(request.query_string, TICK_PARAMS)
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
            return json_response(503, report, extra_headers(refused))
        return json_response(200 if report["ok"] else 503, report)

    def metrics(self, request: Request) -> Response:
        from ..exposition import CONTENT_TYPE, render

        try:
            body = render(self.queue).encode()
        except Exception as exc:
            return failure_response("no metrics", exc)
        return Response(200, body, [("content-type", CONTENT_TYPE), JSON_HEADERS[1]])


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
