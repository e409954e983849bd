"""The tick and health endpoints through real HTTP servers (uvicorn, wsgiref) and through
Flask's and Django's own test clients."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickq import FrozenClock, JobContext, Queue

SECRET = "s3cret-token-for-tests-0123456789"
OLD_SECRET = "old-s3cret-token-for-tests-98765"
AUTH = {"Authorization": f"Bearer {SECRET}"}
TICK, HEALTH = "/api/cron/tick", "/api/cron/health"
T0 = datetime(2026, 5, 4, 8, 59, 30, tzinfo=UTC)


def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 5, 4, hour, minute, second, tzinfo=UTC)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free loopback port; yield its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


class Receiver:
    """A real HTTP server that records the heartbeat pings it receives."""

    def __init__(self) -> None:
        received = self.received = []  # type: list[tuple[str, bytes]]

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.path, body))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ping/abc-123"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def app_queue(tmp_path: Path, clock: FrozenClock) -> Iterator[Queue]:
    """A SQLite queue at 09:00:20 UTC with a daily 09:00 schedule whose cursor is set."""
    q = Queue(f"sqlite:///{tmp_path / 'web.db'}", clock=clock)
    q.migrate()

    @q.schedule("0 9 * * *")
    def morning_report() -> None: ...

    clock.set(T0)
    q.tick()
    clock.set(at(9, 0, 20))
    yield q
    q.close()


def no_tick_recorded_since(q: Queue, ticks: int) -> bool:
    return q._store.last_tick()[1] == ticks and q.list_jobs(type="morning_report") == []


# -- protection ---------------------------------------------------------------------------
def test_the_tick_refuses_every_request_without_the_right_token(app_queue: Queue) -> None:
    hostile = [
        {},
        {"Authorization": "Bearer wrong-token-wrong-token-wrong"},
        {"Authorization": f"Basic {SECRET}"},
        {"Authorization": f"Bearer {SECRET}x"},
        {"Authorization": b"Bearer \xff\xfe\xe9t\xe9"},
        {"Authorization": "Bearer " + "a" * 8000},
        {"Authorization": "Bearer"},
    ]
    with serving(app_queue.asgi_app(secret=SECRET)) as base:
        for headers in hostile:
            r = httpx.post(base + TICK, headers=headers, timeout=10)
            assert r.status_code == 401, (headers, r.text)
            assert r.headers["www-authenticate"] == "Bearer"
            assert "error" in r.json()
        assert "missing Authorization header" in httpx.post(base + TICK).json()["error"]
    assert no_tick_recorded_since(app_queue, 1)


def test_without_a_secret_the_tick_refuses_to_run_and_says_how_to_set_one(
    app_queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CRON_SECRET", raising=False)
    monkeypatch.delenv("CRON_SECRET_PREVIOUS", raising=False)
    with serving(app_queue.asgi_app()) as base:
        r = httpx.post(base + TICK, headers=AUTH, timeout=10)
        assert r.status_code == 503
        assert "CRON_SECRET is not set" in r.json()["error"]
        assert "secrets.token_urlsafe" in r.json()["error"]
        monkeypatch.setenv("CRON_SECRET", "short")
        r = httpx.post(base + TICK, headers={"Authorization": "Bearer short"}, timeout=10)
        assert r.status_code == 503 and "CRON_SECRET is too short (5 characters" in r.text
    assert no_tick_recorded_since(app_queue, 1)


def test_a_rotated_secret_keeps_working_until_removed(
    app_queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRON_SECRET", SECRET)
    monkeypatch.setenv("CRON_SECRET_PREVIOUS", OLD_SECRET)
    with serving(app_queue.asgi_app()) as base:
        for token in (OLD_SECRET, SECRET):
            r = httpx.post(base + TICK, headers={"Authorization": f"Bearer {token}"}, timeout=10)
            assert r.status_code == 200, r.text
        monkeypatch.delenv("CRON_SECRET_PREVIOUS")  # rotation finished
        r = httpx.post(base + TICK, headers={"Authorization": f"Bearer {OLD_SECRET}"}, timeout=10)
        assert r.status_code == 401


# -- the tick -----------------------------------------------------------------------------
def test_an_authorised_tick_answers_with_its_summary(app_queue: Queue) -> None:
    with serving(app_queue.asgi_app(secret=SECRET, limit=20, max_limit=50)) as base:
        r = httpx.post(base + TICK, headers=AUTH, timeout=10)
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        summary = r.json()
        assert [(e["name"], e["slot"]) for e in summary["schedules_enqueued"]] == [
            ("morning_report", "2026-05-04T09:00:00+00:00")
        ]
        assert summary["jobs"]["succeeded"] == 1 and summary["remaining_due"] == 0
        assert summary["next_due_at"] == "2026-05-05T09:00:00+00:00"
        assert summary["limit"] == 20 and summary["duration_ms"] >= 0
        assert httpx.post(base + TICK + "?limit=5000", headers=AUTH).json()["limit"] == 50
        assert httpx.post(base + TICK + "?limit=0", headers=AUTH).json()["limit"] == 0
        huge = httpx.post(base + TICK + "?limit=" + "9" * 5000, headers=AUTH)
        assert huge.status_code == 400 and "got '9999" in huge.json()["error"]
        bad = httpx.post(base + TICK + "?limit=lots", headers=AUTH)
        assert bad.status_code == 400
        assert bad.json() == {
            "error": "limit must be a whole number from 0 to 50 (ASCII digits only), got 'lots'"
        }
        assert httpx.post(base + TICK + "?limit=-1", headers=AUTH).status_code == 400


def test_post_only_unless_get_is_allowed_for_vercel(app_queue: Queue) -> None:
    with serving(app_queue.asgi_app(secret=SECRET)) as base:
        r = httpx.get(base + TICK, headers=AUTH)
        assert r.status_code == 405 and r.headers["allow"] == "POST"
        assert "allow_get=True" in r.json()["error"]
        assert httpx.put(base + TICK, headers=AUTH).status_code == 405
        assert httpx.post(base + "/elsewhere", headers=AUTH).status_code == 404
    with serving(app_queue.asgi_app(secret=SECRET, allow_get=True)) as base:
        assert httpx.get(base + TICK, headers=AUTH).status_code == 200
        r = httpx.delete(base + TICK, headers=AUTH)
        assert r.status_code == 405 and r.headers["allow"] == "GET, POST"


def test_strict_mode_turns_failures_into_a_failed_call(app_queue: Queue) -> None:
    @app_queue.job(max_attempts=1)
    def explode() -> None:
        raise RuntimeError("boom")

    with serving(app_queue.asgi_app(secret=SECRET)) as base:
        explode.enqueue()
        lenient = httpx.post(base + TICK, headers=AUTH)
        assert lenient.status_code == 200 and lenient.json()["jobs"]["failed"] == 1
        explode.enqueue()
        strict = httpx.post(base + TICK + "?strict=1", headers=AUTH)
        assert strict.status_code == 500
        assert strict.json()["strict"] == {
            "ok": False,
            "problems": ["1 job(s) failed permanently in this tick"],
        }
        calm = httpx.post(base + TICK + "?strict=1", headers=AUTH)
        assert calm.status_code == 200 and calm.json()["strict"]["ok"] is True


def test_ten_concurrent_calls_enqueue_each_slot_once_and_run_each_job_once(
    db_url: str, clock: FrozenClock
) -> None:
    q = Queue(db_url, clock=clock)
    q.migrate()
    runs: list[tuple[int, str, str]] = []
    lock = threading.Lock()

    def record(ctx: JobContext) -> None:
        time.sleep(0.02)  # long enough for the other calls to be in flight
        with lock:
            runs.append((ctx.id, ctx.meta["schedule"], ctx.meta["slot"]))

    q.schedule("0 9 * * *", name="digest")(q.job(name="digest")(record))
    q.schedule("*/5 * * * *", name="five")(q.job(name="five")(record))
    clock.set(T0)
    q.tick()
    runs.clear()
    clock.set(at(9, 0, 20))
    with serving(q.asgi_app(secret=SECRET)) as base, ThreadPoolExecutor(10) as pool:
        responses = list(
            pool.map(lambda _: httpx.post(base + TICK, headers=AUTH, timeout=60), range(10))
        )
    assert [r.status_code for r in responses] == [200] * 10
    enqueued = [(e["name"], e["slot"]) for r in responses for e in r.json()["schedules_enqueued"]]
    nine = "2026-05-04T09:00:00+00:00"
    assert sorted(enqueued) == [("digest", nine), ("five", nine)]
    assert sorted((name, slot) for _, name, slot in runs) == [("digest", nine), ("five", nine)]
    assert len({job_id for job_id, _, _ in runs}) == 2
    assert sum(r.json()["jobs"]["succeeded"] for r in responses) == 2
    for name in ("digest", "five"):
        [job] = [j for j in q.list_jobs(type=name) if j.meta["slot"] == nine]
        assert (job.status, job.attempts) == ("done", 1)
    q.close()


# -- health and heartbeat -----------------------------------------------------------------
def test_health_needs_no_secret_reveals_no_jobs_and_fails_when_ticks_stop(
    app_queue: Queue, clock: FrozenClock
) -> None:
    app = app_queue.asgi_app(secret=SECRET, expected_interval=timedelta(minutes=15))
    with serving(app) as base:
        r = httpx.get(base + HEALTH)
        assert r.status_code == 200
        assert set(r.json()) == {
            "ok",
            "status",
            "last_tick_at",
            "age_seconds",
            "ticks",
            "stale_after_seconds",
            "now",
            "database",
        }
        assert r.json()["last_tick_at"] == T0.isoformat()
        assert httpx.head(base + HEALTH).status_code == 200
        assert httpx.post(base + HEALTH).status_code == 405
        clock.advance(minutes=31)
        stale = httpx.get(base + HEALTH)
        assert stale.status_code == 503 and stale.json()["status"] == "stale"
        assert httpx.head(base + HEALTH).status_code == 503
        httpx.post(base + TICK, headers=AUTH)
        assert httpx.get(base + HEALTH).json()["status"] == "ok"


def test_heartbeat_pings_after_each_tick_and_pings_fail_when_it_fails(
    app_queue: Queue, receiver: Receiver, tmp_path: Path
) -> None:
    with serving(app_queue.asgi_app(secret=SECRET, heartbeat_url=receiver.url)) as base:
        assert httpx.post(base + TICK, headers=AUTH).status_code == 200
        assert httpx.post(base + TICK, headers={"Authorization": "Bearer nope"}).status_code == 401
    broken = Queue(f"sqlite:///{tmp_path / 'never-migrated.db'}")
    with serving(broken.asgi_app(secret=SECRET, heartbeat_url=receiver.url)) as base:
        r = httpx.post(base + TICK, headers=AUTH)
        assert r.status_code == 503
        assert r.json()["error"].startswith("the tick ran nothing (SchemaMissing): tickq's tables")
        assert "run q.migrate()" in r.json()["error"] and "never-migrated" not in r.text
        health = httpx.get(base + HEALTH)
        assert health.status_code == 503
        assert health.json()["error"] == "SchemaMissing" and "never-migrated" not in health.text
    (ok_path, ok_body), (fail_path, fail_body) = receiver.received
    assert ok_path == "/ping/abc-123" and json.loads(ok_body)["jobs"]["succeeded"] == 1
    assert fail_path == "/ping/abc-123/fail" and b"SchemaMissing" in fail_body


def test_a_heartbeat_that_cannot_be_reached_does_not_fail_the_tick(app_queue: Queue) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}/ping"
    closed.close()
    with serving(app_queue.asgi_app(secret=SECRET, heartbeat_url=url)) as base:
        assert httpx.post(base + TICK, headers=AUTH, timeout=30).status_code == 200


# -- adapters -------------------------------------------------------------------------------
def test_mounts_under_a_prefix_in_starlette(app_queue: Queue) -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    site = Starlette(
        routes=[
            Route("/", lambda request: PlainTextResponse("home")),
            Mount("/jobs", app=app_queue.asgi_app(secret=SECRET)),
        ]
    )
    with serving(site) as base:
        assert httpx.get(base + "/").text == "home"
        r = httpx.post(base + "/jobs" + TICK, headers=AUTH)
        assert r.status_code == 200 and r.json()["jobs"]["succeeded"] == 1
        assert httpx.get(base + "/jobs" + HEALTH).status_code == 200


def signup_app(q: Queue) -> Any:
    """A FastAPI app with its own POST /signup, which enqueues a welcome email job."""
    from fastapi import FastAPI

    app = FastAPI()

    @q.job()
    def welcome(email: str) -> None: ...

    @app.post("/signup", status_code=201)
    def signup(body: dict[str, str]) -> dict[str, int]:
        return {"job": welcome.enqueue(email=body["email"])}

    return app


@pytest.mark.parametrize("prefix", ["", "/internal"])
def test_fastapi_include_router_keeps_the_apps_routes(app_queue: Queue, prefix: str) -> None:
    app = signup_app(app_queue)
    app.include_router(app_queue.fastapi_router(secret=SECRET), prefix=prefix)
    with serving(app) as base:
        signup = httpx.post(base + "/signup", json={"email": "ada@example.com"}, timeout=30)
        assert signup.status_code == 201, signup.text
        r = httpx.post(base + prefix + TICK, headers=AUTH, timeout=30)
        assert r.status_code == 200 and r.json()["jobs"]["succeeded"] == 2  # report + welcome
        assert app_queue.get_job(signup.json()["job"]).status.value == "done"
        assert httpx.get(base + prefix + HEALTH, timeout=30).json()["ok"] is True
        assert httpx.post(base + prefix + TICK, timeout=30).status_code == 401
        wrong = httpx.get(base + prefix + TICK, headers=AUTH, timeout=30)
        assert wrong.status_code == 405 and "use POST" in wrong.json()["error"]
        docs = httpx.get(base + "/openapi.json", timeout=30).json()
        assert set(docs["paths"]) == {"/signup"}, "tickq's routes stay out of the schema"


def test_a_mount_at_the_root_says_it_hides_the_apps_routes(app_queue: Queue) -> None:
    """The pitfall: ``app.mount("/", q.asgi_app())`` before the app's routes answers every
    path; its 404 says what to do instead."""
    from fastapi import FastAPI

    app = FastAPI()
    app.mount("/", app_queue.asgi_app(secret=SECRET))
    app.router.routes.extend(signup_app(app_queue).router.routes)
    with serving(app) as base:
        r = httpx.post(base + "/signup", json={"email": "ada@example.com"}, timeout=30)
        assert r.status_code == 404 and "include_router(q.fastapi_router())" in r.json()["error"]
        assert httpx.post(base + TICK, headers=AUTH, timeout=30).status_code == 200


def test_wsgi_app_behind_a_real_wsgi_server(app_queue: Queue) -> None:
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = make_server("127.0.0.1", 0, app_queue.wsgi_app(secret=SECRET), handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert httpx.post(base + TICK).status_code == 401
        assert httpx.post(base + TICK, headers={"Authorization": b"Bearer \xff"}).status_code == 401
        r = httpx.post(base + TICK, headers=AUTH, timeout=10)
        assert r.status_code == 200 and r.json()["jobs"]["succeeded"] == 1
        assert httpx.get(base + TICK, headers=AUTH).status_code == 405
        assert httpx.get(base + HEALTH).json()["ok"] is True
    finally:
        server.shutdown()
        server.server_close()


def test_flask_blueprint(app_queue: Queue) -> None:
    from flask import Flask

    app = Flask(__name__)
    app.register_blueprint(app_queue.flask_blueprint(secret=SECRET), url_prefix="/internal")
    client = app.test_client()
    assert client.post("/internal" + TICK).status_code == 401
    assert client.get("/internal" + TICK, headers=AUTH).status_code == 405
    r = client.post("/internal" + TICK + "?limit=10", headers=AUTH)
    assert r.status_code == 200 and r.get_json()["jobs"]["succeeded"] == 1
    assert r.get_json()["limit"] == 10
    assert client.get("/internal" + HEALTH).get_json()["ok"] is True


def test_django_urls(app_queue: Queue) -> None:
    import django
    from django.conf import settings
    from django.test import Client
    from django.urls import clear_url_caches

    urls = types.ModuleType("tickq_test_django_urls")
    urls.urlpatterns = app_queue.django_urls(secret=SECRET)  # type: ignore[attr-defined]
    sys.modules[urls.__name__] = urls
    if not settings.configured:
        settings.configure(
            ROOT_URLCONF=urls.__name__,
            ALLOWED_HOSTS=["testserver"],
            SECRET_KEY="x" * 50,
            MIDDLEWARE=["django.middleware.csrf.CsrfViewMiddleware"],
            INSTALLED_APPS=[],
        )
        django.setup()
    clear_url_caches()
    client = Client(enforce_csrf_checks=True)  # the bearer token replaces CSRF protection
    assert client.post(TICK).status_code == 401
    r = client.post(TICK, headers=AUTH)
    assert r.status_code == 200 and r.json()["jobs"]["succeeded"] == 1
    assert client.put(TICK, headers=AUTH).status_code == 405
    assert client.get(HEALTH).json()["ok"] is True


def test_endpoint_options_are_validated_when_the_app_is_built(app_queue: Queue) -> None:
    from tickq import ConfigurationError

    for options, message in [
        ({"path": "api/cron/tick"}, "path must start with '/', got 'api/cron/tick'"),
        ({"limit": 2000}, "limit must be between 0 and max_limit (1000), got 2000"),
        ({"time_budget": 0}, "time_budget must be positive seconds, got 0"),
        ({"expected_interval": 900}, "expected_interval must be a positive timedelta, got 900"),
        ({"health_path": TICK}, "the endpoints need different paths"),
    ]:
        with pytest.raises(ConfigurationError) as excinfo:
            app_queue.asgi_app(**options)  # type: ignore[arg-type]
        assert message in str(excinfo.value)
