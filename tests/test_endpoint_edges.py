"""The endpoints' edges through a real uvicorn socket: strict query parsing, secrets (minimum
length, rotation, never shown), and no work for an anonymous request."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from receivers import http_receiver
from test_web import AUTH, HEALTH, OLD_SECRET, SECRET, TICK, serving
from tickq import ConfigurationError, FrozenClock, Queue
from tickq.alerts import Webhook
from tickq.web import EndpointOptions


@pytest.fixture
def q(tmp_path: Path, clock: FrozenClock) -> Iterator[Queue]:
    queue = Queue(f"sqlite:///{tmp_path / 'edges.db'}", clock=clock)
    queue.migrate()

    @queue.job()
    def noop(n: int = 0) -> None: ...

    queue.enqueue_many([("noop", {"n": n}) for n in range(30)])
    yield queue
    queue.close()


@pytest.fixture(autouse=True)
def _no_secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CRON_SECRET", "CRON_SECRET_PREVIOUS", "TICKQ_METRICS_TOKEN"):
        monkeypatch.delenv(name, raising=False)


# -- ?limit= and ?strict= -----------------------------------------------------------------
ACCEPTED = [("limit=0000000001", 1), ("limit=007", 7), ("limit=0", 0), ("limit=20", 20),
            ("limit=999999999", 20), ("limit=" + "0" * 30 + "3", 3), ("", 5),
            ("strict=0&limit=2", 2), ("strict=TRUE", 5), ("strict=off", 5)]  # fmt: skip
REFUSED = [
    ("limit=-1", "limit must be a whole number"),
    ("limit=%2B1", "got '+1'"),
    ("limit=+1", "got ' 1'"),  # a '+' in a query string is a space
    ("limit=%201", "got ' 1'"),
    ("limit=1.0", "got '1.0'"),
    ("limit=1e3", "got '1e3'"),
    ("limit=1_000", "got '1_000'"),
    ("limit=0x10", "got '0x10'"),
    ("limit=%D9%A3", "got '٣'"),  # ARABIC-INDIC DIGIT THREE: isdigit() but not ASCII
    ("limit=%EF%BC%91", "got '\uff11'"),  # FULLWIDTH DIGIT ONE
    ("limit=%B2", "got '�'"),  # not UTF-8
    ("limit=1000000000", "got '1000000000'"),  # ten significant digits
    ("limit=" + "9" * 5000, "…"),
    ("limit=", "got ''"),
    ("limit=1&limit=2", "'limit' is given more than once"),
    ("limt=5", "unknown query parameter 'limt'"),
    ("strict", "strict must be 1 or 0"),
    ("strict=maybe", "got 'maybe'"),
    ("&".join(f"x{i}=1" for i in range(21)), "too many query parameters"),
]


def test_limit_and_strict_are_what_they_say_or_a_400(q: Queue) -> None:
    with serving(q.asgi_app(secret=SECRET, limit=5, max_limit=20)) as base:
        for query, limit in ACCEPTED:
            r = httpx.post(f"{base}{TICK}?{query}", headers=AUTH, timeout=10)
            assert (r.status_code, r.json()["limit"]) == (200, limit), query
        ticks = q._store.last_tick()[1]
        for query, message in REFUSED:
            r = httpx.post(f"{base}{TICK}?{query}", headers=AUTH, timeout=10)
            assert r.status_code == 400, (query, r.text)
            assert message in r.json()["error"], (query, r.json())
            assert len(r.json()["error"]) < 300
        assert q._store.last_tick()[1] == ticks, "a refused query runs nothing"


# -- secrets ------------------------------------------------------------------------------
def test_a_previous_token_alone_is_refused_with_503(
    q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rotation keeps the old token only beside a current one (it used to be accepted)."""
    monkeypatch.setenv("CRON_SECRET_PREVIOUS", OLD_SECRET)
    with serving(q.asgi_app()) as base:
        r = httpx.post(base + TICK, headers={"Authorization": f"Bearer {OLD_SECRET}"})
        assert r.status_code == 503, r.text
        assert "CRON_SECRET is not set (only CRON_SECRET_PREVIOUS is" in r.json()["error"]
        assert OLD_SECRET not in r.text
    with serving(q.asgi_app(previous_secret=OLD_SECRET)) as base:
        r = httpx.post(base + TICK, headers={"Authorization": f"Bearer {OLD_SECRET}"})
        assert r.status_code == 503 and "only previous_secret= is" in r.text
    assert q._store.last_tick()[1] == 0


def test_the_metrics_token_has_a_minimum_length(q: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKQ_METRICS_TOKEN", "a")
    with serving(q.asgi_app(secret=SECRET, metrics=True)) as base:
        r = httpx.get(base + "/metrics", headers={"Authorization": "Bearer a"})
        assert r.status_code == 503, r.text
        assert "TICKQ_METRICS_TOKEN is too short (1 characters; at least 16)" in r.json()["error"]
        monkeypatch.setenv("TICKQ_METRICS_TOKEN", "m" * 16)
        assert httpx.get(
            base + "/metrics", headers={"Authorization": "Bearer " + "m" * 16}
        ).is_success


@pytest.mark.parametrize("option", ["secret", "previous_secret", "metrics_token"])
def test_a_short_secret_option_is_refused_when_the_app_is_built(q: Queue, option: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"^{option}= is too short \(7 char") as caught:
        q.asgi_app(**{option: "hunter2"}, metrics=True)
    assert "hunter2" not in str(caught.value)
    with pytest.raises(ConfigurationError, match=f"{option} must be a str or None, got bytes"):
        q.asgi_app(**{option: b"x" * 20})


def test_endpoint_options_repr_hides_secrets_and_the_heartbeat_url() -> None:
    options = EndpointOptions(
        secret=SECRET, previous_secret=OLD_SECRET, metrics_token="t" * 20,
        heartbeat_url="https://hc-ping.example/0f3c-secret-uuid",
    )  # fmt: skip
    shown = repr(options)
    for secret in (SECRET, OLD_SECRET, "t" * 20, "0f3c-secret-uuid"):
        assert secret not in shown
    assert "secret=<set>" in shown and "metrics_token=<set>" in shown and "limit=100" in shown
    assert "previous_secret=None" in repr(EndpointOptions())


# -- no work without the token ------------------------------------------------------------
def test_an_anonymous_health_check_delivers_no_alert_an_authenticated_one_does(
    tmp_path: Path, clock: FrozenClock
) -> None:
    """The overdue alert used to be raised and delivered by any GET of the public URL."""
    with http_receiver() as hook:
        q = Queue(f"sqlite:///{tmp_path / 'alerts.db'}", clock=clock, alerts=[Webhook(hook.url)])
        q.migrate()
        q.tick()
        clock.advance(hours=2)
        with serving(q.asgi_app(secret=SECRET, expected_interval=timedelta(minutes=15))) as base:
            for headers in ({}, {"Authorization": "Bearer wrong-token-wrong-token"}):
                r = httpx.get(base + HEALTH, headers=headers, timeout=10)
                assert r.status_code == 503 and r.json()["status"] == "stale"
                assert httpx.head(base + HEALTH, headers=headers).status_code == 503
            assert hook.requests == [], "an anonymous request caused a delivery"
            assert q.list_jobs() == [], "an anonymous request enqueued an alert job"
            r = httpx.get(base + HEALTH, headers=AUTH, timeout=30)
            assert r.status_code == 503 and r.json()["status"] == "stale"
        assert len(hook.requests) == 1 and hook.requests[0].json()["kind"] == "tick_overdue"
        q.close()


def test_an_unexpected_error_answers_500_without_its_text(
    q: Queue, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The tick's 500 body used to carry the exception's first line (a URL, a password)."""

    def broken(**_: object) -> None:  # a bug nothing real can be made to raise on purpose
        raise RuntimeError("cannot reach postgresql://app:hunter2@db/app")

    monkeypatch.setattr(q, "tick", broken)
    with serving(q.asgi_app(secret=SECRET)) as base:
        r = httpx.post(base + TICK, headers=AUTH, timeout=10)
    assert r.status_code == 500
    assert r.json() == {
        "error": "the tick ran nothing (RuntimeError); the app's log (logger 'tickq') has "
        "the details"
    }
    assert any("tickq the tick ran nothing" in rec.getMessage() for rec in caplog.records)


def test_a_failed_heartbeat_ping_logs_no_part_of_its_secret_path(
    q: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    from test_database_down import closed_port

    url = f"http://127.0.0.1:{closed_port()}/ping/5f1e-secret-uuid?token=abc123secret"
    with serving(q.asgi_app(secret=SECRET, heartbeat_url=url)) as base:
        assert httpx.post(base + TICK, headers=AUTH, timeout=30).status_code == 200
    [line] = [r.getMessage() for r in caplog.records if "heartbeat" in r.getMessage()]
    assert line.startswith("tickq heartbeat ping to http://127.0.0.1/… (")
    assert "secret" not in line and "5f1e" not in line
