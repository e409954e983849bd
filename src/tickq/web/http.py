"""The one HTTP request and response every tickq route speaks (tick, health, metrics,
webhooks, dashboard), whatever server or framework carries them; the adapters in this
package (ASGI, WSGI, Flask, Django, FastAPI) translate to and from them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from http import HTTPStatus
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl

MAX_FIELDS = 50
"""The most fields a dashboard query or form may have."""
JSON_HEADERS = (("content-type", "application/json"), ("cache-control", "no-store"))


class Headers(Mapping[str, str]):
    """A request's headers, names in lower case, in the order received.

    As a mapping it holds the last value of a repeated header (the one the nearest proxy
    added), as a dict built from ``pairs`` would; ``first(name)`` is the first value, the
    one a signature check reads.
    """

    __slots__ = ("_last", "pairs")

    def __init__(self, pairs: Sequence[tuple[str, str]] = ()) -> None:
        self.pairs = tuple(pairs)
        self._last = dict(self.pairs)

    def __getitem__(self, name: str) -> str:
        return self._last[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._last)

    def __len__(self) -> int:
        return len(self._last)

    def first(self, name: str) -> str | None:
        """The first value of header ``name``, or None."""
        return next(iter(self.every(name)), None)

    def every(self, name: str) -> list[str]:
        """Every value of header ``name``, in order."""
        name = name.lower()
        return [value for key, value in self.pairs if key == name]

    def __repr__(self) -> str:
        return f"Headers({list(self.pairs)!r})"


@dataclass(frozen=True)
class Request:
    """One HTTP request, as every route sees it.

    ``path`` is relative to where the app is mounted, and ``base`` is that mount point as
    the browser sees it (the dashboard gets ``path`` relative to itself, ``/jobs/7``, and
    ``base`` its own URL, ``/tickq``). ``native`` is the framework's own request (Django's
    ``HttpRequest``, Flask's ``request``, the ASGI scope or the WSGI environ), for a
    dashboard ``auth`` hook to ask the host app who is logged in. ``body`` is read only for
    routes that take one, within their limit.
    """

    method: str
    path: str
    base: str = ""
    query_string: str = ""
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""
    scheme: str = "http"
    client: str = ""
    native: Any = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, Any], native: Any = None) -> Request:
        """From a WSGI environ (also Flask's ``request.environ``, Django's ``request.META``);
        ``native`` is the framework's request (default: the environ)."""
        return cls(
            method=str(environ.get("REQUEST_METHOD", "GET")).upper(),
            path=str(environ.get("PATH_INFO", "") or "/"),
            base=str(environ.get("SCRIPT_NAME") or ""),
            query_string=str(environ.get("QUERY_STRING", "")),
            headers=headers_of(environ),
            scheme=str(environ.get("wsgi.url_scheme") or "http"),
            client=str(environ.get("REMOTE_ADDR") or ""),
            native=environ if native is None else native,
        )

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower case), or None."""
        return self.headers.first(name)

    def url(self, path: str = "/") -> str:
        """The browser-facing URL of ``path``."""
        return self.base + path

    @cached_property
    def authorization(self) -> bytes | None:
        """The raw ``Authorization`` header; None when absent, b"" when unusable (sent
        twice, or not what a server could have received)."""
        values = self.headers.every("authorization")
        if len(values) != 1:
            return b"" if values else None
        try:
            return values[0].encode("latin-1")
        except UnicodeEncodeError:
            return b""

    @cached_property
    def https(self) -> bool:
        # Trusting X-Forwarded-Proto is harmless: a forged value only makes a cookie Secure.
        forwarded = self.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
        return self.scheme == "https" or forwarded == "https"

    @cached_property
    def _query(self) -> tuple[dict[str, str], str]:
        try:
            return parse_fields(self.query_string), ""
        except ValueError:
            return {}, f"too many query parameters: at most {MAX_FIELDS}"

    @property
    def query(self) -> dict[str, str]:
        """The first value of each query field; blank values are dropped (an empty filter
        is none)."""
        return self._query[0]

    @property
    def problem(self) -> str:
        """Why the request is refused before anything else (a 400), e.g. too many fields."""
        return self._query[1]

    @cached_property
    def cookies(self) -> dict[str, str]:
        return parse_cookies(self.headers.get("cookie", ""))

    @cached_property
    def form(self) -> dict[str, str]:
        """The fields of a URL-encoded form body (empty for any other body)."""
        if (
            not self.headers.get("content-type", "")
            .lower()
            .startswith("application/x-www-form-urlencoded")
        ):
            return {}
        try:
            return parse_fields(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return {}

    def mounted(self, path: str) -> Request:
        """This request answered at ``path``, its last part: ``base`` gets the rest (a
        framework router matched ``path`` below a prefix of its own)."""
        full = self.base + self.path
        base = full[: len(full) - len(path)] if full.endswith(path) else self.base
        return replace(self, path=path, base=base)


def parse_fields(text: str) -> dict[str, str]:
    """The first value of each field; blank values are dropped. More than ``MAX_FIELDS``
    fields is a ``ValueError``."""
    out: dict[str, str] = {}
    for key, value in parse_qsl(text, keep_blank_values=False, max_num_fields=MAX_FIELDS):
        out.setdefault(key, value)
    return out


def parse_cookies(header: str) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed Cookie header is no cookies, not an error page
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


@dataclass
class Response:
    """One HTTP answer: ``headers`` are all but ``Content-Length``, which is the body's
    length, or ``length`` when that is not the body's (the answer to HEAD)."""

    status: int = 200
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    length: int | None = None

    @property
    def reason(self) -> str:
        return HTTPStatus(self.status).phrase

    @property
    def content_length(self) -> int:
        return len(self.body) if self.length is None else self.length

    @property
    def content_type(self) -> str | None:
        return self.header("content-type")

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def all_headers(self) -> list[tuple[str, str]]:
        """Every header to send, ``Content-Length`` included."""
        return [*self.headers, ("content-length", str(self.content_length))]


def json_response(status: int, data: Any, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return Response(status, json.dumps(data).encode(), [*JSON_HEADERS, *headers])


def error(status: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return json_response(status, {"error": message}, headers)


def extra_headers(response: Response) -> list[tuple[str, str]]:
    """The headers of a JSON ``response`` beyond its content type and cache control."""
    return [h for h in response.headers if h not in JSON_HEADERS]


def text_response(status: int, text: str) -> Response:
    return Response(status, text.encode(), [("Content-Type", "text/plain; charset=utf-8")])


def redirect(location: str) -> Response:
    return Response(303, b"", [("Location", location), ("Cache-Control", "no-store")])


def head_or_get(request: Request, response: Response) -> Response:
    """A HEAD request gets the status and headers a GET would, ``Content-Length``
    included, and no body: whatever the answer (404, 405, 401, 503...). A server that
    passed a body on would have the client read it as the start of the next response on
    a kept-alive connection."""
    if request.method != "HEAD" or not response.body:
        return response
    return replace(response, body=b"", length=len(response.body))


def headers_of(environ: Mapping[str, Any]) -> Headers:
    """The headers of a WSGI environ (``HTTP_X_HUB_SIGNATURE_256`` -> x-hub-signature-256)."""
    found = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            found.append((key[5:].replace("_", "-").lower(), str(value)))
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            found.append((key.replace("_", "-").lower(), str(value)))
    return Headers(found)
