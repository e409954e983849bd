"""The holdings: one record per held job, found by its id and attempt, under one lock."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tickq import Queue, Snooze
from tickq.held import Holdings, key_of
from tickq.job import Job, JobState
from tickq.store import Outcome


def job(job_id: int, attempt: int = 1) -> Job:
    now = datetime.now(UTC)
    return Job(job_id, "quick", "default", {}, JobState.RUNNING, 0, attempt, 4, now, None, None,
               now, now)  # fmt: skip


def test_a_job_claimed_again_with_a_new_attempt_is_another_record() -> None:
    holdings = Holdings()
    first, second = job(7, attempt=1), job(7, attempt=2)
    holdings.add([first], 30)
    holdings.add([second], 30)
    assert key_of(first) != key_of(second) and len(holdings) == 2
    holdings.start(second)
    first_run, second_run = holdings.get(first), holdings.get(second)
    assert first_run is not None and second_run is not None and first_run is not second_run
    assert second_run.started and not first_run.started
    holdings.drop([first])  # the older attempt's drop leaves the newer claim held
    assert holdings.get(first) is None and holdings.get(second) is second_run


def test_a_refunded_attempt_claimed_again_replaces_the_lost_run() -> None:
    # A refund gives the attempt back: the new claim has the old one's id and attempt.
    holdings = Holdings()
    old, new = job(7), job(7)._replace(lease_owner="same-owner")
    holdings.add([old], 30)
    renew, _ = holdings.to_renew()
    assert [h.job.id for h in holdings.renewed(renew, set(), [], 0.0)] == [7]  # gone
    assert holdings.lost_in_hand() == [old] and holdings.is_lost(old)
    holdings.add([new], 30)
    assert not holdings.is_lost(new) and holdings.is_lost(old)  # the old run is not ours
    assert holdings.lost_in_hand() == [old]  # still running: to cancel
    holdings.finish(Outcome(old, "succeeded"))  # it ends late
    assert holdings.collect() == ([], [Outcome(old, "succeeded")])  # stale, not recorded
    holdings.finish(Outcome(new, "succeeded"))
    assert holdings.collect() == ([Outcome(new, "succeeded")], [])
    assert holdings.unrecorded() == [Outcome(new, "succeeded")]


def test_dropping_a_run_whose_attempt_was_claimed_again_keeps_the_new_claim() -> None:
    # A snooze, a suspended workflow or a refund gives the attempt back; another thread of
    # the process claims the job again (same id and attempt) before the first run's thread
    # drops its record. That drop must not take the new claim's record (its lease would go
    # unrenewed and its outcome count as stale: the job stuck running until the lease ran
    # out, as a workflow run waiting for an event was).
    holdings = Holdings()
    old, new = job(7), job(7)._replace(lease_owner="same-owner")
    holdings.add([old], 30)
    holdings.add([new], 30)
    assert holdings.drop([old]) == []  # unlinked from the new claim, not dropped as held
    assert holdings.get(new) is not None and holdings.get(old) is None and len(holdings) == 1
    assert not holdings.is_lost(new)
    holdings.finish(Outcome(new, "succeeded"))
    assert holdings.collect() == ([Outcome(new, "succeeded")], [])
    assert holdings.drop([new]) == [new] and len(holdings) == 0


def test_a_cycle_that_gave_an_attempt_back_leaves_its_new_claim_to_the_other_thread(
    tmp_path: Path,
) -> None:
    """Two threads of one process run process_jobs; a job snoozes (its attempt given back)
    and the other thread claims it again before the first drops its record: the new run
    stays held (its lease renewed) while it runs, and ends done."""
    q = Queue(f"sqlite:///{tmp_path / 'again.db'}")
    q.migrate()
    holdings = q._runtime.lease_keeper.holdings
    runs: list[int] = []
    claimed_again, old_dropped = threading.Event(), threading.Event()

    @q.job()
    def twice() -> None:
        if not runs:
            runs.append(0)
            raise Snooze(0)  # due again at once, its attempt given back
        claimed_again.set()
        old_dropped.wait(10)
        runs.append(len(holdings))  # the new claim's record, still held

    keeper = q._runtime.lease_keeper
    original, first = keeper.drop, threading.Lock()

    def late_drop(jobs: Any) -> None:  # the snoozed run's drop comes after the new claim
        jobs = list(jobs)
        if jobs and first.acquire(blocking=False):  # the first drop: the snoozed run's
            claimed_again.wait(10)
            original(jobs)
            old_dropped.set()
            return
        original(jobs)

    keeper.drop = late_drop  # type: ignore[method-assign]
    q.enqueue("twice")

    def work() -> None:
        deadline = time.monotonic() + 10
        while len(runs) < 2 and time.monotonic() < deadline:
            q.process_jobs(limit=1)
            time.sleep(0.001)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert runs == [0, 1], "the new run's record was dropped with the old one"
    assert q.stats()["by_status"]["done"] == 1, q.stats()["by_status"]
    q.close()


def test_a_start_is_sent_once_and_again_after_a_failed_round_trip() -> None:
    holdings = Holdings()
    waiting, running = job(1), job(2)
    holdings.add([waiting, running], 30)
    holdings.start(running)
    assert holdings.take_started() == [running]
    assert holdings.take_started() == []
    holdings.unconfirm([running])  # that round trip failed
    assert holdings.to_renew()[1] == [2]  # a renewal may send it instead
    assert holdings.take_started() == [running]


def test_outcomes_come_in_order_and_count_what_waits() -> None:
    holdings = Holdings()
    a, b = job(1), job(2)
    holdings.add([a, b], 30)
    assert holdings.finish(Outcome(b, "failed")) == (1, False)
    assert holdings.finish(Outcome(a, "succeeded")) == (2, False)
    assert holdings.collect()[0] == [Outcome(b, "failed"), Outcome(a, "succeeded")]
    assert holdings.timing and holdings.count_in_hand() == 0
    assert holdings.finish(Outcome(job(3), "succeeded")) == (0, True)  # not held: ignored


def test_threads_adding_and_dropping_at_once_leave_exactly_what_was_not_dropped() -> None:
    holdings = Holdings()
    per_thread, threads = 500, 8
    start = threading.Barrier(threads)
    kept: list[Job] = []  # the jobs not dropped

    def churn(n: int) -> None:
        jobs = [job(n * per_thread + i) for i in range(per_thread)]
        start.wait()
        for j in jobs:
            holdings.add([j], 30)
            holdings.start(j)
            holdings.finish(Outcome(j, "succeeded"))
        holdings.drop(jobs[::2])
        kept.extend(jobs[1::2])

    workers = [threading.Thread(target=churn, args=(n,)) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert len(holdings) == threads * per_thread // 2
    assert all(holdings.get(j) is not None for j in kept)
    assert holdings.count_in_hand() == len(holdings.in_hand()) == len(kept)
    fresh, stale = holdings.collect()
    assert len(fresh) == len(kept) and stale == [] and holdings.count_in_hand() == 0
    assert holdings.unrecorded() == fresh
