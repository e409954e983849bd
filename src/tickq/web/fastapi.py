"""tickq's routes as routes of a FastAPI app: ``app.include_router(q.fastapi_router())``.

Routes, not a mount: a sub-app mounted at ``/`` answers every path and hides the app's own
routes, while these match only tickq's paths (with any ``prefix=`` of ``include_router``).
"""

from __future__ import annotations

from typing import Any

from .asgi import Receive, Scope, Send, request_from_scope, respond, send_response
from .routing import Route


class RouteApp:
    """One tickq route as an ASGI app, answering as its own path wherever the router puts
    it (links and redirects of the dashboard follow ``include_router``'s ``prefix=``)."""

    def __init__(self, route: Route) -> None:
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rest = (scope.get("path_params") or {}).get("rest")
        path = self.route.path if rest is None else f"{self.route.path}/{rest}"
        request = request_from_scope(scope).mounted(path)
        await send_response(send, await respond(self.route, request, receive))


def router(routes: list[Route]) -> Any:
    """A ``fastapi.APIRouter`` with one route per tickq route (two for the dashboard's:
    its prefix and every path below it), kept out of the OpenAPI schema; every method
    reaches the tick and webhook routes, so a wrong one gets tickq's JSON 405."""
    from fastapi import APIRouter
    from starlette.routing import Route as StarletteRoute

    api = APIRouter()
    for route in routes:
        app, name = RouteApp(route), f"tickq_{route.name}"
        paths = [route.path, route.path + "/{rest:path}"] if route.below else [route.path]
        methods = list(route.router_methods) or None
        for path in paths:
            api.routes.append(StarletteRoute(path, app, methods=methods, name=name,
                                             include_in_schema=False))  # fmt: skip
    return api
