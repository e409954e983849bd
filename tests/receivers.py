"""Real servers that alerts are sent to in tests: an HTTP receiver and an SMTP server."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HttpReceiver:
    url: str
    requests: list[Received] = field(default_factory=list)


@contextmanager
def http_receiver(status: int = 200) -> Iterator[HttpReceiver]:
    """An HTTP server on a free loopback port recording every POST it gets."""
    receiver = HttpReceiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            receiver.requests.append(Received(self.path, dict(self.headers), body))
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@dataclass
class SmtpServer:
    port: int
    messages: list[Message] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)


@contextmanager
def smtp_server(
    login: tuple[str, str] | None = None, tls: ssl.SSLContext | None = None
) -> Iterator[SmtpServer]:
    """A real SMTP server (aiosmtpd) on a free loopback port; with ``login`` it demands
    AUTH with that user and password; with ``tls`` it demands STARTTLS first."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    server = SmtpServer(port=free_port())

    class Handler:
        async def handle_DATA(self, smtp: Any, session: Any, envelope: Any) -> str:
            server.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            server.messages.append(message_from_bytes(envelope.original_content))
            return "250 OK"

    def authenticator(smtp: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
        user, password = data.login.decode(), data.password.decode()
        ok = login is not None and (user, password) == login
        if ok:
            server.logins.append(user)
        return AuthResult(success=ok)

    options: dict[str, Any] = {}
    if login:
        options = {"authenticator": authenticator, "auth_required": True,
                   "auth_require_tls": tls is not None}  # fmt: skip
    if tls:
        options.update(tls_context=tls, require_starttls=True)
    controller = Controller(Handler(), hostname="127.0.0.1", port=server.port, **options)
    controller.start()
    try:
        yield server
    finally:
        controller.stop()


def self_signed_tls(folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting only that server) for host ``localhost``."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    return server, client


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())
