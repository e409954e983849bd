"""Queue controls through the facade, the tick, the CLI and the dashboard: exact messages
for bad limits, a tick that respects a pause, limits declared by the process that claims,
``tickq pause/resume/stats``, and the dashboard's paused queues and limited types."""

from __future__ import annotations

import re

import httpx
import pytest

from conftest import run_tickq
from dashboard_serving import serving
from tickq import ConfigurationError, FrozenClock, Queue
from tickq.controls import Limit

BAD_LIMITS = [
    ({"rate_limit": "fast"},
     'rate_limit must look like "10/s", "100/m" or "1000/h" (starts per second, minute or '
     "hour), got 'fast'"),
    ({"rate_limit": "10/d"},
     'rate_limit must look like "10/s", "100/m" or "1000/h" (starts per second, minute or '
     "hour), got '10/d'"),
    ({"rate_limit": "-1/s"},
     'rate_limit must look like "10/s", "100/m" or "1000/h" (starts per second, minute or '
     "hour), got '-1/s'"),
    ({"rate_limit": "0/s"},
     "rate_limit must allow at least 1 start per period (pause the queue to run none), "
     "got '0/s'"),
    ({"rate_limit": 10},
     'rate_limit must be a str like "10/s", "100/m" or "1000/h" (starts per second, minute '
     "or hour), got int: 10"),
    ({"concurrency": 0},
     "concurrency must be at least 1 (how many jobs of this type may run at once; pause "
     "the queue to run none), got 0"),
    ({"concurrency": -1},
     "concurrency must be at least 1 (how many jobs of this type may run at once; pause "
     "the queue to run none), got -1"),
    ({"concurrency": 2.5},
     "concurrency must be an int (how many jobs of this type may run at once), got "
     "float: 2.5"),
    ({"concurrency": "2"},
     "concurrency must be an int (how many jobs of this type may run at once), got str: '2'"),
    ({"concurrency": True},
     "concurrency must be an int (how many jobs of this type may run at once), got "
     "bool: True"),
]  # fmt: skip


@pytest.mark.parametrize(("options", "message"), BAD_LIMITS)
def test_a_bad_limit_is_refused_when_the_job_is_declared(
    options: dict[str, object], message: str
) -> None:
    q = Queue("sqlite:///:memory:")
    with pytest.raises(ConfigurationError) as refused:
        q.job(**options)  # type: ignore[call-overload]
    assert str(refused.value) == message
    assert q.job_names() == []


@pytest.mark.parametrize(
    ("text", "limit"),
    [("10/s", Limit(None, 10, 1.0)), ("100/m", Limit(None, 100, 60.0)),
     (" 1000 / h ", Limit(None, 1000, 3600.0))],
)  # fmt: skip
def test_rate_limits_in_each_unit(text: str, limit: Limit) -> None:
    q = Queue("sqlite:///:memory:")

    @q.job(rate_limit=text, concurrency=None)
    def send() -> None: ...

    assert send._definition.limit == limit
    assert limit.rate_text == text.replace(" ", "")


def test_the_tick_respects_a_pause(frozen_queue: Queue) -> None:
    q = frozen_queue
    ran = []

    @q.job(queue="emails")
    def send(n: int) -> None:
        ran.append(n)

    for n in range(3):
        send.enqueue(n=n)
    assert q.pause("emails") and q.paused() == {"emails"}
    summary = q.tick()
    assert summary["jobs"]["claimed"] == 0 and summary["remaining_due"] == 0
    assert q.resume("emails")
    summary = q.tick()
    assert summary["jobs"]["succeeded"] == 3 and sorted(ran) == [0, 1, 2]


def test_process_jobs_runs_limited_jobs_within_the_limit(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue

    @q.job(rate_limit="2/m")
    def call_api() -> None: ...

    for _ in range(5):
        call_api.enqueue()
    assert q.process_jobs()["succeeded"] == 2
    clock.advance(seconds=59)
    assert q.process_jobs()["claimed"] == 0
    assert q._store.due_in() == pytest.approx(1.0)
    clock.advance(seconds=1)
    assert q.process_jobs()["succeeded"] == 2
    assert all(j.attempts == 0 for j in q.list_jobs("pending"))


def test_the_last_process_to_claim_sets_a_types_limits(db_url: str) -> None:
    new, old = Queue(db_url), Queue(db_url)  # two code versions of one app
    new.migrate()

    @new.job(concurrency=3)
    def export() -> None: ...

    @old.job(name="export")
    def old_export() -> None: ...

    new.process_jobs()
    assert new._store.limits() == {"export": Limit(3, None, None)}
    old.process_jobs()  # the old version, started later, says it has no limit
    assert new._store.limits() == {}
    new._runtime._declared = None  # as when the new version restarts
    new.process_jobs()
    assert old._store.limits() == {"export": Limit(3, None, None)}


def test_a_type_registered_after_the_first_claim_declares_its_limit(queue: Queue) -> None:
    queue.process_jobs()

    @queue.job(concurrency=1)
    def later() -> None: ...

    queue.process_jobs()
    assert queue._store.limits() == {"later": Limit(1, None, None)}
    assert queue.stats()["limits"] == {
        "later": {"concurrency": 1, "rate_limit": None, "per_key": False}
    }


def test_pause_refuses_a_bad_queue_name(queue: Queue) -> None:
    with pytest.raises(ConfigurationError, match="queue must be a non-empty name"):
        queue.pause("")


def test_cli_pause_resume_and_stats(db_url: str) -> None:
    q = Queue(db_url)
    q.migrate()
    env = {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_RUNS": "."}
    app = "apps.controls_app:q"
    paused = run_tickq("pause", app, "emails", **env)
    assert paused.returncode == 0, paused.stderr
    assert "queue 'emails' paused" in paused.stdout and q.paused() == {"emails"}
    again = run_tickq("pause", app, "emails", **env)
    assert "queue 'emails' was already paused" in again.stdout
    run_tickq("tick", app, **env)  # a claim declares the app's limits
    stats = run_tickq("stats", app, **env)
    assert "paused queues: emails" in stats.stdout
    assert "limited types: brisk (concurrency 8), capped (concurrency 2), paced (rate 100/s), " \
           "per_account (concurrency 1 per key), rated_per_account (rate 3/s per key), " \
           "solo (concurrency 1), throttled (rate 5/s)" in stats.stdout  # fmt: skip
    resumed = run_tickq("resume", app, "emails", **env)
    assert "queue 'emails' resumed" in resumed.stdout and q.paused() == set()
    wrong = run_tickq("pause", app, "a", "b", **env)
    assert wrong.returncode == 1 and "expected [APP] QUEUE" in wrong.stderr


def test_dashboard_shows_paused_queues_and_limited_types_and_pauses(queue: Queue) -> None:
    @queue.job(concurrency=2, rate_limit="10/s", queue="emails")
    def send() -> None: ...

    queue.process_jobs()  # declares the limits
    send.enqueue()
    queue.pause("emails")
    app = queue.asgi_app(dashboard={"password": "controls password"})
    with serving(app) as base, httpx.Client() as client:
        login = client.get(f"{base}/tickq/login")
        client.post(f"{base}/tickq/login", data={"password": "controls password",
                                                 "csrf_token": csrf(login.text)})  # fmt: skip
        page = client.get(f"{base}/tickq/")
        assert page.status_code == 200
        row = re.search(r'<tr class="queue-row queue-paused" data-queue="emails">.*?</tr>',
                        page.text, re.S)  # fmt: skip
        assert row and ">paused</span>" in row.group(0) and ">Resume</button>" in row.group(0)
        assert re.search(r'data-type="send">.*?<td class="num">2</td><td>10/s</td>', page.text)
        form = {"csrf_token": csrf(page.text), "queue": "emails"}
        done = client.post(f"{base}/tickq/queues/resume", data=form)
        assert done.status_code == 303 and queue.paused() == set()
        page = client.get(f"{base}/tickq/")
        assert 'class="queue-row" data-queue="emails"' in page.text
        assert ">Pause</button>" in page.text
        refused = client.post(f"{base}/tickq/queues/pause", data={"queue": "emails"})
        assert refused.status_code == 403 and queue.paused() == set()


def csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)
