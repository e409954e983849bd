"""Figure: what a limited job type costs against an unlimited one (docs/controls.md).

The same drains as the processing section, run back to back with ``noop`` unlimited and
with ``noop`` declaring a limit far above what the run reaches (``bench_app.LIMITS``), so
the limit is checked on every claim but never holds a job back. The table's floor column
holds the unlimited runs here: "tickq / floor" is the limited type's speed relative to the
unlimited one's.
"""

from __future__ import annotations

import bench_app
from figures import Figure, repeat
from processing import Config, Drainer

KINDS = (
    ("concurrency", "concurrency=1000"),
    ("rate", 'rate_limit="1000000/s"'),
    ("keyed", f"concurrency=1000 per key, {bench_app.KEYS} keys"),
    ("keyed_each", "concurrency=1 per key, a key per job"),
)


class LimitedDrainer(Drainer):
    """A ``Drainer`` whose processes declare ``limit`` on ``noop`` (``bench_app.LIMITS``);
    it fills the queue through a Queue declaring it too (a keyed limit's key is computed
    at enqueue)."""

    limit = "none"

    def _env(self, log_dir):  # type: ignore[no-untyped-def]
        return {**super()._env(log_dir), "TICKQ_BENCH_LIMIT": self.limit}

    def with_limit(self, limit: str, run) -> float:  # type: ignore[no-untyped-def]
        self.limit, unlimited = limit, self.q
        self.q = bench_app.make_queue(self.db.url, limit)
        try:
            return float(run())
        finally:
            self.q.close()
            self.limit, self.q = "none", unlimited


def controls_figures(d: LimitedDrainer, one_n: int, runs: int) -> list[Figure]:
    figures = []
    for kind, declared in KINDS:
        drained = repeat(
            runs,
            lambda kind=kind: d.with_limit(kind, lambda: d.tickq(Config(1))),
            lambda: d.tickq(Config(1)),
        )
        figures.append(
            Figure(
                f"limited_{kind}_drain",
                f"Processing {d.n:,} no-op jobs, 1 worker: type with {declared}",
                d.db.name,
                "jobs/s",
                *drained,
                note="`tickq worker`, defaults; limit never reached; floor column: the same "
                "type unlimited, same run",
            )
        )
        one = repeat(
            runs,
            lambda kind=kind: d.with_limit(kind, lambda: d.process_jobs(1, n=one_n, limit=1)),
            lambda: d.process_jobs(1, n=one_n, limit=1),
        )
        figures.append(
            Figure(
                f"limited_{kind}_one",
                f"One at a time, claim 1 + complete: type with {declared}",
                d.db.name,
                "jobs/s",
                *one,
                note=f"{one_n} jobs; `process_jobs(limit=1)` looped; floor column: the same "
                "type unlimited, same run",
            )
        )
    return figures
