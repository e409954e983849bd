"""The tick endpoint, the webhooks and the dashboard go through one adapter per kind of
server: one ASGI app answers the lifespan (startup and shutdown) once for all of them and
HEAD the same way on each, over a real socket under uvicorn; the dashboard served alone
(``tickq dashboard``) is the same app."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from test_head import read_response, request, webhooked
from tickq import Queue
from tickq.dashboard import Dashboard
from tickq.web.asgi import AsgiApp
from tickq.web.wsgi import WsgiApp

SECRET = "one-adapter-secret-0123456789"
PASSWORD = "one-adapter-password-0123"
HEALTH = "/api/cron/health"


@contextmanager
def uvicorn_with_lifespan(app: Any) -> Iterator[tuple[int, Any]]:
    """Serve ``app`` under uvicorn with ``lifespan="on"`` (it refuses to start when the app
    fails the startup); yield the port and the server, whose shutdown is checked after."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1], server
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert not thread.is_alive(), "uvicorn did not stop: the lifespan shutdown hung"
    assert not server.lifespan.shutdown_failed and not server.lifespan.error_occurred


LIVE = {HEALTH}  # bodies made anew per request ("now", "age_seconds"): lengths may differ


def heads_then_gets(port: int, paths: list[str]) -> dict[str, tuple[int, dict[str, str]]]:
    """HEAD each path and GET it right after on one kept-alive connection: the HEAD's
    status and headers, checked against the GET's (same status and Content-Length, and no
    body in between that would corrupt the GET's answer)."""
    heads = {}
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        rest = b""
        for path in paths:
            sock.sendall(request("HEAD", path))
            status, headers, _, rest = read_response(sock, rest, head=True)
            sock.sendall(request("GET", path))
            get_status, get_headers, body, rest = read_response(sock, rest, head=False)
            assert rest == b"", (path, rest)
            assert status == get_status, (path, status, get_status)
            if status == 405:  # a 405 names the method, so its length differs
                pass
            elif path in LIVE:  # the body holds the time of the request: a byte may differ
                assert abs(int(headers["content-length"]) - len(body)) <= 8, path
            else:
                assert headers["content-length"] == str(len(body)), path
            assert headers.get("content-type") == get_headers.get("content-type"), path
            heads[path] = (status, headers)
    return heads


@pytest.mark.timeout(60)
def test_one_asgi_app_serves_the_tick_webhooks_and_dashboard_with_one_lifespan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKQ_DASHBOARD_PASSWORD", raising=False)
    q = webhooked(f"sqlite:///{tmp_path / 'one.db'}")
    app = q.asgi_app(secret=SECRET, dashboard={"password": PASSWORD})
    assert type(app) is AsgiApp and type(q.asgi_app(secret=SECRET)) is AsgiApp
    paths = [HEALTH, "/api/cron/tick", "/hooks/github", "/tickq/login",
             "/tickq/static/dashboard.css", "/nowhere"]  # fmt: skip
    with uvicorn_with_lifespan(app) as (port, server):
        assert not server.lifespan.startup_failed
        base = f"http://127.0.0.1:{port}"
        tick = httpx.post(base + "/api/cron/tick", headers={"Authorization": f"Bearer {SECRET}"})
        assert tick.status_code == 200 and tick.json()["limit"] == 100
        assert httpx.get(base + "/tickq").headers["location"] == "/tickq/"
        heads = heads_then_gets(port, paths)
    assert heads[HEALTH][0] == 200 and heads[HEALTH][1]["cache-control"] == "no-store"
    assert heads["/api/cron/tick"][0] == 405 and heads["/api/cron/tick"][1]["allow"] == "POST"
    assert heads["/hooks/github"][0] == 405
    assert heads["/tickq/login"][0] == 200
    assert heads["/tickq/login"][1]["x-frame-options"] == "DENY"
    assert "tickq_csrf=" in heads["/tickq/login"][1]["set-cookie"]
    assert heads["/tickq/static/dashboard.css"][1]["cache-control"] == "max-age=300"
    assert heads["/nowhere"][0] == 404
    q.close()


@pytest.mark.timeout(60)
def test_the_dashboard_alone_is_the_same_asgi_app(queue: Queue) -> None:
    """What ``tickq dashboard`` serves: ``/`` leads to the dashboard, other paths are 404."""
    app = AsgiApp(Dashboard(queue, password=PASSWORD))
    with uvicorn_with_lifespan(app) as (port, _):
        heads = heads_then_gets(port, ["/", "/tickq/login", "/elsewhere"])
        assert httpx.get(f"http://127.0.0.1:{port}/").headers["location"] == "/tickq/"
    assert [status for status, _ in heads.values()] == [303, 200, 404]


def test_one_wsgi_app_with_or_without_the_dashboard(queue: Queue) -> None:
    assert type(queue.wsgi_app(secret=SECRET)) is WsgiApp
    assert type(queue.wsgi_app(secret=SECRET, dashboard={"password": PASSWORD})) is WsgiApp


@pytest.mark.timeout(60)
def test_a_form_past_the_dashboards_limit_is_refused_by_asgi_and_wsgi_alike(
    queue: Queue,
) -> None:
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from tickq.dashboard.app import MAX_BODY

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    form = {"password": "x" * (MAX_BODY + 1)}
    options: dict[str, Any] = {"secret": SECRET, "dashboard": {"password": PASSWORD}}
    wsgi = make_server("127.0.0.1", 0, queue.wsgi_app(**options), handler_class=Quiet)
    thread = threading.Thread(target=wsgi.serve_forever, daemon=True)
    thread.start()
    try:
        with uvicorn_with_lifespan(queue.asgi_app(**options)) as (port, _):
            for base in (f"http://127.0.0.1:{port}", f"http://127.0.0.1:{wsgi.server_port}"):
                refused = httpx.post(base + "/tickq/login", data=form, timeout=30)
                assert refused.status_code == 413, (base, refused.text)
                assert f"limit of {MAX_BODY} bytes" in refused.json()["error"]
                small = httpx.post(base + "/tickq/login", data={"password": "x"}, timeout=30)
                assert small.status_code == 403, "read, and refused for its missing CSRF token"
    finally:
        wsgi.shutdown()
        thread.join(10)
