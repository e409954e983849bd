"""Routes, and how one request reaches one: the same steps for every adapter.

An adapter finds the route (``Site.find``), asks it whether the request may reach its
handler (``Route.refusal``: method and token, cheap, no I/O), reads the body if the route
takes one, within its limit, runs the handler (database work: off the event loop), and
sends the answer, without a body to HEAD.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from .body import BodyRefused, declared_length, read_all
from .http import Request, Response, error, head_or_get

Handler = Callable[[Request], Response]
Guard = Callable[[Request], "Response | None"]


@dataclass(frozen=True)
class Route:
    """One endpoint: ``methods`` are the ones its handler takes (empty: any, the handler
    decides); ``guard`` refuses a request before the handler runs (a missing or wrong
    token); ``max_body`` is how many bytes of body the handler reads at most (0: it reads
    none); with ``body_header``, only a request carrying that header has its body read
    (the tick: QStash's signed calls), with ``body_methods`` only one of those methods.
    ``below``: the route answers its path and every path under it (the dashboard);
    ``router_methods``: the methods a framework's router lets through to it (empty: every
    one, so a wrong one gets tickq's JSON 405, not the framework's page)."""

    name: str
    path: str
    methods: tuple[str, ...]
    handler: Handler
    guard: Guard | None = None
    max_body: int = 0
    body_header: str | None = None
    body_methods: tuple[str, ...] = ()
    method_hint: str = ""
    below: bool = False
    router_methods: tuple[str, ...] = ()
    too_large_hint: str = " (max_body= of @q.webhook raises it)"

    @property
    def protected(self) -> bool:
        """Whether a guard (a bearer token) stands before the handler."""
        return self.guard is not None

    def matches(self, path: str) -> bool:
        if not self.below:
            return path == self.path
        return path == self.path or path.startswith(self.path + "/")

    def reads_body(self, request: Request) -> bool:
        """Whether the handler takes ``request``'s body."""
        if not self.max_body or (self.body_methods and request.method not in self.body_methods):
            return False
        return self.body_header is None or request.header(self.body_header) is not None

    def refusal(self, request: Request) -> Response | None:
        """The answer when ``request`` must not reach the handler; cheap, no I/O."""
        if self.methods and request.method not in self.methods:
            allowed = ", ".join(self.methods)
            return error(
                405,
                f"{request.method} is not allowed here; use {allowed}{self.method_hint}",
                [("allow", allowed)],
            )
        return self.guard(request) if self.guard is not None else None

    def refused_body(self, exc: BodyRefused) -> Response:
        return error(exc.status, exc.message + (self.too_large_hint if exc.status == 413 else ""))


class Site(Protocol):
    """What an adapter serves: routes found by path, and the answer where none is."""

    def find(self, path: str) -> Route | None: ...
    def not_found(self, request: Request) -> Response: ...
    def all_routes(self) -> list[Route]: ...


class Combined:
    """Several sites as one: the first that has a route for a path answers it; the last
    answers where none has (``q.asgi_app(dashboard=True)``: the dashboard, then the tick
    endpoint)."""

    def __init__(self, *sites: Site) -> None:
        self.sites = sites

    def find(self, path: str) -> Route | None:
        return next((r for site in self.sites if (r := site.find(path)) is not None), None)

    def not_found(self, request: Request) -> Response:
        return self.sites[-1].not_found(request)

    def all_routes(self) -> list[Route]:
        return [route for site in self.sites for route in site.all_routes()]


def answer(route: Route, request: Request, read: Callable[[int], bytes] | None) -> Response:
    """Run ``request`` on ``route`` (blocking), reading its body with ``read(n)`` when the
    route takes one; the answer to HEAD has no body."""
    refused = route.refusal(request)
    if refused is None and route.reads_body(request):
        try:
            length = declared_length(request.header("content-length"), route.max_body)
            body = read_all(read, length, route.max_body) if read is not None else b""
            request = replace(request, body=body)
        except BodyRefused as exc:
            refused = route.refused_body(exc)
    return head_or_get(request, route.handler(request) if refused is None else refused)


def serve(site: Site, request: Request, read: Callable[[int], bytes] | None) -> Response:
    """The answer of ``site`` to ``request`` (blocking)."""
    route = site.find(request.path)
    if route is None:
        return head_or_get(request, site.not_found(request))
    return answer(route, request, read)
