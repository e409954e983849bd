"""The dashboard served by ASGI, WSGI, Flask and Django, alone or next to the tick endpoint.

Pages read the database, so the ASGI adapter runs them in a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .app import Dashboard, redirect
from .http import MAX_BODY, Response, from_environ, from_scope

METHODS = ["GET", "HEAD", "POST"]


def split(prefix: str, path: str) -> str | None:
    """The dashboard path of ``path`` (``/tickq/jobs`` -> ``/jobs``), or None if outside."""
    if path == prefix:
        return ""
    if path.startswith(prefix + "/"):
        return path[len(prefix) :]
    return None


class DashboardAsgi:
    """An ASGI app: the dashboard under its prefix, everything else to ``inner`` (the tick
    endpoint), or, alone, a redirect from ``/`` to the dashboard."""

    def __init__(self, dashboard: Dashboard, inner: Any) -> None:
        self.dashboard, self.inner = dashboard, inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        root = scope.get("root_path") or ""
        path = scope.get("path") or "/"
        local = path[len(root) :] if root and path.startswith(root) else path
        sub = split(self.dashboard.prefix, local) if scope["type"] == "http" else None
        if sub is None and self.inner is not None:
            await self.inner(scope, receive, send)
        elif scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
        else:
            base = root + self.dashboard.prefix
            response = await self.respond(scope, receive, base, sub)
            await _send(send, response, scope.get("method") == "HEAD")

    async def respond(self, scope: dict[str, Any], receive: Any, base: str,
                      sub: str | None) -> Response:  # fmt: skip
        if sub is None:
            return redirect(base + "/") if scope.get("path") in ("/", "") else _not_found()
        if sub == "":
            return redirect(base + "/")
        body = await _read_body(receive) if scope.get("method") == "POST" else b""
        request = from_scope(scope, base, sub, body)
        return await asyncio.to_thread(self.dashboard.handle, request)


async def _read_body(receive: Any) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= MAX_BODY:
            chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send(send: Any, response: Response, head: bool) -> None:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in with_length(response)]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else response.body})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _not_found() -> Response:
    return Response(404, b"not found", [("Content-Type", "text/plain; charset=utf-8")])


class DashboardWsgi:
    """A WSGI app: the dashboard under its prefix, everything else to ``inner``."""

    def __init__(self, dashboard: Dashboard, inner: Any) -> None:
        self.dashboard, self.inner = dashboard, inner

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = str(environ.get("PATH_INFO") or "/")
        sub = split(self.dashboard.prefix, path)
        if sub is None and self.inner is not None:
            return self.inner(environ, start_response)
        base = str(environ.get("SCRIPT_NAME") or "") + self.dashboard.prefix
        if sub is None:
            response = redirect(base + "/") if path == "/" else _not_found()
        elif sub == "":
            response = redirect(base + "/")
        else:
            response = self.dashboard.handle(from_environ(environ, base, sub))
        start_response(f"{response.status} {response.reason}", with_length(response))
        return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else response.body]


def with_length(response: Response) -> list[tuple[str, str]]:
    """The headers and the body's ``Content-Length``: the same for GET and HEAD, which
    sends no body (a body after a HEAD answer would open the next response)."""
    return [*response.headers, ("Content-Length", str(len(response.body)))]


class DashboardRoute:
    """The dashboard as the endpoint of a Starlette route (``q.fastapi_router(dashboard=…)``):
    links and redirects are built from the path the router matched, so ``include_router``'s
    ``prefix=`` moves the dashboard with the tick endpoint."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.asgi = DashboardAsgi(dashboard, None)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        rest = (scope.get("path_params") or {}).get("rest")
        sub = "" if rest is None else "/" + str(rest)
        path = str(scope.get("path") or "/")
        base = path[: len(path) - len(sub)] if sub and path.endswith(sub) else path.rstrip("/")
        response = await self.asgi.respond(scope, receive, base, sub)
        await _send(send, response, scope.get("method") == "HEAD")


def add_starlette_routes(routes: list[Any], dashboard: Dashboard) -> None:
    """Append the dashboard's routes (its prefix, and everything below it) to ``routes``, a
    ``fastapi.APIRouter``'s or a Starlette app's list."""
    from starlette.routing import Route

    endpoint = DashboardRoute(dashboard)
    for path in (dashboard.prefix, dashboard.prefix + "/{rest:path}"):
        routes.append(Route(path, endpoint, methods=METHODS, name="tickq_dashboard",
                            include_in_schema=False))  # fmt: skip


def flask_blueprint(dashboard: Dashboard, name: str = "tickq_dashboard") -> Any:
    """A ``flask.Blueprint`` serving the dashboard under its prefix."""
    from flask import Blueprint

    return add_flask_rules(Blueprint(name, __name__), dashboard)


def add_flask_rules(bp: Any, dashboard: Dashboard) -> Any:
    """Add the dashboard's rules to a ``flask.Blueprint`` (the tick endpoint's, say)."""
    from flask import Response as FlaskResponse
    from flask import request

    def view(rest: str = "") -> FlaskResponse:
        sub = "/" + rest
        full = request.script_root + request.path
        base = full[: len(full) - len(sub)] if full.endswith(sub) else full.rstrip("/")
        response = dashboard.handle(from_environ(request.environ, base, sub, request))
        return FlaskResponse(response.body, status=response.status, headers=response.headers)

    bp.add_url_rule(dashboard.prefix + "/", "dashboard_index", view, methods=METHODS)
    bp.add_url_rule(dashboard.prefix + "/<path:rest>", "dashboard_page", view, methods=METHODS)
    return bp


def django_urls(dashboard: Dashboard) -> list[Any]:
    """``django.urls`` patterns serving the dashboard under its prefix (CSRF is the
    dashboard's own, so the views are exempt from Django's)."""
    from django.urls import re_path
    from django.views.decorators.csrf import csrf_exempt

    pattern = "^" + dashboard.prefix.lstrip("/") + "/(?P<rest>.*)$"
    return [re_path(pattern, csrf_exempt(django_view(dashboard)), name="tickq-dashboard")]


def django_view(dashboard: Dashboard) -> Any:
    """A Django view answering ``rest`` (the path below the dashboard) from ``dashboard``."""
    from django.http import HttpRequest, HttpResponse

    def view(request: HttpRequest, rest: str = "") -> HttpResponse:
        sub = "/" + rest
        base = request.path[: len(request.path) - len(sub)]
        environ = dict(request.META)
        environ["wsgi.input"] = _BodyReader(request.body)
        response = dashboard.handle(from_environ(environ, base, sub, request))
        head = request.method == "HEAD"  # Django sends whatever body it is given
        out = HttpResponse(b"" if head else response.body, status=response.status)
        for key, value in with_length(response):
            if key.lower() == "set-cookie":
                _set_cookie(out, value)
            else:
                out[key] = value
        return out

    return view


class _BodyReader:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def read(self, size: int = -1) -> bytes:
        return self.body if size < 0 else self.body[:size]


def _set_cookie(out: Any, header: str) -> None:
    """Django keeps cookies apart from headers: one Set-Cookie each, attributes kept."""
    from http.cookies import SimpleCookie

    jar: SimpleCookie = SimpleCookie()
    jar.load(header)
    for name, morsel in jar.items():
        out.cookies[name] = morsel.value
        for attr in ("path", "max-age", "samesite", "httponly", "secure"):
            if morsel[attr]:
                out.cookies[name][attr] = morsel[attr]
