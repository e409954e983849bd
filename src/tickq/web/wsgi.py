"""tickq's routes as a plain WSGI app, for gunicorn, waitress or any WSGI server."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .http import Request
from .routing import Site, serve


class WsgiApp:
    """``q.wsgi_app()``: a WSGI application serving the routes of ``site`` (the tick
    endpoint, with the dashboard beside it when asked for)."""

    def __init__(self, site: Site) -> None:
        self.site = site

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        response = serve(self.site, Request.from_environ(environ), body_reader(environ))
        start_response(f"{response.status} {response.reason}", response.all_headers())
        return [response.body]


def body_reader(environ: dict[str, Any]) -> Callable[[int], bytes] | None:
    """``wsgi.input.read``, when reading it can't block forever: with a ``Content-Length``
    or a server that marks the input as terminated (chunked bodies); else None."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return None
    if environ.get("CONTENT_LENGTH") or environ.get("wsgi.input_terminated"):
        return stream.read  # type: ignore[no-any-return]
    return None
