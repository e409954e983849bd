"""The endpoints as a plain ASGI app: run it with uvicorn or mount it in Starlette/FastAPI.

Method and token are checked on the event loop (cheap); the tick and the health check run
in a worker thread, so the loop keeps serving while jobs run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import replace
from typing import Any

from .body import BodyRefused, declared_length, receive_all
from .endpoint import Endpoint, Request, Response, error, head_or_get

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class AsgiApp:
    """``q.asgi_app()``: an ASGI 3 application serving the tick and health endpoints."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
        elif scope["type"] == "http":
            request = request_from_scope(scope)
            response = await self.respond(request, receive)
            if response.status == 404 and scope.get("app") not in (None, self):
                response = head_or_get(request, hiding(request))
            await send_response(send, response)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})

    async def respond(self, request: Request, receive: Receive | None = None) -> Response:
        """The answer to ``request``; to HEAD, without a body."""
        return head_or_get(request, await self._respond(request, receive))

    async def _respond(self, request: Request, receive: Receive | None) -> Response:
        route = self.endpoint.find(request.path)
        refused = self.endpoint.check(route, request)
        if refused is not None or route is None:
            return refused  # type: ignore[return-value]
        if route.reads_body(request):
            try:
                declared_length(request.header("content-length"), route.max_body)
                body = await receive_all(receive, route.max_body) if receive else b""
            except BodyRefused as exc:
                return error(exc.status, exc.message)
            request = replace(request, body=body)
        return await asyncio.to_thread(route.handler, request)


def hiding(request: Request) -> Response:
    """The 404 of a path that is not tickq's, when tickq is mounted inside another app."""
    return error(
        404,
        f"no tickq endpoint at {request.path!r}: tickq's ASGI app is mounted in your app and "
        "answers only its own paths (mounted at '/' it hides your app's routes); in FastAPI "
        "use app.include_router(q.fastapi_router()), in Starlette mount it under a prefix",
    )


def request_from_scope(scope: Scope) -> Request:
    path = scope.get("path") or "/"
    root = scope.get("root_path") or ""
    if root and path.startswith(root):  # mounted under a prefix (Starlette's Mount)
        path = path[len(root) :] or "/"
    raw = scope.get("headers", ())
    auth = [value for name, value in raw if name.lower() == b"authorization"]
    return Request(
        method=str(scope.get("method", "GET")).upper(),
        path=path,
        query=bytes(scope.get("query_string", b"")).decode("latin-1"),
        authorization=None if not auth else (auth[0] if len(auth) == 1 else b""),
        headers=tuple((bytes(k).decode("latin-1").lower(), bytes(v).decode("latin-1"))
                      for k, v in raw),
    )  # fmt: skip


async def send_response(send: Send, response: Response) -> None:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.all_headers()]
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
