"""What retention's background duty costs a tick, and the space pruning gives back.

    python bench/retention.py [--jobs 100000] [--postgres-url URL] [--sqlite-only]

Fills a database with finished jobs (their payload ~200 bytes), ages them past the
7-day retention on a FrozenClock, then alternates a tick that prunes one batch with an
empty tick of a queue that keeps everything (retention=None), until caught up. Prints the
median and p95 of each, the ms the prune adds, and (SQLite) the file size before/after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tickq import FrozenClock, Queue  # noqa: E402
from tickq.retention import Retention  # noqa: E402


def fill(q: Queue, jobs: int) -> None:
    @q.job()
    def work(note: str) -> None: ...

    for start in range(0, jobs, 5000):
        n = min(5000, jobs - start)
        q.enqueue_many([("work", {"note": "x" * 200}, {}) for _ in range(n)])
        while q.process_jobs(limit=n)["claimed"]:
            pass


def measure(url: str, jobs: int, path: Path | None) -> dict[str, object]:
    clock = FrozenClock()
    pruning = Queue(url, clock=clock, retention=Retention())
    keeping = Queue(url, clock=clock, retention=None)
    pruning.migrate()
    fill(pruning, jobs)
    size = (lambda: path.stat().st_size + _wal(path)) if path else (lambda: 0)
    before = size()
    clock.advance(days=8)
    prune_ms, empty_ms, pruned = [], [], 0
    while True:
        t = time.perf_counter()
        got = pruning.tick()["pruned"]
        prune_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        keeping.tick()
        empty_ms.append((time.perf_counter() - t) * 1000)
        pruned += got
        if not got:
            prune_ms.pop()
            break
    after = size()
    pruning.close()
    keeping.close()
    return {
        "pruned": pruned, "ticks": len(prune_ms),
        "prune_tick_ms_p50": round(statistics.median(prune_ms), 2),
        "prune_tick_ms_p95": round(sorted(prune_ms)[int(len(prune_ms) * 0.95)], 2),
        "empty_tick_ms_p50": round(statistics.median(empty_ms), 2),
        "added_ms_p50": round(statistics.median(prune_ms) - statistics.median(empty_ms), 2),
        "bytes_before": before, "bytes_after": after, "load": os.getloadavg(),
    }  # fmt: skip


def _wal(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "retention.db"
        print("sqlite", measure(f"sqlite:///{path}", args.jobs, path), flush=True)
    if args.sqlite_only:
        return
    import psycopg

    schema = f"bench_retention_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        sep = "&" if "?" in args.postgres_url else "?"
        url = f"{args.postgres_url}{sep}options=-csearch_path%3D{schema}"
        print("postgres", measure(url, args.jobs, None), flush=True)
    finally:
        with psycopg.connect(args.postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
