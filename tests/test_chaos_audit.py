"""The chaos suite's audit catches each broken promise (evidence built by hand, no processes).

The suite proves nothing if its audit can't fail: each test feeds it the trace of one
broken promise and checks it is reported, and that the same trace with the fault that
explains it passes.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

from chaos_audit import Evidence, Run, audit
from chaos_faults import Fault

WORKER, OTHER = 100, 200
EXPIRED = "LeaseExpired: attempt 1 was claimed by host:100:ab12cd34 which stopped renewing"


def job(n: int, status: str = "done", attempts: int = 1) -> Any:
    return SimpleNamespace(id=n + 1, status=SimpleNamespace(value=status), attempts=attempts)


def attempt(number: int, outcome: str, error: str | None = None, claimed: float = 0.0) -> Any:
    started_at = datetime.fromtimestamp(claimed, UTC) if claimed else None
    return SimpleNamespace(attempt=number, outcome=outcome, error=error, started_at=started_at)


def evidence(runs: list[Run], jobs: dict[int, Any], **extra: Any) -> Evidence:
    fields: dict[str, Any] = {"total": len(jobs), "runs": runs, "jobs": jobs, "attempts": {},
                              "faults": [], "killed": {}, "roles": {WORKER: "worker",
                              OTHER: "worker"}}  # fmt: skip
    fields.update(extra)
    return Evidence(**fields)


def rerun_trace(**extra: Any) -> Evidence:
    """Job 0's attempt 1 ran on WORKER, was rescued, attempt 2 ran on OTHER."""
    runs = [Run(0, 1, 1, WORKER, 10.0, 10.5), Run(0, 1, 2, OTHER, 30.0, 30.1)]
    attempts = {1: [attempt(1, "lease_expired", EXPIRED), attempt(2, "done")]}
    return evidence(runs, {0: job(0, attempts=2)}, attempts=attempts, **extra)


def test_a_clean_trace_keeps_every_promise() -> None:
    figures = audit(evidence([Run(0, 1, 1, WORKER, 1.0, 1.1)], {0: job(0)}))

    assert figures["broken"] == []
    assert figures["runs"] == 1


def test_a_job_never_finished_is_lost() -> None:
    figures = audit(evidence([Run(0, 1, 1, WORKER, 1.0, None)], {0: job(0, "running")}))

    assert figures["jobs_lost"] == 1
    assert figures["left_running_past_lease"] == 1
    assert "1 job(s) lost" in figures["broken"]


def test_a_job_never_stored_is_lost() -> None:
    figures = audit(evidence([], {}, total=1))

    assert figures["examples"]["lost"] == [0]


def test_a_rerun_without_a_kill_is_unexplained() -> None:
    figures = audit(rerun_trace())

    assert figures["extra_runs_unexplained"] == 1
    assert "was never killed" in figures["examples"]["unexplained"][0]


def test_a_rerun_after_a_kill_is_explained() -> None:
    kill = Fault("kill_worker", 10.6, 10.7, WORKER, "worker", [OTHER])
    figures = audit(rerun_trace(killed={WORKER: 10.6}, faults=[kill]))

    assert figures["broken"] == []
    assert figures["jobs_run_twice"] == 1
    assert figures["extra_runs_after_finishing"] == 1
    assert figures["rerun_after_kill_seconds"] == {}  # its run had finished: nothing cut


def test_the_same_attempt_twice_is_unexplained_even_after_a_kill() -> None:
    runs = [Run(0, 1, 1, WORKER, 10.0, None), Run(0, 1, 1, OTHER, 30.0, 30.1)]
    attempts = {1: [attempt(1, "lease_expired", EXPIRED)]}
    figures = audit(evidence(runs, {0: job(0)}, attempts=attempts, killed={WORKER: 11.0}))

    assert figures["extra_runs_unexplained"] == 1


REFUNDED = f"Refunded: attempt 1 was claimed by host:{WORKER}:abc123 which stopped renewing"


def refund_trace(*more: Run, recorded: bool = True, **extra: Any) -> Evidence:
    """Job 0 was claimed by WORKER, which started it and died before recording the start:
    refunded (a ``refunded`` row), attempt 1 ran again on OTHER and is the one counted."""
    runs = [Run(0, 1, 1, WORKER, 10.0, None), *more, Run(0, 1, 1, OTHER, 30.0, 30.1)]
    history = [attempt(1, "refunded", REFUNDED)] if recorded else []
    return evidence(runs, {0: job(0)}, attempts={1: [*history, attempt(1, "done")]}, **extra)


def test_a_refunded_rerun_after_a_kill_is_explained_once() -> None:
    assert audit(refund_trace(killed={WORKER: 11.0}))["broken"] == []
    assert audit(refund_trace())["extra_runs_unexplained"] == 1  # no kill: unexplained
    unrecorded = audit(refund_trace(recorded=False, killed={WORKER: 11.0}))
    assert any("no refund recorded" in u for u in unrecorded["examples"]["unexplained"])
    twice = audit(refund_trace(Run(0, 1, 1, WORKER, 20.0, None), killed={WORKER: 21.0}))
    assert any("refund happens once" in u for u in twice["examples"]["unexplained"])


def burned_trace(killed_at: float) -> Evidence:
    """Job 0's attempt 1 was claimed by WORKER at t=100 and never started."""
    runs = [Run(0, 1, 2, OTHER, 130.0, 130.1)]
    attempts = {1: [attempt(1, "lease_expired", EXPIRED, claimed=100.0), attempt(2, "done")]}
    return evidence(runs, {0: job(0, attempts=2)}, attempts=attempts,
                    killed={WORKER: killed_at})  # fmt: skip


def test_an_expired_attempt_that_never_ran_is_burned() -> None:
    figures = audit(burned_trace(killed_at=105.0))

    assert figures["attempts_burned_never_started"] == 1
    assert figures["attempts_burned_in_claim_window"] == 0
    assert figures["examples"]["burned"] == [
        "job id=1 attempt 1 claimed by worker pid 100, killed 5.000s after claiming it"
    ]
    assert "1 attempt(s) burned on jobs that never started" in figures["broken"]


def test_a_kill_right_after_the_claim_is_told_apart_but_still_counted() -> None:
    figures = audit(burned_trace(killed_at=100.2))

    assert figures["attempts_burned_in_claim_window"] == 1
    assert figures["attempts_burned_never_started"] == 1


def test_a_call_failing_outside_every_fault_breaks_a_promise() -> None:
    restart = Fault("restart_db", 5.0, 8.0)
    log = [("err", 6.0, 7.0, "DatabaseUnavailable: down"), ("err", 9.0, 9.1, "OperationalError")]
    figures = audit(evidence([], {}, faults=[restart], enqueue_log=log))

    assert figures["enqueue_errors"] == 2
    assert figures["examples"]["failed_outside_faults"] == ["enqueue at 9.000: OperationalError"]


def test_half_a_batch_and_a_damaged_file_break_promises() -> None:
    kill = Fault("kill_enqueuer", 1.0, 1.1, 300, "enqueuer", half="n=50..: 20 of 50 stored")
    figures = audit(evidence([], {}, faults=[kill], integrity="*** page 3: btree error"))

    assert figures["half_stored_batches"] == 1
    assert any("integrity_check" in b for b in figures["broken"])


def test_time_to_resume_is_the_slowest_affected_worker() -> None:
    starts = [(WORKER, 8.5), (OTHER, 9.0), (WORKER, 12.0)]
    runs = [Run(i, i + 1, 1, pid, at, at + 0.01) for i, (pid, at) in enumerate(starts)]
    jobs = {i: job(i) for i in range(3)}
    restart = Fault("restart_db", 5.0, 8.0, affected=[WORKER, OTHER])
    figures = audit(evidence(runs, jobs, faults=[restart]))

    assert figures["resume_seconds"]["workers"]["restart_db"] == {
        "count": 1, "p50": 1.0, "max": 1.0,
    }  # fmt: skip
    assert figures["resume_seconds"]["outage"]["restart_db"]["max"] == 3.0


def test_a_worker_with_every_slot_busy_is_not_waiting_to_resume() -> None:
    long_runs = [Run(i, i + 1, 1, WORKER, 4.0, 20.0) for i in range(4)]
    runs = [*long_runs, Run(4, 5, 1, OTHER, 8.5, 8.6), Run(5, 6, 1, WORKER, 20.5, 20.6)]
    restart = Fault("restart_db", 5.0, 8.0, affected=[WORKER, OTHER])
    figures = audit(evidence(runs, {i: job(i) for i in range(6)}, faults=[restart]))

    assert figures["resume_seconds"]["workers"]["restart_db"]["max"] == 0.5
