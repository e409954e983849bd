"""tickq's routes as a plain ASGI app: run it with uvicorn or mount it in Starlette/FastAPI.

Method and token are checked on the event loop (cheap); the handlers (the tick, the health
check, the dashboard's pages) run in a worker thread, so the loop keeps serving while they
read the database or run jobs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import replace
from typing import Any

from .body import BodyRefused, declared_length, receive_all
from .http import Headers, Request, Response, error, head_or_get
from .routing import Route, Site

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class AsgiApp:
    """``q.asgi_app()``: an ASGI 3 application serving the routes of ``site`` (the tick
    endpoint, with the dashboard beside it when asked for)."""

    def __init__(self, site: Site) -> None:
        self.site = site

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
        elif scope["type"] == "http":
            request = request_from_scope(scope)
            route = self.site.find(request.path)
            if route is None:
                response = head_or_get(request, self.not_found(request, scope))
            else:
                response = await respond(route, request, receive)
            await send_response(send, response)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})

    def not_found(self, request: Request, scope: Scope) -> Response:
        response = self.site.not_found(request)
        if response.status == 404 and scope.get("app") not in (None, self):
            return hiding(request)
        return response


async def respond(route: Route, request: Request, receive: Receive) -> Response:
    """The answer of ``route`` to ``request``, its body read from ``receive`` when the
    route takes one; to HEAD, without a body."""
    refused = route.refusal(request)
    if refused is None and route.reads_body(request):
        try:
            declared_length(request.header("content-length"), route.max_body)
            request = replace(request, body=await receive_all(receive, route.max_body))
        except BodyRefused as exc:
            refused = route.refused_body(exc)
    if refused is None:
        return head_or_get(request, await asyncio.to_thread(route.handler, request))
    return head_or_get(request, refused)


def hiding(request: Request) -> Response:
    """The 404 of a path that is not tickq's, when tickq is mounted inside another app."""
    return error(
        404,
        f"no tickq endpoint at {request.path!r}: tickq's ASGI app is mounted in your app and "
        "answers only its own paths (mounted at '/' it hides your app's routes); in FastAPI "
        "use app.include_router(q.fastapi_router()), in Starlette mount it under a prefix",
    )


def request_from_scope(scope: Scope) -> Request:
    """The request of an ASGI HTTP scope; ``path`` below ``root_path`` (a Starlette Mount),
    which becomes ``base``."""
    path = scope.get("path") or "/"
    root = scope.get("root_path") or ""
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    headers = Headers([(bytes(k).decode("latin-1").lower(), bytes(v).decode("latin-1"))
                       for k, v in scope.get("headers", ())])  # fmt: skip
    return Request(
        method=str(scope.get("method", "GET")).upper(),
        path=path,
        base=root,
        query_string=bytes(scope.get("query_string", b"")).decode("latin-1"),
        headers=headers,
        scheme=str(scope.get("scheme") or "http"),
        client=str((scope.get("client") or ("", 0))[0]),
        native=scope,
    )


async def send_response(send: Send, response: Response) -> None:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
               for k, v in response.all_headers()]  # fmt: skip
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


async def serve_lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
