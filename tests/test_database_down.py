"""When the database is down the endpoints answer 503 with ``Retry-After`` (the tick used to
answer 500), saying what is wrong and what to do without naming host, port, database or
user. Real failures through a real uvicorn socket: a Postgres URL to a closed port, and a
live Postgres connection cut by a TCP proxy that the test stops."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import suppress
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import PG_URL
from test_web import AUTH, HEALTH, SECRET, TICK, serving
from tickq import Queue

METRICS_TOKEN = "metrics-token-for-tests-0123456789"
OPTIONS = {"secret": SECRET, "metrics": True, "metrics_token": METRICS_TOKEN}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Proxy:
    """A TCP proxy to Postgres; ``cut()`` drops every connection and stops listening."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listen()

    def listen(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.port = self.listener.getsockname()[1]
        self.listener.listen(16)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream, timeout=10)
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with suppress(OSError):  # wakes the accepting thread: close() alone would not
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.sockets.clear()


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    parts = urlsplit(PG_URL)
    p = Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield p
    p.cut()


def assert_says_database_down(r: httpx.Response, *hidden: str) -> None:
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "30"
    text = r.text
    assert "the database is unreachable or dropped the connection" in text
    assert "try again later" in text and "check that the database is up" in text
    for word in hidden:
        assert word not in text, (word, text)


def test_a_closed_port_gives_503_with_retry_after_and_no_connection_details() -> None:
    port = closed_port()
    q = Queue(f"postgresql://alice_db_user:pw-hunter2@127.0.0.1:{port}/orders_prod?sslmode=disable")
    hidden = ("127.0.0.1", str(port), "alice_db_user", "orders_prod", "hunter2", "5432")
    with serving(q.asgi_app(**OPTIONS)) as base:
        tick = httpx.post(base + TICK, headers=AUTH, timeout=30)
        assert_says_database_down(tick, *hidden)
        assert tick.json()["error"].startswith("the tick ran nothing (DatabaseUnavailable)")
        health = httpx.get(base + HEALTH, timeout=30)
        assert_says_database_down(health, *hidden)
        assert health.json()["ok"] is False and health.json()["status"] == "error"
        metrics = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert_says_database_down(metrics, *hidden)


def test_a_terminated_connection_gives_503_then_ticks_resume(
    proxy: Proxy, pg_schema_url: str
) -> None:
    Queue(pg_schema_url).migrate()
    parts = urlsplit(pg_schema_url)
    via_proxy = parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}").geturl()
    q = Queue(via_proxy)
    named = (str(proxy.port), parts.username or "", parts.path.strip("/"))
    hidden = [word for word in named if len(word) > 4]  # "test" could be any English text
    with serving(q.asgi_app(**OPTIONS)) as base:
        assert httpx.post(base + TICK, headers=AUTH, timeout=30).status_code == 200
        proxy.cut()  # the live connection is terminated and the database stays away
        for _ in range(2):
            assert_says_database_down(httpx.post(base + TICK, headers=AUTH, timeout=30), *hidden)
        proxy.listen()  # the database is back on the same address
        r = httpx.post(base + TICK, headers=AUTH, timeout=30)
        assert r.status_code == 200, r.text
    q.close()
