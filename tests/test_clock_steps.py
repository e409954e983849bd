"""On SQLite every process brings its own wall clock: a step (NTP, a VM resumed) or a
process whose clock runs ahead must neither rescue a live job nor fire a schedule slot
early or twice. Leases are measured on the host's monotonic clock, which no step moves,
and a schedule slot comes due once most live processes' clocks say so (issue 23, 4).

The clocks are ``SharedClock`` files (real time plus an offset the test writes), read by
real ``tickq worker`` processes (``apps/clock_app.py``)."""

from __future__ import annotations

import signal
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tickq import Queue
from tickq.clock import FrozenClock, monotonic_domain_of
from tickq.store.clocks import majority
from tickq.testing import SharedClock
from workerproc import WorkerProcess, eventually, runs

APP = "apps.clock_app:q"
HOUR = timedelta(hours=1)

pytestmark = pytest.mark.skipif(
    monotonic_domain_of(SharedClock.__new__(SharedClock)) is None,
    reason="the host's monotonic clock can't be named here (Linux only)",
)


def sqlite_queue(tmp_path: Path, clock: object, lease: float = 5.0) -> Queue:
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}", clock=clock, lease_seconds=lease, strict=False)  # type: ignore[arg-type]
    q.migrate()
    return q


def test_a_wall_clock_step_either_way_rescues_no_live_lease(tmp_path: Path) -> None:
    clock = SharedClock(tmp_path / "clock")
    q = sqlite_queue(tmp_path, clock)
    q.enqueue_many([("work", {})] * 3)
    store = q._runtime.store
    held = store.claim("owner-a", 3, 5.0)
    clock.advance(HOUR)  # the lease ran out an hour ago, by the wall clock
    assert store.rescue_expired() == []
    clock.advance(-2 * HOUR)
    assert store.rescue_expired() == []
    assert {j.status.value for j in q.list_jobs()} == {"running"}
    assert len(held) == 3
    q.close()


def test_a_lease_still_runs_out_on_the_monotonic_clock(tmp_path: Path) -> None:
    clock = SharedClock(tmp_path / "clock")
    q = sqlite_queue(tmp_path, clock)
    q.enqueue_many([("work", {})] * 2)
    store = q._runtime.store
    store.claim("owner-a", 2, 0.3)
    clock.advance(-HOUR)  # the wall clock went back: the lease still ends in 0.3 s
    assert store.rescue_expired() == []
    time.sleep(0.35)
    rescued = store.rescue_expired()
    assert len(rescued) == 2 and len(rescued.refunded) == 2  # never confirmed: refunded
    q.close()


def test_a_lease_from_another_clock_runs_out_by_the_wall_clock(tmp_path: Path) -> None:
    """A test's FrozenClock (or another boot) can't be compared on the monotonic clock:
    such leases run out by the wall clock, as before."""
    frozen = FrozenClock()
    q = sqlite_queue(tmp_path, frozen)
    q.enqueue("work")
    q._runtime.store.claim("owner-a", 1, 5.0)
    frozen.advance(seconds=6)
    assert len(q._runtime.store.rescue_expired()) == 1  # its own clock: monotonic
    q.enqueue("work")
    q._runtime.store.claim("owner-b", 1, 5.0)
    q.close()
    other = sqlite_queue(tmp_path, SharedClock(tmp_path / "clock"))
    other.clock.advance(seconds=-1)  # type: ignore[attr-defined]
    assert other._runtime.store.rescue_expired() == []
    other.clock.advance(seconds=13)  # type: ignore[attr-defined]
    assert len(other._runtime.store.rescue_expired()) == 1
    other.close()


def test_the_majority_of_two_clocks_is_the_slower_and_of_three_the_middle() -> None:
    assert majority([5.0]) == 5.0
    assert majority([120.0, 0.0]) == 0.0
    assert majority([0.0, 120.0, 30.0]) == 30.0
    assert majority([0.0, 1.0, 2.0, 3.0]) == 1.0


def test_a_tick_whose_clock_runs_ahead_waits_for_the_others(tmp_path: Path) -> None:
    """In one process: two queues, one clock two minutes ahead. The fast one's tick sees
    the time the slower clock says (both are live), so its schedule slot waits."""
    slow, fast = SharedClock(tmp_path / "slow"), SharedClock(tmp_path / "fast")
    fast.advance(minutes=2)
    q_slow, q_fast = sqlite_queue(tmp_path, slow), sqlite_queue(tmp_path, fast)
    q_slow.tick()
    before = datetime.now(UTC)
    ticked = datetime.fromisoformat(q_fast.tick()["ticked_at"])
    assert before - timedelta(seconds=1) <= ticked <= datetime.now(UTC) + timedelta(seconds=1)
    q_slow.close(), q_fast.close()


def test_a_backward_step_fires_no_slot_twice(tmp_path: Path) -> None:
    clock = SharedClock(tmp_path / "clock")
    q = sqlite_queue(tmp_path, clock)

    @q.schedule(every=timedelta(minutes=1))
    def beat() -> None: ...

    first = q.tick()["schedules_enqueued"]
    clock.advance(minutes=-30)
    assert q.tick()["schedules_enqueued"] == []
    clock.advance(minutes=30)
    again = q.tick()["schedules_enqueued"]
    assert {e["slot"] for e in again}.isdisjoint(e["slot"] for e in first)
    q.close()


def env(tmp_path: Path, url: str, clock: Path, **more: str) -> dict[str, str]:
    return {"TICKQ_DATABASE_URL": url, "TICKQ_TEST_RUNS": str(tmp_path / "runs"),
            "TICKQ_TEST_CLOCK": str(clock), **more}  # fmt: skip


def starts(folder: Path) -> Counter[int]:
    return Counter(n["id"] for n in runs(folder) if n["event"] == "start")


@pytest.mark.timeout(90)
def test_a_forward_step_mid_run_reruns_none_of_a_workers_12_jobs(tmp_path: Path) -> None:
    """The issue's run: 12 jobs running, the worker's clock steps an hour ahead; its own
    rescue took all 12 back and each ran twice."""
    (tmp_path / "runs").mkdir()
    url = f"sqlite:///{tmp_path / 'q.db'}"
    clock = SharedClock(tmp_path / "clock")
    q = sqlite_queue(tmp_path, clock, lease=3.0)
    ids = q.enqueue_many([("work", {"seconds": 2.5})] * 12)
    worker_env = env(tmp_path, url, tmp_path / "clock", TICKQ_TEST_LEASE="3")
    with WorkerProcess("--concurrency", "12", app=APP, **worker_env) as w:
        eventually(lambda: len(starts(tmp_path / "runs")) == 12, what="12 jobs to start")
        clock.advance(HOUR)
        eventually(lambda: q.stats()["by_status"]["done"] == 12, timeout=60, what="all done")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.output
    assert starts(tmp_path / "runs") == Counter(dict.fromkeys(ids, 1)), w.output
    assert all(q.get_job(i).attempts == 1 for i in ids)  # type: ignore[union-attr]
    assert "rescued as" not in w.output and "rescued 0" in w.output
    q.close()


@pytest.mark.timeout(120)
def test_two_workers_two_minutes_apart_rerun_nothing_and_fire_no_slot_early(
    tmp_path: Path,
) -> None:
    """The issue's second run: one worker's clock two minutes ahead of the other's reran
    9-12 of 40 jobs (its rescue took the other's live jobs), and fired every slot of a
    schedule two minutes early."""
    (tmp_path / "runs").mkdir()
    url = f"sqlite:///{tmp_path / 'q.db'}"
    SharedClock(tmp_path / "true")
    SharedClock(tmp_path / "fast").advance(minutes=2)
    q = sqlite_queue(tmp_path, SharedClock(tmp_path / "true"), lease=3.0)
    common = {"TICKQ_TEST_LEASE": "3", "TICKQ_TEST_EVERY": "1"}
    args = ("--concurrency", "4", "--poll-interval", "0.2")
    with WorkerProcess(*args, app=APP, **env(tmp_path, url, tmp_path / "true", **common)) as a:
        a.wait_for_line("worker")  # started, and its clock noted
        eventually(lambda: any(n["event"] == "slot" for n in runs(tmp_path / "runs")),
                   what="the first slot")  # fmt: skip
        with WorkerProcess(*args, app=APP, **env(tmp_path, url, tmp_path / "fast", **common)) as b:
            ids = q.enqueue_many([("work", {"seconds": 0.4})] * 40)
            eventually(lambda: all(q.get_job(i).status.value == "done" for i in ids),  # type: ignore[union-attr]
                       timeout=90, what="40 jobs done")  # fmt: skip
            time.sleep(2)  # a few more slots, each due on both clocks
            for w in (a, b):
                w.send(signal.SIGTERM)
            assert a.wait() == 0 and b.wait() == 0, a.output + b.output
    notes = runs(tmp_path / "runs")
    reruns = {i: n for i, n in starts(tmp_path / "runs").items() if n > 1 and i in ids}
    assert not reruns, f"jobs run more than once: {reruns}"
    slots = [n for n in notes if n["event"] == "slot"]
    by_b = [n for n in slots if n["pid"] == b.pid]
    assert by_b, "the fast worker ran no slot at all"
    ahead = {n["slot"]: datetime.fromisoformat(n["slot"]).timestamp() - n["real"] for n in slots}
    early = [(slot, round(s, 1)) for slot, s in ahead.items() if s > 1.0]
    assert not early, f"slots run before their time (slot, seconds early): {early}"
    assert len({n["slot"] for n in slots}) == len(slots), "a slot ran twice"
    q.close()
