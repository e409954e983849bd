"""The endpoints as a Flask blueprint: ``app.register_blueprint(q.flask_blueprint())``."""

from __future__ import annotations

from typing import Any

from .endpoint import Endpoint, Request, Route

# Every method reaches the view, so a wrong one gets tickq's JSON 405, not Flask's HTML.
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def blueprint(endpoint: Endpoint, name: str = "tickq") -> Any:
    """A ``flask.Blueprint`` with one rule per route of ``endpoint``."""
    from flask import Blueprint

    bp = Blueprint(name, __name__)
    for route in endpoint.all_routes():
        bp.add_url_rule(
            route.path,
            endpoint=route.name,
            view_func=_view(endpoint, route),
            methods=METHODS,
            provide_automatic_options=False,
        )
    return bp


def _view(endpoint: Endpoint, route: Route) -> Any:
    from flask import Response as FlaskResponse
    from flask import request

    def view() -> FlaskResponse:
        response = endpoint.handle(
            Request.from_environ(request.environ), route, request.stream.read
        )
        out = FlaskResponse(response.body, status=response.status, headers=response.all_headers())
        out.content_length = response.content_length  # the GET's, also when HEAD has no body
        return out

    view.__name__ = f"tickq_{route.name}"
    return view
