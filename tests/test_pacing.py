"""The worker's pacing rules (``tickq.pacing.Pacing``), on a ``FrozenClock``: no sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tickq import FrozenClock
from tickq.clock import SystemClock, monotonic_of
from tickq.pacing import BATCH_WAIT, LOOK_AGAIN, STALL, Pacing


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2026, 5, 4, 9, 0, tzinfo=UTC))


def pacing(clock: FrozenClock, poll: float = 5.0, lease: float = 60.0) -> Pacing:
    return Pacing(clock.monotonic, poll, lease)


def test_the_frozen_clock_monotonic_reading_moves_with_it_and_never_back(
    clock: FrozenClock,
) -> None:
    assert clock.monotonic() == 0.0
    clock.advance(seconds=1.5)
    clock.advance(timedelta(minutes=1))
    assert clock.monotonic() == 61.5
    clock.set(clock.now() - timedelta(hours=1))  # the wall clock may go back...
    assert clock.monotonic() == 61.5  # ...the monotonic reading doesn't
    clock.set(clock.now() + timedelta(hours=2))
    assert clock.monotonic() == 61.5 + 7200


def test_a_clock_without_a_monotonic_reading_falls_back_to_time_monotonic() -> None:
    class WallOnly:
        def now(self) -> datetime:
            return datetime.now(UTC)

    import time

    assert monotonic_of(WallOnly()) is time.monotonic
    assert monotonic_of(SystemClock())() == pytest.approx(time.monotonic(), abs=1.0)


def test_rescue_comes_due_every_quarter_lease_or_poll_whichever_is_shorter(
    clock: FrozenClock,
) -> None:
    p = pacing(clock, poll=5.0, lease=12.0)
    assert p.rescue_due()  # at start
    p.rescued()
    assert not p.rescue_due()
    clock.advance(seconds=2.9)
    assert not p.rescue_due()
    clock.advance(seconds=0.1)  # lease 12 / 4 = 3 s
    assert p.rescue_due()
    p.poll_every(1.0)  # a transaction pooler found: poll (and rescue) every second
    p.rescued()
    clock.advance(seconds=1.0)
    assert p.rescue_due()


def test_claims_only_free_slots_and_only_when_something_may_be_due(clock: FrozenClock) -> None:
    p = pacing(clock, poll=5.0)
    assert p.claimable(free=3, due=False) == 3  # nothing looked at yet: look
    assert p.claimable(free=0, due=True) == 0
    p.looked(clock.monotonic(), due_in=None)  # nothing pending: wait a poll interval
    assert p.claimable(free=3, due=False) == 0
    assert p.claimable(free=3, due=True) == 3  # an enqueue woke the worker
    clock.advance(seconds=5)
    assert p.claimable(free=2, due=False) == 2


def test_claims_ahead_what_the_slots_get_through_in_20_ms_at_the_recent_pace(
    clock: FrozenClock,
) -> None:
    p = pacing(clock, poll=5.0)
    assert p.ahead(concurrency=4) == 0  # pace unknown: none ahead
    p.ran([0.001, 0.001])
    assert p.ahead(concurrency=4) == 80  # 4 slots x 20 ms / 1 ms
    p.ran([0.011])  # the moving average: 0.7 x 1 ms + 0.3 x 11 ms = 4 ms
    assert p.ahead(concurrency=4) == 20
    p.ran([0.5] * 3)
    assert p.ahead(concurrency=4) == 0  # slow jobs: none would start within the window
    p.forget_pace()
    p.ran([0.000001])
    assert p.ahead(concurrency=10) == 100  # capped
    p.forget_pace()
    assert p.ahead(concurrency=10) == 0


def test_the_next_look_is_when_the_next_job_comes_due_but_not_too_soon(
    clock: FrozenClock,
) -> None:
    p = pacing(clock, poll=5.0)
    p.looked(clock.monotonic(), due_in=2.0)
    assert p.next_poll == 2.0
    p.looked(clock.monotonic(), due_in=0.0)  # due now, other workers held the rows
    assert p.next_poll == LOOK_AGAIN
    p.looked(clock.monotonic(), due_in=60.0)
    assert p.next_poll == 5.0
    p.retry_soon([1.0, 3.0])  # a retry due in 1 s comes before the poll
    assert p.next_poll == 1.0
    p.retry_soon([])
    assert p.next_poll == 1.0


def test_outcomes_wait_for_half_the_slots_or_the_batch_wait(clock: FrozenClock) -> None:
    p = pacing(clock)
    p.first_unrecorded()
    assert not p.batch_ready(free=1, target=8)
    assert p.batch_ready(free=4, target=8)
    clock.advance(seconds=BATCH_WAIT)
    assert p.batch_ready(free=1, target=8)


def test_idle_time_is_until_the_first_thing_that_needs_doing(clock: FrozenClock) -> None:
    p = pacing(clock, poll=5.0, lease=60.0)
    p.rescued()  # next rescue in 5 s
    p.looked(clock.monotonic(), due_in=2.0)
    quiet = dict(unrecorded=False, schedules=False, waiting=0, last_progress=0.0)
    assert p.idle_for(**quiet, free=1, due=False) == 2.0
    assert p.idle_for(**quiet, free=1, due=True) == 0.0
    assert p.idle_for(**quiet, free=0, due=True) == 5.0  # busy: only the rescue
    p.slots_enqueued(next_slot_in=0.5)
    assert p.idle_for(**{**quiet, "schedules": True}, free=0, due=False) == 0.5
    busy = {**quiet, "waiting": 2, "last_progress": clock.monotonic()}
    assert p.idle_for(**busy, free=0, due=False) == STALL
    p.first_unrecorded()
    clock.advance(seconds=BATCH_WAIT / 2)
    assert p.idle_for(**{**quiet, "unrecorded": True}, free=1, due=True) == pytest.approx(
        BATCH_WAIT / 2
    )


def test_jobs_waiting_in_line_stall_after_a_second_without_progress(clock: FrozenClock) -> None:
    p = pacing(clock)
    start = clock.monotonic()
    assert not p.stalled(waiting=0, last_progress=start - 10)
    assert not p.stalled(waiting=3, last_progress=start)
    clock.advance(seconds=STALL + 0.01)
    assert p.stalled(waiting=3, last_progress=start)


def test_a_due_time_heard_of_wakes_the_idle_worker_then_not_the_poll(clock: FrozenClock) -> None:
    p = pacing(clock, poll=600.0)
    p.looked(clock.monotonic(), None)  # nothing pending: next look in 600 s
    idle = {"unrecorded": False, "schedules": False, "waiting": 0, "last_progress": 0.0,
            "free": 1, "due": False}  # fmt: skip
    p.rescued()
    assert p.idle_for(**idle) == pytest.approx(15.0)  # only the next rescue (lease / 4)
    p.heard_due(clock.monotonic() + 1.0)  # another process: a retry due in 1 s
    p.heard_due(clock.monotonic() + 3.0)  # a later one changes nothing
    assert p.idle_for(**idle) == pytest.approx(1.0)
    assert p.claimable(1, due=False) == 0
    clock.advance(seconds=1.0)
    assert p.claimable(1, due=False) == 1
    p.looked(clock.monotonic(), None)  # that look saw the job: the poll rules again
    assert p.claimable(1, due=False) == 0
    assert p.idle_for(**idle) == pytest.approx(14.0)


def test_a_due_time_heard_during_a_look_outlives_it(clock: FrozenClock) -> None:
    p = pacing(clock, poll=600.0)
    started = clock.monotonic()
    p.heard_due(started + 2.0)  # heard while the look ran: it may not have seen the job
    clock.advance(seconds=0.1)
    p.looked(started, None)  # the look resets next_poll, not the due time heard
    clock.advance(seconds=1.9)
    assert p.claimable(1, due=False) == 1


def idle_pacing(clock: FrozenClock) -> Pacing:
    return Pacing(clock.monotonic, 5.0, 60.0, idle_check=300.0)


def idle_sleep(p: Pacing) -> float:
    return p.idle_for(unrecorded=False, schedules=False, waiting=0, last_progress=0.0,
                      free=10, due=False)  # fmt: skip


def test_idle_the_next_look_and_rescue_wait_for_idle_check(clock: FrozenClock) -> None:
    p = idle_pacing(clock)
    p.rescued(idle=True)
    p.lease_expires(None)  # nothing runs anywhere: nothing to rescue
    p.looked(clock.monotonic(), None, idle=True)
    assert idle_sleep(p) == 300.0
    p.looked(clock.monotonic(), None, idle=False)  # holding jobs: the poll interval
    assert idle_sleep(p) == 5.0


def test_idle_a_known_due_time_or_lease_expiry_comes_first(clock: FrozenClock) -> None:
    p = idle_pacing(clock)
    p.rescued(idle=True)
    p.lease_expires(42.0)  # another worker's job: its lease runs out in 42 s
    p.looked(clock.monotonic(), 120.0, idle=True)  # a job due in 2 minutes
    assert idle_sleep(p) == pytest.approx(42.05)
    clock.advance(seconds=42.05)
    assert p.rescue_due()
    p.rescued(idle=True)
    p.lease_expires(None)
    assert idle_sleep(p) == pytest.approx(120.0 - 42.05)
    p.heard_due(clock.monotonic() + 1.5)  # a delayed enqueue's NOTIFY
    assert idle_sleep(p) == pytest.approx(1.5)


def test_claiming_brings_back_the_busy_pace(clock: FrozenClock) -> None:
    p = idle_pacing(clock)
    p.rescued(idle=True)
    p.lease_expires(None)
    p.looked(clock.monotonic(), None, idle=True)
    p.busy()
    assert idle_sleep(p) == 5.0
    assert p.next_rescue == pytest.approx(clock.monotonic() + 5.0)  # min(lease / 4, poll)


def test_without_listen_an_idle_worker_looks_every_poll(clock: FrozenClock) -> None:
    p = idle_pacing(clock)
    p.poll_every(1.0)  # a transaction pooler found out: nothing tells it of new jobs
    p.rescued(idle=True)
    p.looked(clock.monotonic(), None, idle=True)
    assert idle_sleep(p) == 1.0
