"""Durable workflows on both backends, driven by ticks on an injected clock (no worker):
the checkout with its event sent before and after the wait, an onboarding drip across a
3-day sleep, a gather of 20 steps, StepFailed caught and uncaught, WorkflowMismatch,
rollback of start and send_event, cancel_workflow, recorded values, bad input."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from conftest import run_tickq
from tickq import FrozenClock, InvalidTransition, Queue, StepFailed, WorkflowContext
from tickq.errors import JobNotFound

DAY = timedelta(days=1)


class Shop:
    """A queue with the issue's checkout workflow and a ledger of side effects."""

    def __init__(self, url: str, clock: FrozenClock) -> None:
        self.q = q = Queue(url, clock=clock)
        q.migrate()
        self.clock = clock
        self.ledger: list[tuple[str, Any]] = []
        ledger = self.ledger

        @q.job(max_attempts=5)
        def charge(order_id: int) -> dict[str, int]:
            ledger.append(("charge", order_id))
            return {"charged": order_id}

        @q.job()
        def ship(item: str) -> str:
            ledger.append(("ship", item))
            return f"shipped {item}"

        @q.job()
        def cancel_order(order_id: int) -> None:
            ledger.append(("cancel", order_id))

        @q.job()
        def ask_for_review(order_id: int) -> None:
            ledger.append(("review", order_id))

        @q.workflow()
        def checkout(wf: WorkflowContext, order_id: int, items: list[str]) -> str:
            receipt = wf.run(charge, order_id=order_id)
            assert receipt == {"charged": order_id}
            paid = wf.wait_for("invoice.paid", key=f"order:{order_id}", timeout=timedelta(days=7))
            if paid is None:
                wf.run(cancel_order, order_id=order_id)
                return "cancelled"
            shipped = wf.gather([wf.start(ship, item=i) for i in items])
            wf.sleep(timedelta(days=3))
            wf.run(ask_for_review, order_id=order_id)
            return f"done: {', '.join(shipped)}; paid {paid['amount']}"

        self.checkout = checkout

    def tick(self, limit: int = 100) -> dict[str, Any]:
        return self.q.tick(limit=limit)["jobs"]


@pytest.fixture
def shop(db_url: str, clock: FrozenClock) -> Iterator[Shop]:
    s = Shop(db_url, clock)
    yield s
    s.q.close()


def kinds(run: Any) -> list[tuple[str, str, str]]:
    return [(s.kind, s.name, s.status) for s in run.steps]


def test_checkout_with_the_event_sent_after_the_wait(shop: Shop) -> None:
    q = shop.q
    run_id = shop.checkout.start(order_id=7, items=["a", "b"])
    shop.tick()
    run = q.workflow_run(run_id)
    assert run.status == "waiting"
    assert kinds(run) == [("job", "charge", "done"), ("event", "invoice.paid", "waiting")]
    shop.tick()  # nothing due: the run waits without a replay
    assert shop.ledger == [("charge", 7)]
    q.send_event("invoice.paid", key="order:7", data={"amount": 1999})
    jobs = shop.tick()  # the event, then both ships, then the run goes to sleep: one tick
    assert sorted(shop.ledger[1:]) == [("ship", "a"), ("ship", "b")]
    assert jobs["failed"] == 0
    run = q.workflow_run(run_id)
    assert run.status == "waiting" and run.steps[-1].kind == "sleep"
    assert run.steps[1].result == {"amount": 1999}
    shop.clock.advance(3 * DAY - timedelta(seconds=1))
    shop.tick()
    assert q.workflow_run(run_id).status == "waiting"  # not before the timer
    shop.clock.advance(timedelta(seconds=2))
    shop.tick()  # the first tick after the sleep runs what follows it
    run = q.workflow_run(run_id)
    assert run.status == "done", run
    assert run.result == "done: shipped a, shipped b; paid 1999"
    assert shop.ledger == [("charge", 7), ("ship", "a"), ("ship", "b"), ("review", 7)]
    assert [s.attempts for s in run.steps if s.kind == "job"] == [1, 1, 1, 1]
    assert all(s.job_id for s in run.steps if s.kind == "job")


def test_checkout_with_the_event_sent_before_the_wait(shop: Shop) -> None:
    q = shop.q
    q.send_event("invoice.paid", key="order:8", data={"amount": 5})  # before the run exists
    run_id = shop.checkout.start(order_id=8, items=["x"])
    shop.tick()  # charge, the kept event received at once, ship, then the sleep
    run = q.workflow_run(run_id)
    assert kinds(run)[:3] == [
        ("job", "charge", "done"), ("event", "invoice.paid", "done"), ("job", "ship", "done"),
    ]  # fmt: skip
    shop.clock.advance(3 * DAY + timedelta(seconds=1))
    shop.tick()
    assert q.workflow_run(run_id).result == "done: shipped x; paid 5"


def test_an_event_reaches_every_waiting_run_once(shop: Shop) -> None:
    q = shop.q
    first = shop.checkout.start(order_id=9, items=[])
    second = shop.checkout.start(order_id=9, items=[])
    shop.tick()
    q.send_event("invoice.paid", key="order:9", data={"amount": 1})
    q.send_event("invoice.paid", key="order:other", data={"amount": 2})
    shop.tick()
    shop.clock.advance(3 * DAY + timedelta(seconds=1))
    shop.tick()
    for run_id in (first, second):
        run = q.workflow_run(run_id)
        assert run.result == "done: ; paid 1"
        assert len([s for s in run.steps if s.kind == "event"]) == 1
    late = shop.checkout.start(order_id=9, items=[])  # the event is still kept: it gets it
    shop.tick()
    assert q.workflow_run(late).steps[1].status == "done"


def test_a_wait_times_out_without_its_event(shop: Shop) -> None:
    run_id = shop.checkout.start(order_id=10, items=["a"])
    shop.tick()
    shop.clock.advance(7 * DAY + timedelta(seconds=1))
    shop.tick()
    run = shop.q.workflow_run(run_id)
    assert run.result == "cancelled"
    assert run.steps[1].status == "timed_out"
    assert shop.ledger == [("charge", 10), ("cancel", 10)]


def test_onboarding_drip_across_a_3_day_sleep_driven_only_by_ticks(
    db_url: str, clock: FrozenClock
) -> None:
    q = Queue(db_url, clock=clock)
    q.migrate()
    sent: list[str] = []

    @q.job()
    def send_email(user_id: int, template: str) -> None:
        sent.append(template)

    @q.job()
    def has_activated(user_id: int) -> bool:
        return user_id % 2 == 0

    @q.workflow()
    def onboarding(wf: WorkflowContext, user_id: int) -> str:
        wf.run(send_email, user_id=user_id, template="welcome")
        wf.sleep(timedelta(days=3))
        if wf.run(has_activated, user_id=user_id):
            return "activated"
        wf.run(send_email, user_id=user_id, template="nudge")
        return "nudged"

    try:
        lazy, keen = onboarding.start(user_id=1), onboarding.start(user_id=2)
        q.tick()
        assert sent == ["welcome", "welcome"]
        for _ in range(3):  # ticks every 15 minutes for a while: nothing to do
            clock.advance(timedelta(minutes=15))
            assert q.tick()["jobs"]["claimed"] == 0
        clock.advance(3 * DAY)
        q.tick()  # one tick after the sleep ends: the check and the nudge, that tick
        assert q.workflow_run(lazy).result == "nudged"
        assert q.workflow_run(keen).result == "activated"
        assert sent == ["welcome", "welcome", "nudge"]
    finally:
        q.close()


def test_a_gather_of_20_steps(db_url: str, clock: FrozenClock) -> None:
    q = Queue(db_url, clock=clock)
    q.migrate()

    @q.job()
    def square(n: int) -> int:
        return n * n

    @q.workflow()
    def fan(wf: WorkflowContext, count: int) -> int:
        return sum(wf.gather([wf.start(square, n=n) for n in range(count)]))

    try:
        run_id = fan.start(count=20)
        q.tick(limit=200)
        run = q.workflow_run(run_id)
        assert run.status == "done" and run.result == sum(n * n for n in range(20))
        assert len(run.steps) == 20 and {s.status for s in run.steps} == {"done"}
    finally:
        q.close()


def test_step_failed_caught_and_uncaught(db_url: str, clock: FrozenClock) -> None:
    failed_runs: list[str] = []
    q = Queue(db_url, clock=clock, on_failure=lambda job: failed_runs.append(job.type))
    q.migrate()

    @q.job(max_attempts=2, backoff=[1])
    def flaky(n: int) -> None:
        raise ValueError(f"card {n} declined")

    @q.workflow()
    def careful(wf: WorkflowContext) -> str:
        try:
            wf.run(flaky, n=1)
        except StepFailed as exc:
            return f"caught {exc.job_id}: {exc.error.splitlines()[0] if exc.error else ''}"
        return "unreachable"

    @q.workflow()
    def careless(wf: WorkflowContext) -> str:
        wf.run(flaky, n=2)
        return "unreachable"

    try:
        caught, uncaught = careful.start(), careless.start()
        q.tick()
        clock.advance(timedelta(seconds=2))
        q.tick()
        run = q.workflow_run(caught)
        assert run.status == "done"
        assert run.result == f"caught {run.steps[0].job_id}: ValueError: card 1 declined"
        assert run.steps[0].status == "failed" and run.steps[0].attempts == 2
        bad = q.workflow_run(uncaught)
        assert bad.status == "failed" and "StepFailed" in (bad.error or "")
        assert "card 2 declined" in (bad.error or "")
        assert failed_runs.count("tickq.workflow") == 1  # the run alerts like a job
    finally:
        q.close()


def test_a_changed_workflow_fails_with_workflow_mismatch(db_url: str, clock: FrozenClock) -> None:
    q = Queue(db_url, clock=clock)
    q.migrate()
    version = {"now": 1}

    @q.job()
    def one() -> None: ...

    @q.job()
    def two() -> None: ...

    @q.workflow()
    def flow(wf: WorkflowContext) -> None:
        wf.run(one if version["now"] == 1 else two)
        wf.sleep(60)

    @q.job()
    def bystander() -> str:
        return "ran"

    try:
        run_id = flow.start()
        q.tick()
        version["now"] = 2  # a deploy changed the first step while the run slept
        other = bystander.enqueue()
        clock.advance(timedelta(seconds=61))
        q.tick()
        run = q.workflow_run(run_id)
        assert run.status == "failed"
        assert "WorkflowMismatch" in (run.error or "")
        assert "recorded job 'one' there, but the code now asks for job 'two'" in (run.error or "")
        assert q.get_job(other).result == "ran"  # it fails alone
    finally:
        q.close()


def test_recorded_values_are_the_same_on_every_replay(db_url: str, clock: FrozenClock) -> None:
    q = Queue(db_url, clock=clock)
    q.migrate()
    seen: list[tuple[Any, ...]] = []

    @q.job()
    def noop() -> None: ...

    @q.workflow()
    def values(wf: WorkflowContext) -> list[Any]:
        got = (wf.now().isoformat(), wf.random(), wf.uuid())
        seen.append(got)
        wf.run(noop)
        wf.sleep(10)
        return list(got)

    try:
        run_id = values.start()
        q.tick()
        clock.advance(timedelta(seconds=11))
        q.tick()
        assert len(seen) >= 2 and len(set(seen)) == 1
        assert q.workflow_run(run_id).result == list(seen[0])
        assert [s.kind for s in q.workflow_run(run_id).steps] == ["job", "sleep"]
    finally:
        q.close()


def test_cancel_workflow(shop: Shop) -> None:
    q = shop.q
    run_id = shop.checkout.start(order_id=11, items=["a"])
    shop.tick()
    run = q.cancel_workflow(run_id)
    assert run.status == "cancelled"
    assert run.steps[1].status == "cancelled"
    q.send_event("invoice.paid", key="order:11", data={"amount": 1})
    shop.clock.advance(6 * DAY)  # not yet the wait's 7 days, nor the cancelled run's
    shop.tick()
    assert q.workflow_run(run_id).status == "cancelled"
    assert q.get_job(run_id).status == "cancelled"
    shop.clock.advance(2 * DAY)  # past the wait's timeout: nothing wakes the run
    shop.tick()  # ... and past its 7 days of retention: the run and its jobs are pruned
    with pytest.raises(JobNotFound):
        q.workflow_run(run_id)
    assert shop.ledger == [("charge", 11)]
    done = shop.checkout.start(order_id=12, items=[])
    shop.tick()
    shop.clock.advance(8 * DAY)
    shop.tick()
    assert q.workflow_run(done).status == "done"
    with pytest.raises(InvalidTransition, match="done already"):
        q.cancel_workflow(done)


def test_cancel_workflow_cancels_its_pending_step(shop: Shop) -> None:
    run_id = shop.checkout.start(order_id=13, items=[])
    shop.q.process_jobs(limit=1)  # the driver only: charge is enqueued, not run
    run = shop.q.cancel_workflow(run_id)
    assert run.steps[0].status == "cancelled"
    assert shop.q.get_job(run.steps[0].job_id).status == "cancelled"
    shop.tick()
    assert shop.ledger == []


def test_bad_input_is_refused_naming_the_field(shop: Shop) -> None:
    with pytest.raises(TypeError, match=r"payload\['items'\]\[0\] of workflow 'checkout'"):
        shop.checkout.start(order_id=1, items=[{1, 2}])
    with pytest.raises(TypeError, match="missing 'items'"):
        shop.checkout.start(order_id=1)
    with pytest.raises(TypeError, match=r"data\['when'\] of event 'invoice.paid'"):
        shop.q.send_event("invoice.paid", key="k", data={"when": timedelta(1)})
    assert shop.q.workflow_runs() == []


def test_start_and_send_event_roll_back_with_the_callers_transaction(
    backend: str, db_url: str, clock: FrozenClock, tmp_path: Any
) -> None:
    shop = Shop(db_url, clock)
    try:
        with app_connection(backend, db_url) as conn:
            shop.checkout.start(order_id=20, items=[], conn=conn)
            conn.rollback()
        assert shop.q.workflow_runs() == []
        assert shop.tick()["claimed"] == 0
        run_id = shop.checkout.start(order_id=21, items=[])
        shop.tick()
        with app_connection(backend, db_url) as conn:
            shop.q.send_event("invoice.paid", key="order:21", data={"amount": 1}, conn=conn)
            conn.rollback()
        shop.tick()
        assert shop.q.workflow_run(run_id).steps[1].status == "waiting"
        with app_connection(backend, db_url) as conn:
            committed = shop.checkout.start(order_id=22, items=[], conn=conn)
            shop.q.send_event("invoice.paid", key="order:22", data={"amount": 3}, conn=conn)
            conn.commit()
        shop.tick()
        assert shop.q.workflow_run(committed).steps[1].result == {"amount": 3}
    finally:
        shop.q.close()


def app_connection(backend: str, url: str) -> Any:
    """The app's own connection to the database, with an open transaction."""
    if backend == "sqlite":
        return _closing(sqlite3.connect(url.removeprefix("sqlite:///")))
    import psycopg

    return psycopg.connect(url)


class _closing:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def test_runs_are_visible_in_stats_metrics_and_the_cli(shop: Shop, db_url: str) -> None:
    waiting = shop.checkout.start(order_id=30, items=[])
    shop.tick()
    stats = shop.q.stats()
    assert stats["workflow_runs"] == {"checkout": {"waiting": 1}}
    from tickq.metrics import render

    assert 'tickq_workflow_runs{status="waiting",workflow="checkout"} 1.0' in render(shop.q)
    listed = run_tickq("workflows", "--url", db_url)
    assert listed.returncode == 0, listed.stderr
    assert f"{waiting}" in listed.stdout and "waiting" in listed.stdout
    shown = run_tickq("workflows", "--url", db_url, str(waiting))
    assert shown.returncode == 0, shown.stderr
    assert "charge" in shown.stdout and "invoice.paid" in shown.stdout
    assert "workflow runs: checkout (waiting 1)" in run_tickq("stats", "--url", db_url).stdout


def test_a_stale_replay_records_nothing(shop: Shop) -> None:
    from tickq.workflow.records import NewStep, Suspension

    run_id = shop.checkout.start(order_id=40, items=[])
    store = shop.q._runtime.store
    step = NewStep(0, "sleep", "sleep", "waiting", wake_at=shop.clock.now())
    due = Suspension("waiting", shop.clock.now())
    # The driver is pending, not held by this owner: fenced like a job's finish.
    assert store.record_steps(run_id, "someone:1:dead", 1, [step], 0, due) == "lost"
    shop.tick()
    run = shop.q.workflow_run(run_id)
    assert [s.kind for s in run.steps] == ["job", "event"]


def test_the_tick_budget_bounds_workflow_work_too(shop: Shop) -> None:
    run_id = shop.checkout.start(order_id=41, items=["a", "b", "c"])
    shop.q.send_event("invoice.paid", key="order:41", data={"amount": 1})

    def asleep() -> bool:
        steps = shop.q.workflow_run(run_id).steps
        return bool(steps) and steps[-1].kind == "sleep"

    ticks = 0
    while not asleep():
        assert shop.tick(limit=2)["claimed"] <= 2
        ticks += 1
        assert ticks < 20
    assert ticks >= 4  # 4 driver replays and 4 steps, at most 2 a tick


def test_events_racing_runs_that_start_to_wait_are_never_lost(db_url: str) -> None:
    import random
    import threading

    q = Queue(db_url)
    q.migrate()

    @q.workflow()
    def waiter(wf: WorkflowContext, key: str) -> Any:
        return wf.wait_for("go", key=key, timeout=timedelta(hours=1))

    try:
        keys = [f"k{i}" for i in range(30)]
        runs = [waiter.start(key=k) for k in keys]
        stop = threading.Event()

        def work() -> None:
            while not stop.is_set():
                q.process_jobs(limit=5)

        workers = [threading.Thread(target=work) for _ in range(2)]
        for t in workers:
            t.start()
        try:
            for i, key in enumerate(keys):
                threading.Event().wait(random.uniform(0, 0.01))
                q.send_event("go", key=key, data=i)
            deadline = threading.Event()
            for _ in range(300):
                if all(q.workflow_run(r).status == "done" for r in runs):
                    break
                deadline.wait(0.05)
        finally:
            stop.set()
            for t in workers:
                t.join(30)
        assert [q.workflow_run(r).result for r in runs] == list(range(30))
    finally:
        q.close()


def test_a_failed_runs_failed_step_can_be_retried(db_url: str, clock: FrozenClock) -> None:
    q = Queue(db_url, clock=clock)
    q.migrate()
    broken = {"yes": True}

    @q.job(max_attempts=1)
    def fragile() -> str:
        if broken["yes"]:
            raise RuntimeError("the API is down")
        return "ok"

    @q.workflow()
    def flow(wf: WorkflowContext) -> str:
        return str(wf.run(fragile)) + "!"

    try:
        run_id = flow.start()
        q.tick()
        assert q.workflow_run(run_id).status == "failed"
        with pytest.raises(InvalidTransition, match="not a job step"):
            q.retry_workflow_step(run_id, 5)
        broken["yes"] = False
        run = q.retry_workflow_step(run_id, 0)
        assert run.status == "running" and run.steps[0].status == "pending"
        q.tick()
        run = q.workflow_run(run_id)
        assert run.status == "done" and run.result == "ok!" and run.error is None
        assert run.steps[0].attempts == 2
        with pytest.raises(InvalidTransition, match="it is done"):
            q.retry_workflow_step(run_id, 0)
    finally:
        q.close()


def test_the_dashboard_shows_runs_cancels_them_and_retries_a_failed_step(
    db_url: str, clock: FrozenClock
) -> None:
    import re

    import httpx

    from dashboard_serving import serving

    q = Queue(db_url, clock=clock)
    q.migrate()
    broken = {"yes": True}

    @q.job(max_attempts=1)
    def fragile() -> str:
        if broken["yes"]:
            raise RuntimeError("the API is down")
        return "ok"

    @q.workflow()
    def flow(wf: WorkflowContext, wait: bool) -> str:
        if wait:
            wf.wait_for("never", key="k")
        return str(wf.run(fragile))

    password = "correct horse battery staple"
    try:
        failed, waiting = flow.start(wait=False), flow.start(wait=True)
        q.tick()
        with serving(q.asgi_app(dashboard={"password": password})) as base, httpx.Client() as c:
            page = c.get(f"{base}/tickq/login")
            token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
            assert token
            c.post(f"{base}/tickq/login", data={"password": password, "csrf_token": token[1]})
            listing = c.get(f"{base}/tickq/workflows")
            assert listing.status_code == 200
            assert f"#{failed}" in listing.text and f"#{waiting}" in listing.text
            detail = c.get(f"{base}/tickq/workflows/{failed}")
            assert "the API is down" in detail.text and "Retry step" in detail.text
            form = re.search(r'name="csrf_token" value="([0-9a-f]+)"', detail.text)
            assert form
            broken["yes"] = False
            done = c.post(f"{base}/tickq/workflows/{failed}/steps/0/retry",
                          data={"csrf_token": form[1]}, follow_redirects=True)  # fmt: skip
            assert done.status_code == 200 and "goes on once it ends" in done.text
            q.tick()
            assert q.workflow_run(failed).result == "ok"
            detail = c.get(f"{base}/tickq/workflows/{waiting}")
            assert "never" in detail.text and "Cancel run" in detail.text
            cancelled = c.post(f"{base}/tickq/workflows/{waiting}/cancel",
                               data={"csrf_token": form[1]}, follow_redirects=True)  # fmt: skip
            assert cancelled.status_code == 200
            assert q.workflow_run(waiting).status == "cancelled"
            assert c.get(f"{base}/tickq/workflows/999999").status_code == 404
    finally:
        q.close()


def test_prune_keeps_a_waiting_runs_step_results_and_drops_ended_runs(shop: Shop) -> None:
    q = shop.q
    old = shop.checkout.start(order_id=50, items=[])
    shop.tick()
    shop.clock.advance(7 * DAY + timedelta(seconds=1))
    shop.tick()  # timed out, cancelled: done
    waiting = shop.checkout.start(order_id=51, items=[])
    q.send_event("invoice.paid", key="order:other", data=None)
    shop.tick()
    shop.clock.advance(2 * DAY)
    q.prune(older_than=DAY)  # every finished job goes, the step jobs of both runs too
    assert q.get_job(q.workflow_run(waiting).steps[0].job_id) is None
    with pytest.raises(Exception, match="does not exist"):
        q.workflow_run(old)
    q.send_event("invoice.paid", key="order:51", data={"amount": 4})
    shop.tick()
    shop.clock.advance(3 * DAY + timedelta(seconds=1))
    shop.tick()
    run = q.workflow_run(waiting)
    assert run.status == "done" and run.steps[0].result == {"charged": 51}


def test_a_step_job_keeps_its_concurrency_key(
    backend: str, db_url: str, clock: FrozenClock
) -> None:
    q = Queue(db_url, clock=clock)
    q.migrate()

    @q.job(concurrency=1, concurrency_key="account_id")
    def sync(account_id: int) -> int:
        return account_id

    @q.workflow()
    def syncs(wf: WorkflowContext) -> list[Any]:
        return wf.gather([wf.start(sync, account_id=a) for a in (1, 1, 2)])

    try:
        run_id = syncs.start()
        q.process_jobs(limit=1)  # the driver: the three steps are enqueued
        with app_connection(backend, db_url) as conn:
            rows = conn.execute(
                "SELECT concurrency_key FROM tickq_jobs WHERE type = 'sync' ORDER BY id"
            ).fetchall()
        assert [r[0] for r in rows] == ["1", "1", "2"]
        for _ in range(5):
            q.tick()
        run = q.workflow_run(run_id)
        assert run.status == "done" and run.result == [1, 1, 2]
    finally:
        q.close()
