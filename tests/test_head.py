"""HEAD answers carry no body, on every adapter tickq ships, through real servers: waitress
for WSGI, Flask and Django (a server that passes an app's body on, so a body after a HEAD
answer is read as the start of the next response on a kept-alive connection), uvicorn for
ASGI and FastAPI; and the ASGI apps themselves, driven directly, send no body either (other
ASGI servers do not all drop one). Each HEAD is followed by a GET on the same raw socket,
whose answer must arrive intact."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import ROOT, tickq_env
from test_web import serving
from tickq import Queue
from tickq.webhooks import GitHub

SECRET = "head-test-secret-0123456789"
TOKEN = "head-test-metrics-token-0123"
HEALTH = "/api/cron/health"
# Each path answers HEAD with a refusal that has a body on GET: 405, 401, 503 (the dashboard
# without a password), and 404 where the path is tickq's to answer; the health check too.
COMMON = ["/api/cron/tick", "/hooks/github", "/metrics", "/tickq/login", HEALTH]
PATHS = {
    "wsgi": [*COMMON, "/nowhere"],
    "flask": COMMON,
    "django": COMMON,
    "asgi": [*COMMON, "/nowhere"],
    "fastapi": ["/api/cron/tick", "/hooks/github", "/metrics", HEALTH],
}


@contextmanager
def waitress_serving(app: Any) -> Iterator[int]:
    """Run ``app`` under waitress on a free loopback port, in a thread; yield the port."""
    import waitress.server
    from waitress import wasyncore

    server = waitress.server.create_server(app, host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield int(server.effective_port)  # type: ignore[union-attr]
    finally:

        def stop() -> None:  # in the server's own loop: it then finds its map empty
            server.task_dispatcher.shutdown()
            wasyncore.close_all(server._map)  # type: ignore[union-attr]

        server.trigger.pull_trigger(stop)  # type: ignore[union-attr]
        thread.join(10)
        assert not thread.is_alive(), "waitress did not stop"


@contextmanager
def django_waitress(url: str) -> Iterator[int]:
    env = tickq_env(TICKQ_DATABASE_URL=url, CRON_SECRET=SECRET, TICKQ_METRICS_TOKEN=TOKEN)
    script = ROOT / "tests" / "apps" / "django_waitress.py"
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def webhooked(url: str) -> Queue:
    q = Queue(url)
    q.migrate()
    q.webhook("/hooks/github", verify=GitHub("head-test-webhook-secret"))(lambda event: None)
    return q


@contextmanager
def served(adapter: str, q: Queue) -> Iterator[int]:
    options: dict[str, Any] = {"secret": SECRET, "metrics": True, "metrics_token": TOKEN}
    if adapter == "wsgi":
        with waitress_serving(q.wsgi_app(dashboard=True, **options)) as port:
            yield port
    elif adapter == "flask":
        from flask import Flask

        flask_app = Flask(__name__)
        flask_app.register_blueprint(q.flask_blueprint(dashboard=True, **options))
        with waitress_serving(flask_app) as port:
            yield port
    elif adapter == "django":
        q.close()
        with django_waitress(q.url) as port:
            yield port
    elif adapter == "asgi":
        with serving(q.asgi_app(dashboard=True, **options)) as base:
            yield int(base.rsplit(":", 1)[1])
    else:
        from fastapi import FastAPI

        fastapi_app = FastAPI()
        fastapi_app.include_router(q.fastapi_router(**options))
        with serving(fastapi_app) as base:
            yield int(base.rsplit(":", 1)[1])


def read_response(sock: socket.socket, buf: bytes, head: bool) -> tuple[int, dict[str, str],
                                                                         bytes, bytes]:  # fmt: skip
    """One response from ``buf`` and then the socket: status, headers, body, and the bytes
    after it. A response that does not open with a status line is a poisoned stream."""
    while b"\r\n\r\n" not in buf:
        buf += receive(sock)
    block, _, rest = buf.partition(b"\r\n\r\n")
    status_line, *lines = block.decode("latin-1").split("\r\n")
    assert status_line.startswith("HTTP/1.1 "), f"not a response: {block[:120]!r}"
    headers = {name.strip().lower(): value.strip()
               for name, _, value in (line.partition(":") for line in lines)}  # fmt: skip
    if head:
        return int(status_line.split()[1]), headers, b"", rest
    length = int(headers["content-length"])
    while len(rest) < length:
        rest += receive(sock)
    return int(status_line.split()[1]), headers, rest[:length], rest[length:]


def receive(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    assert data, "the server closed the connection"
    return data


def head_length(get_body: bytes) -> str:
    """The Content-Length of HEAD: the GET body's, where a 405 names the method."""
    return str(len(get_body.replace(b'"GET is not allowed', b'"HEAD is not allowed')))


def request(method: str, path: str) -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("adapter", PATHS)
def test_head_answers_have_no_body_and_the_next_response_is_intact(
    adapter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKQ_DASHBOARD_PASSWORD", raising=False)
    q = webhooked(f"sqlite:///{tmp_path / 'head.db'}")
    with served(adapter, q) as port:
        base = f"http://127.0.0.1:{port}"
        gets = {path: httpx.get(base + path, timeout=10) for path in PATHS[adapter]}
        statuses = {path: answer.status_code for path, answer in gets.items()}
        assert {405, 401, 503} <= set(statuses.values()), statuses
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            rest = b""
            for path in PATHS[adapter]:
                sock.sendall(request("HEAD", path))
                status, headers, _, rest = read_response(sock, rest, head=True)
                assert status == statuses[path], (path, status)
                if gets[path].headers.get("content-type", "").startswith("application/json"):
                    assert headers["content-length"] == head_length(gets[path].content), path
                sock.sendall(request("GET", HEALTH))  # on the same connection
                status, headers, body, rest = read_response(sock, rest, head=False)
                assert status == statuses[HEALTH], (path, status, body)
                assert body.startswith(b'{"ok": '), (path, body)
                assert rest == b"", (path, rest)
    q.close()


class Recorder:
    """An ASGI ``send`` that keeps what the app sent."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def answer(self) -> tuple[int, dict[bytes, bytes], bytes]:
        start, *bodies = self.messages
        body = b"".join(m.get("body", b"") for m in bodies)
        return start["status"], dict(start["headers"]), body


async def no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def call(app: Any, method: str, path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    import asyncio

    scope = {"type": "http", "method": method, "path": path, "root_path": "",
             "query_string": b"", "headers": [(b"host", b"127.0.0.1")],
             "client": ("127.0.0.1", 1), "scheme": "http", "http_version": "1.1"}  # fmt: skip
    recorder = Recorder()
    asyncio.run(app(scope, no_body, recorder))
    return recorder.answer()


@pytest.mark.parametrize("with_dashboard", [False, True])
def test_the_asgi_apps_send_no_body_to_head_whatever_the_server(
    with_dashboard: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKQ_DASHBOARD_PASSWORD", raising=False)
    q = webhooked(f"sqlite:///{tmp_path / 'asgi.db'}")
    app = q.asgi_app(dashboard=with_dashboard, secret=SECRET, metrics=True, metrics_token=TOKEN)
    paths = ["/api/cron/tick", "/hooks/github", "/metrics", "/nowhere", HEALTH]
    for path in paths + (["/tickq/login"] if with_dashboard else []):
        get_status, _, get_body = call(app, "GET", path)
        status, headers, body = call(app, "HEAD", path)
        assert get_body and (status, body) == (get_status, b""), path
        assert headers[b"content-length"].decode() == head_length(get_body), path
    q.close()
