"""The endpoints as a plain WSGI app, for gunicorn, waitress or any WSGI server."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .endpoint import Endpoint, Request


class WsgiApp:
    """``q.wsgi_app()``: a WSGI application serving the tick and health endpoints."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        response = self.endpoint.handle(Request.from_environ(environ))
        start_response(f"{response.status} {response.reason}", response.all_headers())
        return [response.body]
