"""Figures 8-9: durable workflows. A 10-step workflow against the same 10 jobs chained by
hand (each job enqueues the next, what a user writes today), both drained by
``process_jobs`` in this process; and, with a worker running, the time from a step's end
to the next step's start (the driver's replay and record in between).

Times are read from the jobs' rows: a step's ``finished_at`` and the next one's
``attempted_at`` (the database's clock on Postgres, this process's on SQLite).
"""

from __future__ import annotations

import threading
import time
from itertools import pairwise

from databases import Database
from figures import Figure, Lost, Series, percentile, repeat

from tickq import Queue, WorkflowContext

STEPS = 10


def workflow_figures(db: Database, chains: int, runs: int) -> list[Figure]:
    q = Queue(db.url)
    bench = _Bench(q)
    try:
        overhead = repeat(runs, lambda: bench.workflows(chains), lambda: bench.chained(chains))
        gaps: list[list[float]] = []
        (latency,) = repeat(runs, lambda: _record(gaps, bench.step_gaps(max(2, chains // 10))))
    finally:
        q.close()
    note = f"{chains} runs of {STEPS} sequential steps, drained by process_jobs in one process"
    return [
        Figure("workflow_10_steps", f"A {STEPS}-step workflow, per run", db.name, "ms",
               overhead[0], overhead[1], note=note + "; floor: 10 jobs chained by hand"),
        *(Figure(f"workflow_step_gap_p{p}", f"Step end → next step start, p{p}", db.name, "ms",
                 _percentiles(gaps, p, latency),
                 note="one run at a time under an idle `q.run_worker` thread, concurrency 1")
          for p in (50, 99)),
    ]  # fmt: skip


class _Bench:
    def __init__(self, q: Queue) -> None:
        self.q = q

        @q.job(name="bench_wf_step")
        def step(i: int) -> int:
            return i

        @q.job(name="bench_chained")
        def chained(i: int, left: int) -> None:
            if left > 1:
                q.enqueue("bench_chained", {"i": i, "left": left - 1})

        @q.workflow(name="bench_ten_steps")
        def ten(wf: WorkflowContext, n: int) -> int:
            for k in range(n):
                wf.run(step, i=k)
            return n

        self.ten = ten

    def workflows(self, chains: int) -> float:
        """Milliseconds per 10-step run, start to done, all runs drained together."""
        ids = [self.ten.start(n=STEPS) for _ in range(chains)]
        began = time.perf_counter()
        self._drain()
        elapsed = time.perf_counter() - began
        unfinished = [r for r in ids if self.q.workflow_run(r).status != "done"]
        if unfinished:
            raise Lost(f"{len(unfinished)} workflow run(s) did not finish")
        return elapsed * 1000 / chains

    def chained(self, chains: int) -> float:
        """Milliseconds per chain of 10 jobs, each enqueueing the next."""
        self.q.enqueue_many([("bench_chained", {"i": i, "left": STEPS}) for i in range(chains)])
        began = time.perf_counter()
        done = self._drain()
        elapsed = time.perf_counter() - began
        if done != chains * STEPS:
            raise Lost(f"{done} chained jobs ran, expected {chains * STEPS}")
        return elapsed * 1000 / chains

    def step_gaps(self, runs: int) -> list[float]:
        """Step end -> next step start (ms) for every step pair of ``runs`` runs."""
        stop = threading.Event()
        worker = threading.Thread(target=self.q.run_worker,
                                  kwargs={"concurrency": 1, "stop": stop})  # fmt: skip
        worker.start()
        ids = []
        try:
            for _ in range(runs):  # one at a time: a gap is the run's own, never a queue's
                ids.append(self.ten.start(n=STEPS))
                deadline = time.monotonic() + 60
                while self.q.workflow_run(ids[-1]).status != "done":
                    if time.monotonic() > deadline:
                        raise Lost("a workflow run did not finish within 60 s under a worker")
                    time.sleep(0.01)
        finally:
            stop.set()
            worker.join(60)
        return [gap for r in ids for gap in self._gaps(r)]

    def _gaps(self, run_id: int) -> list[float]:
        jobs = [self.q.get_job(s.job_id) for s in self.q.workflow_run(run_id).steps if s.job_id]
        found = [j for j in jobs if j is not None]
        return [(b.attempted_at - a.finished_at).total_seconds() * 1000  # type: ignore[operator]
                for a, b in pairwise(found)]  # fmt: skip

    def _drain(self) -> int:
        done = 0
        while True:
            report = self.q.process_jobs(limit=1000)
            done += report["succeeded"]
            if not report["claimed"]:
                return done


def _record(store: list[list[float]], values: list[float]) -> float:
    store.append(values)
    return percentile(values, 50)


def _percentiles(per_run: list[list[float]], p: int, series: Series) -> Series:
    if not series.ok:
        return series
    return Series([percentile(values, p) for values in per_run])
