"""The dashboard over a real socket (uvicorn, httpx): who gets in, CSRF, read-only, pages."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from conftest import ROOT, run_tickq, tickq_env
from dashboard_serving import serving
from tickq import Queue
from tickq.dashboard import Dashboard, LoginLimiter

PASSWORD = "correct horse battery staple"
SECRET_PAYLOAD = "customer-4711-secret"


def declare(q: Queue) -> None:
    @q.job(max_attempts=1)
    def charge(customer: str) -> None:
        raise RuntimeError(f"card declined for {customer}")

    @q.job()
    def send_email(to: str = "") -> None:
        pass


@pytest.fixture
def q(queue: Queue) -> Queue:
    declare(queue)
    queue.enqueue("charge", {"customer": SECRET_PAYLOAD})
    queue.process_jobs()
    return queue


@pytest.fixture
def base(q: Queue) -> Iterator[str]:
    with serving(q.asgi_app(dashboard={"password": PASSWORD})) as url:
        yield url


def failed_id(q: Queue) -> int:
    return q.list_jobs(status="failed")[0].id


def login(client: httpx.Client, base: str, password: str = PASSWORD) -> httpx.Response:
    page = client.get(f"{base}/tickq/login")
    form = {"password": password, "csrf_token": csrf(page.text)}
    return client.post(f"{base}/tickq/login", data=form)


def csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "no CSRF token in the page"
    return found.group(1)


def test_unauthenticated_requests_get_the_login_page_and_no_data(q: Queue, base: str) -> None:
    job_id = failed_id(q)
    with httpx.Client() as client:
        for path in ("/tickq/", "/tickq/jobs", f"/tickq/jobs/{job_id}", "/tickq/schedules",
                     "/tickq/jobs?status=failed"):  # fmt: skip
            response = client.get(base + path)
            assert response.status_code == 303, path
            assert response.headers["location"].startswith("/tickq/login?next=")
            page = client.get(base + path, follow_redirects=True)
            assert 'name="password"' in page.text
            assert SECRET_PAYLOAD not in page.text and "charge" not in page.text
        refresh = client.get(f"{base}/tickq/jobs/{job_id}", headers={"X-Tickq-Refresh": "1"})
        assert refresh.status_code == 401 and SECRET_PAYLOAD not in refresh.text
        page = client.get(f"{base}/tickq/login")
        form = {"csrf_token": csrf(page.text)}
        posted = client.post(f"{base}/tickq/jobs/{job_id}/retry", data=form)
        assert posted.status_code == 401
    assert q.get_job(job_id).status == "failed"


def test_login_sets_a_signed_httponly_lax_cookie_and_logout_clears_it(q: Queue, base: str) -> None:
    with httpx.Client() as client:
        response = login(client, base)
        assert response.status_code == 303
        cookie = next(v for k, v in response.headers.multi_items()
                      if k == "set-cookie" and v.startswith("tickq_session="))  # fmt: skip
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/tickq" in cookie
        assert "Secure" not in cookie  # plain http: a Secure cookie would never come back
        page = client.get(f"{base}/tickq/jobs/{failed_id(q)}")
        assert page.status_code == 200 and SECRET_PAYLOAD in page.text
        forged = client.cookies["tickq_session"].split(".")[0] + "." + "0" * 64
        client.cookies.set("tickq_session", forged, path="/tickq")
        assert client.get(f"{base}/tickq/").status_code == 303
    with httpx.Client() as client:
        login(client, base)
        page = client.get(f"{base}/tickq/")
        out = client.post(f"{base}/tickq/logout", data={"csrf_token": csrf(page.text)})
        assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
        assert client.get(f"{base}/tickq/").status_code == 303


def test_cookie_is_secure_under_https(q: Queue, base: str) -> None:
    with httpx.Client(headers={"X-Forwarded-Proto": "https"}) as client:
        response = login(client, base)
        assert "Secure" in response.headers["set-cookie"]


def test_wrong_password_is_refused_and_logins_are_rate_limited(q: Queue) -> None:
    now = [1000.0]
    limiter = LoginLimiter(per_client=3, window=60, clock=lambda: now[0])
    app = q.asgi_app(dashboard=Dashboard(q, password=PASSWORD, login_limiter=limiter))
    with serving(app) as base, httpx.Client() as client:
        for _ in range(3):
            assert login(client, base, "guess").status_code == 401
        blocked = login(client, base)  # even the right password waits
        assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) > 0
        assert "tickq_session" not in client.cookies
        now[0] += 61
        assert login(client, base).status_code == 303


def test_post_without_a_valid_csrf_token_is_403_and_changes_nothing(q: Queue, base: str) -> None:
    job_id = failed_id(q)
    with httpx.Client() as client:
        login(client, base)
        for data in ({}, {"csrf_token": "0" * 64}):
            response = client.post(f"{base}/tickq/jobs/{job_id}/retry", data=data)
            assert response.status_code == 403
        other = httpx.Client()
        token = csrf(other.get(f"{base}/tickq/login").text)  # someone else's token
        assert client.post(f"{base}/tickq/jobs/{job_id}/delete",
                           data={"csrf_token": token}).status_code == 403  # fmt: skip
        assert client.post(f"{base}/tickq/jobs/retry-failed", data={}).status_code == 403
    assert q.get_job(job_id).status == "failed"


def test_actions_with_csrf_retry_cancel_delete(q: Queue, base: str) -> None:
    job_id = failed_id(q)
    with httpx.Client() as client:
        login(client, base)
        token = csrf(client.get(f"{base}/tickq/jobs/{job_id}").text)
        done = client.post(f"{base}/tickq/jobs/{job_id}/retry", data={"csrf_token": token})
        assert done.status_code == 303 and q.get_job(job_id).status == "pending"
        again = client.post(f"{base}/tickq/jobs/{job_id}/retry", data={"csrf_token": token})
        assert again.status_code == 409 and "already waiting" in again.text
        client.post(f"{base}/tickq/jobs/{job_id}/cancel", data={"csrf_token": token})
        assert q.get_job(job_id).status == "cancelled"
        gone = client.post(f"{base}/tickq/jobs/{job_id}/delete", data={"csrf_token": token})
        assert gone.status_code == 303 and q.get_job(job_id) is None
        assert client.get(f"{base}/tickq/jobs/{job_id}").status_code == 404


def test_cancel_of_a_running_job_asks_it_to_stop(q: Queue, base: str) -> None:
    job_id = q.enqueue("send_email", {"to": "x"})
    q._store.claim("worker-9", 1, 60)
    with httpx.Client() as client:
        login(client, base)
        token = csrf(client.get(f"{base}/tickq/jobs/{job_id}").text)
        asked = client.post(f"{base}/tickq/jobs/{job_id}/cancel", data={"csrf_token": token},
                            follow_redirects=True)  # fmt: skip
    assert asked.status_code == 200 and "Asked the running job to stop" in asked.text
    assert "Cancel requested" in asked.text
    assert f"/jobs/{job_id}/cancel" not in asked.text  # asked once: no button to ask again
    job = q.get_job(job_id)
    assert job is not None and job.status == "running" and job.cancel_requested_at is not None


def test_bulk_retry_of_failed_jobs_by_type(q: Queue, base: str) -> None:
    q.enqueue_many([("charge", {"customer": f"c{i}"}) for i in range(3)])
    q.enqueue("send_email", {"to": "x"})
    q.process_jobs()
    with httpx.Client() as client:
        login(client, base)
        page = client.get(f"{base}/tickq/jobs?status=failed&type=charge")
        assert "Retry all failed charge jobs" in page.text
        done = client.post(f"{base}/tickq/jobs/retry-failed",
                           data={"csrf_token": csrf(page.text), "type": "charge"})  # fmt: skip
        assert done.status_code == 303 and "retried=4" in done.headers["location"]
    assert q.list_jobs(status="failed") == []
    assert len(q.list_jobs(status="pending", type="charge")) == 4


def test_read_only_hides_and_refuses_actions(q: Queue) -> None:
    job_id = failed_id(q)
    app = q.asgi_app(dashboard={"password": PASSWORD, "read_only": True})
    with serving(app) as base, httpx.Client() as client:
        login(client, base)
        page = client.get(f"{base}/tickq/jobs/{job_id}")
        assert page.status_code == 200 and "/retry" not in page.text and "read-only" in page.text
        listing = client.get(f"{base}/tickq/jobs?status=failed")
        assert "retry-failed" not in listing.text
        token = csrf(page.text)  # the logout form's: valid, but actions stay refused
        for action in ("retry", "delete"):
            url = f"{base}/tickq/jobs/{job_id}/{action}"
            refused = client.post(url, data={"csrf_token": token})
            assert refused.status_code == 403 and "read-only" in refused.text
    assert q.get_job(job_id).status == "failed"


def test_mounted_without_password_or_hook_answers_503_and_the_tick_still_works(
    q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKQ_DASHBOARD_PASSWORD", raising=False)
    with serving(q.asgi_app(dashboard=True, secret="s" * 32)) as base, httpx.Client() as client:
        for path in ("/tickq/", "/tickq/login", f"/tickq/jobs/{failed_id(q)}"):
            response = client.get(base + path)
            assert response.status_code == 503 and "TICKQ_DASHBOARD_PASSWORD" in response.text
            assert SECRET_PAYLOAD not in response.text
        tick = client.post(f"{base}/api/cron/tick", headers={"Authorization": "Bearer " + "s" * 32})
        assert tick.status_code == 200


def test_password_from_the_environment(q: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKQ_DASHBOARD_PASSWORD", PASSWORD)
    with serving(q.asgi_app(dashboard=True)) as base, httpx.Client() as client:
        assert login(client, base, "nope").status_code == 401
        assert login(client, base).status_code == 303


def test_an_auth_hook_lets_the_host_app_decide(q: Queue) -> None:
    seen = []

    def staff_only(request: object) -> bool:
        seen.append(request)
        return dict(request.native["headers"]).get(b"x-staff") == b"yes"  # type: ignore[attr-defined]

    with serving(q.asgi_app(dashboard={"auth": staff_only})) as base, httpx.Client() as client:
        refused = client.get(f"{base}/tickq/jobs/{failed_id(q)}")
        assert refused.status_code == 401 and SECRET_PAYLOAD not in refused.text
        allowed = client.get(f"{base}/tickq/jobs/{failed_id(q)}", headers={"X-Staff": "yes"})
        assert allowed.status_code == 200 and SECRET_PAYLOAD in allowed.text
        assert "Log out" not in allowed.text
    assert seen


def test_payloads_and_errors_are_escaped(q: Queue, base: str) -> None:
    job_id = q.enqueue("charge", {"customer": "<script>alert(1)</script>"})
    q.process_jobs()
    with httpx.Client() as client:
        login(client, base)
        page = client.get(f"{base}/tickq/jobs/{job_id}").text
        listing = client.get(f"{base}/tickq/jobs?type=charge").text
    for html in (page, listing):
        assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_filters_search_and_keyset_pages(q: Queue, base: str) -> None:
    ids = q.enqueue_many([("send_email", {"to": f"u{i}"}) for i in range(120)])
    keyed = q.enqueue("send_email", {"to": "k"}, unique_key="welcome:42")
    with httpx.Client() as client:
        login(client, base)
        seen: list[int] = []
        url = f"{base}/tickq/jobs?type=send_email&status=pending"
        while url:
            page = client.get(url).text
            seen += [int(i) for i in re.findall(r'aria-label="Job (\d+)"', page)]
            older = re.search(r'rel="next" href="([^"]+)"', page)
            url = base + older.group(1).replace("&amp;", "&") if older else ""
        assert seen == sorted([*ids, keyed], reverse=True)
        by_key = client.get(f"{base}/tickq/jobs?q=welcome:42").text
        assert re.findall(r'aria-label="Job (\d+)"', by_key) == [str(keyed)]
        by_id = client.get(f"{base}/tickq/jobs?q=%23{ids[3]}").text
        assert re.findall(r'aria-label="Job (\d+)"', by_id) == [str(ids[3])]
        bad = client.get(f"{base}/tickq/jobs?status=bogus")
        assert bad.status_code == 400 and "status must be one of" in bad.text


def test_overview_and_schedules_pages(q: Queue, base: str) -> None:
    with httpx.Client() as client:
        login(client, base)
        page = client.get(f"{base}/tickq/")
        assert page.status_code == 200
        assert "charge" in page.text and "card declined" in page.text  # failing types
        assert "no tick yet" in page.text
        assert client.get(f"{base}/tickq/schedules").status_code == 200
        css = client.get(f"{base}/tickq/static/dashboard.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert client.get(f"{base}/tickq/static/../app.py").status_code == 404
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_flask_mounts_the_dashboard_over_wsgi(q: Queue) -> None:
    from flask import Flask
    from werkzeug.serving import make_server

    app = Flask(__name__)
    app.register_blueprint(q.flask_blueprint(dashboard={"password": PASSWORD}),
                           url_prefix="/admin")  # fmt: skip
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}/admin"
    try:
        with httpx.Client() as client:
            assert client.get(f"{base}/tickq/").headers["location"].startswith("/admin/tickq/login")
            login(client, base)
            page = client.get(f"{base}/tickq/jobs/{failed_id(q)}")
            assert page.status_code == 200 and SECRET_PAYLOAD in page.text
            assert 'href="/admin/tickq/static/dashboard.css"' in page.text
            retried = client.post(f"{base}/tickq/jobs/{failed_id(q)}/retry",
                                  data={"csrf_token": csrf(page.text)})  # fmt: skip
            assert retried.status_code == 303
    finally:
        server.shutdown()
        thread.join(timeout=10)
    assert q.list_jobs(status="failed") == []


def test_standalone_refuses_to_start_without_a_password(tmp_path: Path) -> None:
    app = tmp_path / "dashapp.py"
    app.write_text(f"from tickq import Queue\nq = Queue('sqlite:///{tmp_path}/d.db')\n")
    env = {"PYTHONPATH": str(tmp_path), "TICKQ_DASHBOARD_PASSWORD": ""}
    done = run_tickq("dashboard", "dashapp:q", "--port", "1", timeout=30, **env)
    assert done.returncode == 1
    assert "will not start: set TICKQ_DASHBOARD_PASSWORD" in done.stderr
    assert "Traceback" not in done.stderr


def test_standalone_serves_the_dashboard(tmp_path: Path) -> None:
    import socket

    app = tmp_path / "dashapp2.py"
    app.write_text(
        f"from tickq import Queue\nq = Queue('sqlite:///{tmp_path}/d.db')\nq.migrate()\n"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = tickq_env(PYTHONPATH=f"{tmp_path}:{ROOT / 'src'}", TICKQ_DASHBOARD_PASSWORD=PASSWORD)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tickq", "dashboard", "dashapp2:q", "--port", str(port),
         "--read-only"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert "tickq dashboard on http://127.0.0.1:" in proc.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        with httpx.Client() as client:
            for _ in range(100):
                try:
                    root = client.get(base + "/")
                    break
                except httpx.ConnectError:
                    threading.Event().wait(0.05)
            assert root.status_code == 303 and root.headers["location"] == "/tickq/"
            assert login(client, base).status_code == 303
            assert "read-only" in client.get(f"{base}/tickq/").text
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_import_tickq_does_not_import_the_dashboard(tmp_path: Path) -> None:
    code = ("import sys, tickq; q = tickq.Queue('sqlite:///" f"{tmp_path}/x.db'); q.asgi_app(); "
            "print([m for m in sys.modules if 'jinja' in m or 'dashboard' in m])")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=tickq_env(), timeout=30)  # fmt: skip
    assert out.stdout.strip() == "[]", out.stderr


@pytest.fixture
def django_server(q: Queue, request: pytest.FixtureRequest) -> Iterator[str]:
    extra = getattr(request, "param", {})
    env = tickq_env(TICKQ_DATABASE_URL=q.url, TICKQ_DASHBOARD_PASSWORD=PASSWORD, **extra)
    script = ROOT / "tests" / "apps" / "django_dashboard.py"
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_django_mounts_the_dashboard(q: Queue, django_server: str) -> None:
    job_id = failed_id(q)
    with httpx.Client(timeout=10) as client:
        first = client.get(f"{django_server}/tickq/jobs/{job_id}")
        assert first.status_code == 303 and SECRET_PAYLOAD not in first.text
        assert login(client, django_server).status_code == 303
        page = client.get(f"{django_server}/tickq/jobs/{job_id}")
        assert page.status_code == 200 and SECRET_PAYLOAD in page.text
        assert client.post(f"{django_server}/tickq/jobs/{job_id}/retry").status_code == 403
        assert q.get_job(job_id).status == "failed"
        retried = client.post(f"{django_server}/tickq/jobs/{job_id}/retry",
                              data={"csrf_token": csrf(page.text)})  # fmt: skip
        assert retried.status_code == 303
    assert q.get_job(job_id).status == "pending"


@pytest.mark.parametrize("django_server", [{"TICKQ_TEST_STAFF_HEADER": "X-Staff"}],
                         indirect=True)  # fmt: skip
def test_django_auth_hook_reads_the_django_request(q: Queue, django_server: str) -> None:
    with httpx.Client(timeout=10) as client:
        refused = client.get(f"{django_server}/tickq/")
        assert refused.status_code == 401 and "charge" not in refused.text
        allowed = client.get(f"{django_server}/tickq/", headers={"X-Staff": "yes"})
        assert allowed.status_code == 200 and "charge" in allowed.text


def test_login_sends_people_back_only_inside_the_dashboard(q: Queue, base: str) -> None:
    for target, expected in [("/tickq/jobs?status=failed", "/tickq/jobs?status=failed"),
                             ("//evil.example/tickq/", "/tickq/"),
                             ("https://evil.example/", "/tickq/"),
                             ("/tickq/..//evil.example", "/tickq/")]:  # fmt: skip
        with httpx.Client() as client:
            page = client.get(f"{base}/tickq/login")
            form = {"password": PASSWORD, "csrf_token": csrf(page.text), "next": target}
            response = client.post(f"{base}/tickq/login", data=form)
            assert response.headers["location"] == expected, target


def test_a_database_problem_is_a_503_page_saying_what_to_do(tmp_path: Path) -> None:
    never = Queue(f"sqlite:///{tmp_path / 'never-migrated.db'}")
    with serving(never.asgi_app(dashboard={"password": PASSWORD})) as base, httpx.Client() as c:
        for path in ("/tickq/login", "/tickq/", "/tickq/jobs", "/tickq/jobs/1", "/tickq/schedules"):
            response = c.get(base + path, follow_redirects=True)  # sessions need the tables too
            assert response.status_code == 503 and "migrate" in response.text, path


def test_dashboard_options_are_checked_when_built(q: Queue) -> None:
    from tickq import ConfigurationError

    for options, message in [
        ({"prefix": "tickq"}, "prefix must start with '/' and not end with one, got 'tickq'"),
        ({"prefix": "/tickq/"}, "prefix must start with '/'"),
        ({"refresh_seconds": -1}, "refresh_seconds must be >= 0, got -1"),
    ]:
        with pytest.raises(ConfigurationError, match=re.escape(message)):
            q.asgi_app(dashboard=options)
    with pytest.raises(ConfigurationError, match="dashboard must be True, a dict"):
        q.asgi_app(dashboard="yes")  # type: ignore[arg-type]


def test_recent_alerts_are_on_the_overview_escaped(db_url: str) -> None:
    from tickq import FrozenClock

    clock, sent = FrozenClock(), []
    q = Queue(db_url, clock=clock, alerts=[sent.append])
    q.migrate()

    @q.job(name="<img src=x onerror=alert(1)>", max_attempts=1)
    def hostile() -> None:
        raise RuntimeError("boom")

    q.enqueue("<img src=x onerror=alert(1)>")
    q.process_jobs()
    for wait in (timedelta(minutes=15), timedelta(hours=1)):
        clock.advance(wait)
        q.process_jobs()
    assert len(sent) == 1
    with serving(q.asgi_app(dashboard={"password": PASSWORD})) as base, httpx.Client() as c:
        login(c, base)
        page = c.get(f"{base}/tickq/").text
    alerts = page[page.index("Recent alerts") :]
    assert "&lt;img src=x onerror=alert(1)&gt;" in alerts and "to ?.list.append" in alerts
    assert "<img src=x" not in page
    q.close()


def test_a_snoozed_job_page_shows_its_snoozes_as_waits(q: Queue, base: str) -> None:
    from tickq import Snooze

    @q.job(max_attempts=1)
    def wait_for_export() -> None:
        raise Snooze(600)

    job_id = wait_for_export.enqueue()
    q.process_jobs()
    with httpx.Client() as client:
        login(client, base)
        page = client.get(f"{base}/tickq/jobs/{job_id}").text
    assert '<span class="status status-snoozed">snoozed</span>' in page
    assert '<li class="tl-pending"><span class="tl-what">attempt 1: snoozed</span>' in page
    assert "tl-failed" not in page and "error-line" not in page
