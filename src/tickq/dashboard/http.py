"""The dashboard's request and response, whatever server or framework carries them."""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl

MAX_BODY = 64 * 1024
MAX_FIELDS = 50


@dataclass
class Request:
    """One request to the dashboard.

    ``path`` is relative to the dashboard (``/``, ``/jobs/7``); ``base`` is where the
    dashboard is mounted as the browser sees it (``/tickq``). ``native`` is the framework's
    own request (Django ``HttpRequest``, Flask ``request``, the ASGI scope or WSGI environ),
    for an ``auth`` hook to ask the host app who is logged in.
    """

    method: str
    path: str
    base: str
    query: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    form: dict[str, str] = field(default_factory=dict)
    https: bool = False
    client: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    native: Any = None
    problem: str = ""
    """Why the request is refused before anything else (a 400), e.g. too many fields."""

    def url(self, path: str = "/") -> str:
        """The browser-facing URL of a dashboard path."""
        return self.base + path


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return HTTPStatus(self.status).phrase

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


def parse_query(text: str) -> dict[str, str]:
    """The first value of each field; blank values are dropped (an empty filter is none).
    More than ``MAX_FIELDS`` fields is a ``ValueError``."""
    out: dict[str, str] = {}
    for key, value in parse_qsl(text, keep_blank_values=False, max_num_fields=MAX_FIELDS):
        out.setdefault(key, value)
    return out


def query_of(text: str) -> tuple[dict[str, str], str]:
    """The query's fields, and why it is refused ("" when it is not)."""
    try:
        return parse_query(text), ""
    except ValueError:
        return {}, f"too many query parameters: at most {MAX_FIELDS}"


def parse_form(body: bytes, content_type: str) -> dict[str, str]:
    if not content_type.lower().startswith("application/x-www-form-urlencoded"):
        return {}
    try:
        return parse_query(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}


def parse_cookies(header: str) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed Cookie header is no cookies, not an error page
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def from_environ(environ: dict[str, Any], base: str, path: str, native: Any = None) -> Request:
    """A ``Request`` from a WSGI environ (WSGI, Flask and Django all have one)."""
    headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items()
               if k.startswith("HTTP_")}  # fmt: skip
    content_type = str(environ.get("CONTENT_TYPE") or "")
    headers["content-type"] = content_type
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    query, problem = query_of(str(environ.get("QUERY_STRING") or ""))
    body = b""
    if method == "POST":
        try:
            length = min(int(environ.get("CONTENT_LENGTH") or 0), MAX_BODY)
        except ValueError:
            length = 0
        body = environ["wsgi.input"].read(length) if length > 0 else b""
    return Request(
        method=method, path=path or "/", base=base,
        query=query, problem=problem,
        cookies=parse_cookies(headers.get("cookie", "")),
        form=parse_form(body, content_type),
        https=environ.get("wsgi.url_scheme") == "https" or _forwarded_https(headers),
        client=str(environ.get("REMOTE_ADDR") or ""), headers=headers,
        native=environ if native is None else native,
    )  # fmt: skip


def _forwarded_https(headers: dict[str, str]) -> bool:
    # Trusting it is harmless: a forged value only makes the cookie Secure.
    return headers.get("x-forwarded-proto", "").split(",")[0].strip().lower() == "https"


def from_scope(scope: dict[str, Any], base: str, path: str, body: bytes) -> Request:
    """A ``Request`` from an ASGI scope and the body already read."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1")
               for k, v in scope.get("headers", ())}  # fmt: skip
    client = scope.get("client") or ("", 0)
    query, problem = query_of(bytes(scope.get("query_string", b"")).decode("latin-1"))
    return Request(
        method=str(scope.get("method", "GET")).upper(), path=path or "/", base=base,
        query=query, problem=problem,
        cookies=parse_cookies(headers.get("cookie", "")),
        form=parse_form(body, headers.get("content-type", "")),
        https=scope.get("scheme") == "https" or _forwarded_https(headers),
        client=str(client[0]), headers=headers, native=scope,
    )  # fmt: skip
