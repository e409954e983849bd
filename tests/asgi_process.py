"""Serve an ASGI app in its own process: ``python tests/asgi_process.py module:attribute``.

Binds 127.0.0.1 on a free port itself (no race for the port), prints
``serving on http://127.0.0.1:PORT`` once uvicorn listens, and serves until killed.
"""

from __future__ import annotations

import importlib
import socket
import sys
import threading
import time

import uvicorn


def main(spec: str) -> None:
    module, _, attr = spec.partition(":")
    app = getattr(importlib.import_module(module), attr)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            sys.exit("uvicorn stopped before it started")
        time.sleep(0.01)
    print(f"serving on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    thread.join()


if __name__ == "__main__":
    main(sys.argv[1])
