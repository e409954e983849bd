"""The dashboard served by every adapter docs/frameworks.md names, over real servers: the
FastAPI router, a Starlette mount, the WSGI app (Flask and Django: test_dashboard_http)."""

from __future__ import annotations

import threading
from socketserver import ThreadingMixIn

import httpx
import pytest

from dashboard_serving import serving
from test_dashboard_http import PASSWORD, SECRET_PAYLOAD, csrf, declare, failed_id, login
from tickq import Queue

SECRET = "s3cret-token-0123456789"


@pytest.fixture
def q(queue: Queue) -> Queue:
    declare(queue)
    queue.enqueue("charge", {"customer": SECRET_PAYLOAD})
    queue.process_jobs()
    return queue


def fastapi_app(q: Queue, prefix: str, **dashboard: object) -> object:
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    router = q.fastapi_router(secret=SECRET, dashboard={"password": PASSWORD, **dashboard})
    app.include_router(router, prefix=prefix)
    return app


@pytest.mark.parametrize("prefix", ["", "/internal"])
def test_a_logged_in_dashboard_page_from_a_fastapi_app(q: Queue, prefix: str) -> None:
    with serving(fastapi_app(q, prefix)) as server, httpx.Client(timeout=30) as client:
        base = server + prefix
        assert client.get(f"{server}/hello").json() == {"hello": "world"}
        first = client.get(f"{base}/tickq/")
        assert first.status_code in (302, 303)
        assert first.headers["location"].startswith(f"{prefix}/tickq/login")
        assert client.get(f"{base}/tickq").headers["location"] == f"{prefix}/tickq/"
        assert login(client, base).status_code == 303
        page = client.get(f"{base}/tickq/jobs/{failed_id(q)}")
        assert page.status_code == 200 and SECRET_PAYLOAD in page.text
        assert f'href="{prefix}/tickq/static/dashboard.css"' in page.text
        assert client.get(f"{base}/tickq/static/dashboard.css").status_code == 200
        tick = client.post(f"{base}/api/cron/tick", headers={"Authorization": f"Bearer {SECRET}"})
        assert tick.status_code == 200, "the tick endpoint still answers beside the dashboard"
        retried = client.post(f"{base}/tickq/jobs/{failed_id(q)}/retry",
                              data={"csrf_token": csrf(page.text)})  # fmt: skip
        assert retried.status_code == 303
        schema = client.get(f"{server}/openapi.json").json()
        assert set(schema["paths"]) == {"/hello"}, "tickq's routes stay out of the schema"
    assert q.list_jobs(status="failed") == []


def test_fastapi_dashboard_takes_a_prefix_option_and_refuses_without_a_password(
    q: Queue,
) -> None:
    from fastapi import FastAPI

    app = FastAPI()
    app.include_router(q.fastapi_router(secret=SECRET, dashboard={"prefix": "/admin/jobs"}))
    with serving(app) as server, httpx.Client(timeout=30) as client:
        refused = client.get(f"{server}/admin/jobs/")
        assert refused.status_code == 503, "no password and no auth hook: never open"
        assert client.get(f"{server}/tickq/").status_code == 404


def logged_in_page(client: httpx.Client, base: str, prefix: str, q: Queue) -> None:
    """Log in at ``base`` and read a job's page, its links under ``prefix``."""
    assert client.get(f"{base}/tickq/").headers["location"].startswith(f"{prefix}/tickq/login")
    assert login(client, base).status_code == 303
    page = client.get(f"{base}/tickq/jobs/{failed_id(q)}")
    assert page.status_code == 200 and SECRET_PAYLOAD in page.text
    assert f'href="{prefix}/tickq/static/dashboard.css"' in page.text


def test_starlette_mount_under_a_prefix_serves_the_dashboard(q: Queue) -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    site = Starlette(routes=[
        Route("/", lambda request: PlainTextResponse("home")),
        Mount("/jobs", app=q.asgi_app(secret=SECRET, dashboard={"password": PASSWORD})),
    ])  # fmt: skip
    with serving(site) as server, httpx.Client(timeout=30) as client:
        assert client.get(server + "/").text == "home"
        logged_in_page(client, server + "/jobs", "/jobs", q)


def test_wsgi_app_behind_a_real_wsgi_server_serves_the_dashboard(q: Queue) -> None:
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    class Threaded(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    app = q.wsgi_app(secret=SECRET, dashboard={"password": PASSWORD})
    server = make_server("127.0.0.1", 0, app, server_class=Threaded, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with httpx.Client(timeout=30) as client:
            logged_in_page(client, f"http://127.0.0.1:{server.server_port}", "", q)
    finally:
        server.shutdown()
        thread.join(timeout=10)
