"""Bulk inserts line up with their input; schedule cursors move once, with their jobs."""

from __future__ import annotations

from datetime import timedelta

from tickq import FrozenClock
from tickq.store import ScheduleMove, SqlStore

from .conftest import new_job


def test_a_bulk_insert_returns_ids_in_input_order_with_clashes_resolved(
    store: SqlStore,
) -> None:
    [held] = store.insert([new_job(unique_key="k-7")])
    jobs = [new_job(unique_key=f"k-{i % 1100}") for i in range(1300)]  # two chunks
    ids = store.insert(jobs)
    assert len(ids) == 1300 and ids[7] == held
    assert ids[1100:] == ids[:200]  # the repeated keys got the first ones' ids
    assert len(set(ids)) == 1100
    keys = {j.id: j.unique_key for j in store.list_jobs(limit=2000)}
    assert all(keys[id_] == job.unique_key for id_, job in zip(ids, jobs, strict=True))


def test_a_schedule_cursor_moves_once_and_only_from_where_it_was_read(
    store: SqlStore, clock: FrozenClock
) -> None:
    slot = clock.now()
    job = new_job(type="nightly", unique_key=f"nightly@{slot.isoformat()}")
    first = ScheduleMove("nightly", None, slot, slot, [job])
    [inserted] = store.enqueue_schedules([first])
    assert inserted is not None and list(inserted) == [job.unique_key]
    assert store.enqueue_schedules([first]) == [None]  # another tick moved it first
    cursors = store.tick_state().cursors
    assert cursors == {"nightly": slot}
    later = slot + timedelta(days=1)
    move = ScheduleMove("nightly", slot, later, later, [])
    assert store.enqueue_schedules([move]) == [{}]
    assert store.tick_state().cursors == {"nightly": later}
    assert [s["name"] for s in store.schedule_states()] == ["nightly"]
    assert store.enqueue_schedules([]) == []


def test_start_tick_counts_ticks_and_reads_the_backlog(store: SqlStore, clock: FrozenClock) -> None:
    store.insert([new_job(), new_job()])
    state = store.start_tick()
    assert (state.now, state.due, state.earliest_pending) == (clock.now(), 2, clock.now())
    clock.advance(minutes=5)
    store.start_tick()
    last, ticks, now = store.last_tick()
    assert (last, ticks, now) == (clock.now(), 2, clock.now())
    assert store.tick_backlog() == (2, state.now, clock.now())
