"""tickq's routes as a Flask blueprint: ``app.register_blueprint(q.flask_blueprint())``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .http import Request
from .routing import Route, answer

# Every method reaches the view, so a wrong one gets tickq's JSON 405, not Flask's HTML.
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def blueprint(routes: list[Route], name: str = "tickq") -> Any:
    """A ``flask.Blueprint`` with one rule per route (two for one that answers the paths
    below its own, the dashboard: its index and its pages)."""
    from flask import Blueprint

    bp = Blueprint(name, __name__)
    for route in routes:
        view = _view(route)
        if route.below:
            methods = list(route.router_methods)
            bp.add_url_rule(route.path + "/", f"{route.name}_index", view, methods=methods)
            bp.add_url_rule(route.path + "/<path:rest>", f"{route.name}_page", view,
                            methods=methods)  # fmt: skip
        else:
            bp.add_url_rule(route.path, endpoint=route.name, view_func=view, methods=METHODS,
                            provide_automatic_options=False)  # fmt: skip
    return bp


def _view(route: Route) -> Any:
    from flask import Response as FlaskResponse
    from flask import request

    def view(rest: str | None = None) -> FlaskResponse:
        tickq_request = Request.from_environ(request.environ, request)
        if route.below:
            at = replace(tickq_request, base=request.script_root, path=request.path)
            tickq_request = at.mounted(f"{route.path}/{rest or ''}")
        response = answer(route, tickq_request, request.stream.read)
        out = FlaskResponse(response.body, status=response.status, headers=response.headers)
        out.content_length = response.content_length  # the GET's, also when HEAD has no body
        return out

    view.__name__ = f"tickq_{route.name}"
    return view
