"""Serve an ASGI app with uvicorn on a real socket, in a thread, for the dashboard tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serving(app: Any, dual_stack: bool = False, **config: Any) -> Iterator[str]:
    """Yield ``http://127.0.0.1:PORT`` while uvicorn serves ``app`` there (``config``:
    more ``uvicorn.Config`` options, e.g. ``proxy_headers=False``). ``dual_stack`` listens
    on an IPv6 socket that takes IPv4 too: peers then appear as ``::ffff:127.0.0.1``."""
    import uvicorn

    if dual_stack:
        sock = socket.socket(socket.AF_INET6)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(("::", 0))
    else:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start within 10 s")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
