"""Profile tickq's hot paths with pyinstrument: where does the time per job go?

    python bench/hotspots.py                   # SQLite and Postgres
    python bench/hotspots.py --sqlite-only --jobs 20000 --what process_jobs

Profiles, in this process, ``enqueue`` one at a time, ``enqueue_many``, and draining with
``q.process_jobs(limit=1000)``, and prints pyinstrument's call tree for each (needs
``pip install pyinstrument``, or the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # profile this checkout's tickq, not an installed one

import bench_app  # noqa: E402
import procs  # noqa: E402
from databases import DEFAULT_POSTGRES_URL, Database, PostgresDatabase, SQLiteDatabase  # noqa: E402

from tickq import Queue  # noqa: E402

WHAT = ("enqueue", "enqueue_many", "process_jobs")


def profiled(title: str, fn: Callable[[], object], interval: float) -> None:
    from pyinstrument import Profiler

    profiler = Profiler(interval=interval)
    profiler.start()
    fn()
    profiler.stop()
    print(f"\n===== {title} =====")
    print(profiler.output_text(unicode=True, color=False, show_all=False, short_mode=False))


def profile_backend(db: Database, jobs: int, what: list[str], interval: float) -> None:
    q: Queue = bench_app.make_queue(db.url)
    q.migrate()
    bench_app.use_log_dir(procs.scratch("profile-"))
    n = jobs // 5  # one transaction per job is slow; a fifth is plenty to profile
    if "enqueue" in what:
        db.reset()
        profiled(
            f"{db.name}: {n} x q.enqueue",
            lambda: [q.enqueue("noop", {"n": i}) for i in range(n)],
            interval,
        )
    if "enqueue_many" in what:
        db.reset()
        batch = [("noop", {"n": i}) for i in range(jobs)]
        profiled(f"{db.name}: q.enqueue_many({jobs})", lambda: q.enqueue_many(batch), interval)
    if "process_jobs" in what:
        db.reset()
        q.enqueue_many([("noop", {"n": i}) for i in range(jobs)])
        db.analyze()
        profiled(
            f"{db.name}: drain {jobs} with process_jobs(limit=1000)", lambda: drain(q), interval
        )
    q.close()


def drain(q: Queue) -> None:
    while q.process_jobs(limit=1000)["claimed"]:
        pass


def main() -> int:
    p = argparse.ArgumentParser(prog="bench/hotspots.py", description=__doc__.split("\n")[0])
    p.add_argument("--sqlite-only", action="store_true")
    p.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--what", default=",".join(WHAT), help=f"of {','.join(WHAT)}")
    p.add_argument("--interval", type=float, default=0.0005, help="sampling interval, seconds")
    args = p.parse_args()
    dbs: list[Database] = [SQLiteDatabase()]
    try:
        if not args.sqlite_only:
            dbs.append(PostgresDatabase(args.postgres_url))
        for db in dbs:
            profile_backend(db, args.jobs, args.what.split(","), args.interval)
    finally:
        procs.cleanup()
        for db in dbs:
            db.drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
