"""A benchmark process: drains the queue (floor or tickq) or listens for the latency floor.

    python drain.py floor DIALECT URL BATCH   raw SQL: claim BATCH at a time until empty
    python drain.py tickq [LIMIT]             q.process_jobs(limit=LIMIT) until nothing due
    python drain.py listen URL CHANNEL        floor latency: LISTEN, claim on each NOTIFY

Each prints one JSON line on stdout when done. ``tickq`` reads the database URL and log
folder from ``TICKQ_BENCH_URL`` / ``TICKQ_BENCH_LOG_DIR`` like ``tickq worker`` would.
"""

from __future__ import annotations

import json
import sys
import time


def drain_floor(dialect: str, url: str, batch: int) -> dict[str, object]:
    from floor import drain, floor_for

    return {"runs": drain(floor_for(dialect, connect(dialect, url)), batch)}


def drain_tickq(limit: int) -> dict[str, object]:
    from bench_app import q

    assert q is not None, "TICKQ_BENCH_URL is not set"
    claimed = 0
    while True:
        report = q.process_jobs(limit=limit)
        if not report["claimed"]:
            return {"claimed": claimed}
        claimed += report["claimed"]


def listen(url: str, channel: str) -> dict[str, object]:
    """Wake on NOTIFY, claim everything due (one at a time, like a worker's first pick)."""
    from floor import PostgresFloor

    listener, worker = connect("postgres", url), PostgresFloor(connect("postgres", url))
    listener.execute(f"LISTEN {channel}")
    print("ready", flush=True)
    runs: list[tuple[int, float]] = []
    for note in listener.notifies():
        while jobs := worker.claim(100):
            started = time.time()
            runs.extend((payload["n"], started) for _, payload in jobs)
            worker.done([job_id for job_id, _ in jobs])
        if note.payload == "stop":
            return {"runs": runs}
    return {"runs": runs}


def connect(dialect: str, url: str) -> object:
    if dialect == "sqlite":
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
        conn.execute("PRAGMA synchronous=FULL")
        return conn
    import psycopg

    return psycopg.connect(url, autocommit=True)


def main(argv: list[str]) -> int:
    mode, *rest = argv
    if mode == "floor":
        result = drain_floor(rest[0], rest[1], int(rest[2]))
    elif mode == "tickq":
        result = drain_tickq(int(rest[0]) if rest else 1000)
    elif mode == "listen":
        result = listen(rest[0], rest[1])
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
