"""The ``Runtime`` the ``Queue`` facade builds and hands to its drivers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tickq import FrozenClock, Job, Queue, UnknownJobType
from tickq.registry import JobDefinition, JobFunction


def test_the_old_import_paths_still_work() -> None:
    from tickq import queue

    assert queue.JobDefinition is JobDefinition and queue.JobFunction is JobFunction


def test_the_facade_and_its_runtime_share_one_state(tmp_path: Path) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}", lease_seconds=30)
    q.migrate()
    rt = q._runtime
    assert rt.store is q._store and rt.lease_seconds == 30.0 and rt.owner == q._runtime.owner
    assert rt.lease_keeper is q._runtime.lease_keeper and rt.schedules is q._schedules

    @q.job()
    def boom() -> None:
        raise RuntimeError("no")

    assert rt.definition("boom") is q._definition("boom") and rt.job_names() == ["boom"]
    failed: list[Job] = []
    q.on_failure(failed.append)
    boom.with_options(max_attempts=1).enqueue()
    assert q.process_jobs()["failed"] == 1 and [j.type for j in failed] == ["boom"]
    q.strict = False  # the setter reaches the runtime the drivers use
    assert rt.new_job("elsewhere").type == "elsewhere"
    q.strict = True
    with pytest.raises(UnknownJobType, match="'elsewhere'"):
        rt.new_job("elsewhere")
    q.close()


def test_a_clock_with_only_now_still_runs_budgeted_cycles(tmp_path: Path) -> None:
    class WallOnly:
        def now(self) -> datetime:
            return datetime.now(UTC)

    q = Queue(f"sqlite:///{tmp_path / 'q.db'}", clock=WallOnly())
    q.migrate()

    @q.job()
    def noop() -> None: ...

    q.enqueue_many([("noop", {})] * 3)
    assert q.process_jobs(time_budget=30)["succeeded"] == 3
    assert q.tick(time_budget=30)["jobs"]["claimed"] == 0
    q.close()


def test_a_frozen_budget_is_spent_only_by_advancing_the_clock(tmp_path: Path) -> None:
    clock = FrozenClock()
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}", clock=clock)
    q.migrate()

    @q.job()
    def tick_tock() -> None:
        clock.advance(seconds=1)

    q.enqueue_many([("tick_tock", {})] * 5)
    report = q.process_jobs(time_budget=2.5)
    assert report["succeeded"] == 3 and report["released"] == 0  # 0 s, 1 s, 2 s; not 3 s
    assert q.process_jobs(time_budget=100)["succeeded"] == 2
    q.close()
