"""Schemathesis against the OpenAPI description of the tick, health and metrics endpoints,
over real sockets (uvicorn for the ASGI app, wsgiref for the WSGI app), plus hand-written
header cases sent byte for byte. Bounded and derandomised: the same cases on every run.

What must hold: every answer is one the description documents, no 5xx but a deliberate
503, nothing runs without the token, and the valid token always gets through."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from test_web import serving
from tickq import Queue
from tickq.web import EndpointOptions
from tickq.web.openapi import describe

SECRET = "fuzz-s3cret-token-0123456789abcdef"
METRICS_TOKEN = "fuzz-metrics-token-0123456789abc"
AUTH = {"Authorization": f"Bearer {SECRET}"}
OPTIONS: dict[str, Any] = {
    "secret": SECRET, "allow_get": True, "limit": 5, "max_limit": 20, "metrics": True,
    "metrics_token": METRICS_TOKEN, "time_budget": 5.0,
}  # fmt: skip
DESCRIPTION = describe(EndpointOptions(**OPTIONS))
schema = schemathesis.openapi.from_dict(DESCRIPTION)
FUZZ = settings(
    max_examples=30, derandomize=True, deadline=None, database=None,
    suppress_health_check=list(HealthCheck),
)  # fmt: skip


@contextmanager
def wsgiref_serving(app: Any) -> Iterator[str]:
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    class Threaded(WSGIServer):
        daemon_threads = True

    server = make_server("127.0.0.1", 0, app, server_class=Threaded, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def fuzz_queue(folder: Path) -> Queue:
    q = Queue(f"sqlite:///{folder / 'fuzz.db'}")
    q.migrate()

    @q.job()
    def noop(n: int = 0) -> None: ...

    q.enqueue_many([("noop", {"n": n}) for n in range(50)])
    # One tick on record, so health's answer doesn't depend on which generated case ran
    # first (with none, a token-carrying health check rightly answers 503 no_tick_yet).
    q.tick(limit=0)
    return q


@pytest.fixture(scope="module", params=["asgi-uvicorn", "wsgi-wsgiref"])
def base_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    q = fuzz_queue(tmp_path_factory.mktemp(request.param))
    if request.param == "asgi-uvicorn":
        server = serving(q.asgi_app(**OPTIONS))
    else:
        server = wsgiref_serving(q.wsgi_app(**OPTIONS))
    with server as base:
        yield base
    q.close()


def deliberate(response: Any) -> bool:
    """A 5xx is allowed only as a documented 503, or a strict tick's 500 with its problems."""
    status = response.status_code
    if status < 500:
        return True
    body = json.loads(response.content or b"{}") if response.content else {}
    if status == 503:
        return response.request.method == "HEAD" or bool(body.get("error") or body.get("status"))
    return status == 500 and body.get("strict", {}).get("ok") is False


@schema.parametrize()
@FUZZ
def test_generated_requests_get_documented_answers(case: Any, base_url: str) -> None:
    response = case.call(base_url=base_url, timeout=10)
    case.validate_response(response, excluded_checks=[not_a_server_error])
    assert deliberate(response), (response.status_code, response.text)
    if case.operation.path == OPTIONS.get("path", "/api/cron/tick"):
        assert response.status_code in (400, 401, 405), "no token, no tick"


@schema.parametrize()
@FUZZ
def test_generated_requests_with_the_token_never_fail_the_server(case: Any, base_url: str) -> None:
    token = METRICS_TOKEN if case.operation.path == "/metrics" else SECRET
    response = case.call(
        base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    case.validate_response(response, excluded_checks=[not_a_server_error])
    assert deliberate(response), (response.status_code, response.text)
    if response.request.headers.get("Authorization") == f"Bearer {token}":
        # (the coverage phase also sends this case without the header, rightly refused)
        assert response.status_code not in (401, 503), response.text


# -- hand-written header cases, byte for byte ---------------------------------------------
def raw_request(base: str, head: bytes) -> tuple[int, bytes]:
    """Send ``head`` (request line and headers) on a fresh connection; (status, body)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + b"\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def tick_head(*headers: bytes) -> bytes:
    lines = [b"POST /api/cron/tick HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close",
             b"Content-Length: 0", *headers]  # fmt: skip
    return b"\r\n".join(lines) + b"\r\n"


TOKEN = SECRET.encode()
HEADER_CASES = [
    # (name, headers, statuses allowed)
    ("lowercase scheme", [b"Authorization: bearer " + TOKEN], (200,)),
    ("upper-case scheme", [b"Authorization: BEARER " + TOKEN], (200,)),
    ("extra spaces", [b"Authorization: Bearer    " + TOKEN + b"   "], (200,)),
    ("duplicate, both valid", [b"Authorization: Bearer " + TOKEN] * 2, (401,)),
    (
        "duplicate, one wrong",
        [b"Authorization: Bearer " + TOKEN, b"Authorization: Bearer x"],
        (401,),
    ),
    ("empty token", [b"Authorization: Bearer "], (401,)),
    ("scheme only", [b"Authorization: Bearer"], (401,)),
    ("empty header", [b"Authorization: "], (401,)),
    ("token without scheme", [b"Authorization: " + TOKEN], (401,)),
    ("basic scheme", [b"Authorization: Basic " + TOKEN], (401,)),
    ("tab separator", [b"Authorization: Bearer\t" + TOKEN], (200, 401)),
    ("non-ASCII latin-1", [b"Authorization: Bearer \xe9t\xe9" + TOKEN], (401,)),
    ("non-ASCII utf-8", ["Authorization: Bearer ✓".encode() + TOKEN], (401,)),
    ("NUL byte", [b"Authorization: Bearer " + TOKEN + b"\x00"], (400, 401)),
    ("token prefix", [b"Authorization: Bearer " + TOKEN[:-1]], (401,)),
    ("token twice", [b"Authorization: Bearer " + TOKEN + b" " + TOKEN], (401,)),
    ("huge token", [b"Authorization: Bearer " + b"a" * 60_000], (400, 401, 413, 431)),
    ("many headers", [b"X-Pad-%d: x" % i for i in range(200)], (400, 401, 413, 431)),
]


@pytest.mark.parametrize(
    ("name", "headers", "allowed"), HEADER_CASES, ids=[c[0] for c in HEADER_CASES]
)
def test_hand_written_authorization_headers(
    base_url: str, name: str, headers: list[bytes], allowed: tuple[int, ...]
) -> None:
    try:
        status, body = raw_request(base_url, tick_head(*headers))
    except ConnectionResetError:  # a server may drop a request it will not read
        assert max(allowed) >= 400, name
        return
    assert status in allowed, (name, status, body[:200])
    if status == 401:
        assert b"error" in body and TOKEN not in body
