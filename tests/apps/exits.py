"""Jobs that raise what ends a process: ``SystemExit``, ``KeyboardInterrupt``,
``GeneratorExit`` (sync and async), a job that waits to be interrupted by a real signal,
one whose process gets a signal its handler takes without raising, and one that succeeds.
``TICKQ_DATABASE_URL`` names the database. ``python tests/apps/exits.py process|serve``
runs ``process_jobs`` once, or serves the WSGI app (tick and health) in the main thread
with wsgiref, printing its port; ``graceful`` runs ``process_jobs`` under a SIGTERM handler
that only notes the signal, as a server's graceful shutdown does. ``apps.exits:wsgi()`` is
the WSGI app for gunicorn."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from tickq import Queue

q = Queue()
RAISES = {"SystemExit": SystemExit, "KeyboardInterrupt": KeyboardInterrupt,
          "GeneratorExit": GeneratorExit}  # fmt: skip


@q.job(max_attempts=1)
def raises(name: str) -> None:
    if name == "sys.exit":
        sys.exit(3)
    raise RAISES[name]()


@q.job(max_attempts=1)
async def raises_async(name: str) -> None:
    if name == "sys.exit":
        sys.exit(4)
    raise RAISES[name]()


@q.job(max_attempts=2)
def waits(seconds: float) -> None:
    print("waiting", flush=True)
    time.sleep(seconds)


NOTED: list[int] = []


@q.job(max_attempts=1)
def signalled_then_exits() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs, notes it, raises nothing
    while not NOTED:
        time.sleep(0.01)
    sys.exit(5)  # then the job's own sys.exit: its failure, not the process's


@q.job()
def ok() -> str:
    return "ok"


def serve() -> None:
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: object) -> None: ...

    server = make_server("127.0.0.1", 0, q.wsgi_app(), handler_class=Quiet)
    print(f"serving on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()  # one request at a time, in the main thread


def wsgi() -> Any:
    return q.wsgi_app()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    elif sys.argv[1] == "graceful":
        signal.signal(signal.SIGTERM, lambda signum, frame: NOTED.append(signum))
        print(json.dumps(q.process_jobs()))
    else:
        print(json.dumps(q.process_jobs(limit=int(sys.argv[2]) if len(sys.argv) > 2 else 100)))
