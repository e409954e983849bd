"""The endpoints as routes of a FastAPI app: ``app.include_router(q.fastapi_router())``.

Routes, not a mount: a sub-app mounted at ``/`` answers every path and hides the app's own
routes, while these match only tickq's paths (with any ``prefix=`` of ``include_router``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .asgi import AsgiApp, Receive, Scope, Send, request_from_scope, send_response
from .endpoint import Endpoint


class RouteApp:
    """One tickq route as an ASGI app, answering as ``path`` wherever the router puts it."""

    def __init__(self, app: AsgiApp, path: str) -> None:
        self.app, self.path = app, path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = replace(request_from_scope(scope), path=self.path)
        await send_response(send, await self.app.respond(request, receive))


def router(endpoint: Endpoint) -> Any:
    """A ``fastapi.APIRouter`` with one route per endpoint route, every method let through
    so a wrong one gets tickq's JSON 405; kept out of the OpenAPI schema."""
    from fastapi import APIRouter
    from starlette.routing import Route

    api = APIRouter()
    app = AsgiApp(endpoint)
    for route in endpoint.all_routes():
        handler, name = RouteApp(app, route.path), f"tickq_{route.name}"
        api.routes.append(Route(route.path, handler, name=name, include_in_schema=False))
    return api
