"""Compare the claim path of two tickq checkouts in one process, interleaved.

    python bench/ab_claim.py BEFORE_SRC AFTER_SRC [sqlite|postgres] [--wall]

e.g. ``git worktree add /tmp/base main`` then ``python bench/ab_claim.py /tmp/base/src src``.
Each version is imported under its own package name and gets its own database; rounds
alternate (and reverse their order every other round), so a busy machine slows both alike
— on a shared 2-core machine separate processes of the same code varied by 2x, which hides
a 5% change. Prints per-job CPU time (or wall time with ``--wall``), min and median over
12 rounds, of an empty ``q.tick()``, ``process_jobs(limit=1)`` looped and a worker-style
``record_and_claim`` of 10 at a time. Postgres: the local test server (postgres@127.0.0.1).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import tempfile
import time
from types import ModuleType
from typing import Any

PG = "postgresql://postgres@127.0.0.1:5432"
FIGURES = ("empty_tick", "one_at_a_time", "batch10")


def load(name: str, src: str) -> ModuleType:
    root = os.path.join(os.path.abspath(src), "tickq")
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(root, "__init__.py"), submodule_search_locations=[root]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def database(dialect: str, label: str, folder: str) -> str:
    if dialect == "sqlite":
        return f"sqlite:///{folder}/{label}.db?synchronous=normal"
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS tickq_ab_{label}")
        conn.execute(f"CREATE DATABASE tickq_ab_{label}")
    return f"{PG}/tickq_ab_{label}"


def one_round(q: Any, outcome: Any, n: int, clock: Any) -> dict[str, float]:
    out = {}
    started = clock()
    for _ in range(n):
        q.tick()
    out["empty_tick"] = (clock() - started) / n * 1e6
    q.enqueue_many([("noop", {"i": i}) for i in range(n)])
    started = clock()
    while q.process_jobs(limit=1)["claimed"]:
        pass
    out["one_at_a_time"] = (clock() - started) / n * 1e6
    q.enqueue_many([("noop", {"i": i}) for i in range(n)])
    started = clock()
    jobs = q._store.record_and_claim(q._runtime.owner, [], 10, 60)[1]
    while jobs:
        finished = [outcome(j, "succeeded") for j in jobs]
        jobs = q._store.record_and_claim(q._runtime.owner, finished, 10, 60)[1]
    out["batch10"] = (clock() - started) / n * 1e6
    return out


def main(argv: list[str]) -> None:
    before, after = argv[0], argv[1]
    dialect = argv[2] if len(argv) > 2 and not argv[2].startswith("-") else "sqlite"
    clock = time.perf_counter if "--wall" in argv else time.process_time
    folder = tempfile.mkdtemp(prefix="tickq-ab-")
    queues = {}
    for label, src in (("before", before), ("after", after)):
        tq = load(f"tickq_{label}", src)
        q = tq.Queue(database(dialect, label, folder))
        q.migrate()
        q.job(name="noop")(lambda i=0: None)
        queues[label] = (q, sys.modules[f"tickq_{label}.store"].Outcome)
    n = 300 if dialect == "sqlite" else 150
    results: dict[tuple[str, str], list[float]] = {}
    for i in range(12):
        order = list(queues.items()) if i % 2 == 0 else list(queues.items())[::-1]
        for label, (q, outcome) in order:
            for figure, value in one_round(q, outcome, n, clock).items():
                results.setdefault((label, figure), []).append(value)
    unit = "wall" if clock is time.perf_counter else "CPU"
    for figure in FIGURES:
        b, a = results[("before", figure)], results[("after", figure)]
        print(
            f"{dialect:8} {figure:14} {unit} µs/job: before min {min(b):7.2f} median "
            f"{statistics.median(b):7.2f} | after min {min(a):7.2f} median "
            f"{statistics.median(a):7.2f} | min {100 * (min(a) / min(b) - 1):+5.1f}% "
            f"median {100 * (statistics.median(a) / statistics.median(b) - 1):+5.1f}%"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
