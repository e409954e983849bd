"""Dashboard logins against an attacker (issue 22, findings 1-5), over real sockets, on
SQLite and Postgres: nothing a browser gets before logging in lets anyone test password
guesses offline; sessions live in the database (logout, log out everywhere, expiry); CSRF
tokens belong to one session; failed logins are counted in the database, never lock the
right password out of a browser that logged in before, and X-Forwarded-For counts only
when trusted; addresses compare as addresses (proxy networks, IPv4-mapped, IPv6 per /64)."""

from __future__ import annotations

import hashlib
import hmac
import random
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from conftest import PG_URL, ROOT, require_postgres, run_tickq, tickq_env, with_search_path
from dashboard_serving import serving
from tickq import ConfigurationError, FrozenClock, Queue
from tickq.dashboard import Dashboard, LoginLimiter
from tickq.dashboard.auth import SESSION_SECONDS

PASSWORD = "correct horse battery staple"
OTHER_PASSWORD = "a different twelve+ password"
NONCE = "0123456789abcdef" * 2


def login(client: httpx.Client, base: str, password: str = PASSWORD) -> httpx.Response:
    page = client.get(f"{base}/tickq/login")
    return client.post(f"{base}/tickq/login",
                       data={"password": password, "csrf_token": csrf(page.text)})  # fmt: skip


def csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "no CSRF token in the page"
    return found.group(1)


def from_address(address: str) -> httpx.Client:
    """A client whose connections come from ``address`` (any 127.x.y.z works on Linux)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=10)


@pytest.fixture
def q(queue: Queue) -> Queue:
    @queue.job(max_attempts=1)
    def charge() -> None:
        raise RuntimeError("declined")

    queue.enqueue("charge")
    queue.process_jobs()
    return queue


@pytest.fixture
def base(q: Queue) -> Iterator[str]:
    with serving(q.asgi_app(dashboard={"password": PASSWORD})) as url:
        yield url


@pytest.fixture
def other_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A second, migrated database of the same backend: another app (staging, say)."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'other.db'}"
        Queue(url).migrate()
        yield url
        return
    require_postgres()
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        url = with_search_path(PG_URL, schema)
        other = Queue(url)
        other.migrate()
        other.close()
        yield url
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@contextmanager
def standalone(tmp_path: Path, url: str, *args: str, **env: str) -> Iterator[str]:
    """``tickq dashboard`` in a process of its own over ``url``; yields its base URL."""
    module = f"dash_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(f"from tickq import Queue\nq = Queue({url!r})\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = tickq_env(PYTHONPATH=f"{tmp_path}:{ROOT / 'src'}",
                    TICKQ_DASHBOARD_PASSWORD=PASSWORD, **env)  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "tickq", "dashboard", f"{module}:q", "--port", str(port), *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert "tickq dashboard on http://127.0.0.1:" in proc.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                httpx.get(base + "/")
                break
            except httpx.ConnectError:
                threading.Event().wait(0.05)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- finding 1: nothing on the login page can be tested against a password guess ---------
def old_scheme_guesses(password: str, nonce: str) -> set[str]:
    """Tokens a password would give under password-derived keys (tickq's old one first)."""
    keys = [
        hashlib.sha256(b"tickq-dashboard-key\x00password:" + password.encode()).digest(),
        hashlib.sha256(password.encode()).digest(),
        password.encode(),
    ]
    return {hmac.new(k, (p + nonce).encode(), "sha256").hexdigest()
            for k in keys for p in ("", "csrf:", "login:", "form:", "session:")}  # fmt: skip


def test_an_offline_guess_among_1000_cannot_pick_the_password_from_the_login_page(
    q: Queue, base: str
) -> None:
    with httpx.Client() as client:
        page = client.get(f"{base}/tickq/login")
        form = {"password": "not it at all", "csrf_token": csrf(page.text)}
        wrong = client.post(f"{base}/tickq/login", data=form)
    assert wrong.status_code == 401
    handed_out = [page.text, wrong.text, *page.headers.values(), *wrong.headers.values()]
    nonce = client.cookies["tickq_csrf"]
    tokens = set(re.findall(r"[0-9a-f]{64}", " ".join(handed_out)))
    assert tokens, "the login page hands out a CSRF token"
    candidates = [f"wrong-guess-{i:04d}-password" for i in range(1000)] + [PASSWORD]
    random.Random(22).shuffle(candidates)
    matches = [c for c in candidates if old_scheme_guesses(c, nonce) & tokens]
    assert matches == [], "a guess checked offline against the login page picked the password"


def test_the_login_page_is_the_same_whatever_the_password(q: Queue) -> None:
    """Two dashboards of one install with different passwords hand a browser with the same
    cookie byte-identical login pages and refusals: no offline test can tell them apart."""
    answers = []
    for password in (PASSWORD, OTHER_PASSWORD):
        app = q.asgi_app(dashboard=Dashboard(q, password=password))
        with serving(app) as url, httpx.Client(cookies={"tickq_csrf": NONCE}) as client:
            page = client.get(f"{url}/tickq/login")
            form = {"password": "a wrong guess here", "csrf_token": csrf(page.text)}
            refused = client.post(f"{url}/tickq/login", data=form)
            assert refused.status_code == 401 and "set-cookie" not in refused.headers
            answers.append((page.text, refused.text, page.headers.get("set-cookie")))
    assert answers[0] == answers[1]


# -- finding 2: a minimum password length ------------------------------------------------
@pytest.mark.parametrize("short", ["a", " ", "1234", "eleven char"])
def test_a_short_password_is_refused_when_the_dashboard_is_built(
    q: Queue, short: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match="needs at least 12") as given:
        Dashboard(q, password=short)
    assert "secrets.token_urlsafe(24)" in str(given.value) and "password=" in str(given.value)
    monkeypatch.setenv("TICKQ_DASHBOARD_PASSWORD", short)
    with pytest.raises(ConfigurationError, match=r"TICKQ_DASHBOARD_PASSWORD.*needs at least 12"):
        q.asgi_app(dashboard=True)


def test_tickq_dashboard_refuses_a_short_password(tmp_path: Path) -> None:
    (tmp_path / "shortpw.py").write_text(
        f"from tickq import Queue\nq = Queue('sqlite:///{tmp_path}/d.db')\n"
    )
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT / 'src'}", "TICKQ_DASHBOARD_PASSWORD": "hunter2"}
    done = run_tickq("dashboard", "shortpw:q", "--port", "1", timeout=30, **env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "has 7 characters; it needs at least 12" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout


def test_a_twelve_character_password_logs_in(q: Queue) -> None:
    with serving(q.asgi_app(dashboard={"password": "x" * 12})) as url, httpx.Client() as c:
        assert login(c, url, "x" * 12).status_code == 303
        assert c.get(f"{url}/tickq/").status_code == 200


# -- finding 3: sessions end on the server -----------------------------------------------
def test_a_cookie_replayed_after_logout_is_refused(q: Queue, base: str) -> None:
    with httpx.Client() as client:
        assert login(client, base).status_code == 303
        kept = client.cookies["tickq_session"]
        page = client.get(f"{base}/tickq/")
        assert page.status_code == 200
        client.post(f"{base}/tickq/logout", data={"csrf_token": csrf(page.text)})
    with httpx.Client(cookies={"tickq_session": kept}) as replay:
        refused = replay.get(f"{base}/tickq/jobs?status=failed")
        assert refused.status_code == 303 and "/tickq/login" in refused.headers["location"]


def test_log_out_everywhere_ends_every_session(q: Queue, base: str) -> None:
    with httpx.Client() as mine, httpx.Client() as theirs:
        login(mine, base)
        login(theirs, base)
        assert theirs.get(f"{base}/tickq/").status_code == 200
        page = mine.get(f"{base}/tickq/")
        assert "Log out everywhere" in page.text
        out = mine.post(f"{base}/tickq/logout-everywhere", data={"csrf_token": csrf(page.text)})
        assert out.status_code == 303
        for client in (mine, theirs):
            assert client.get(f"{base}/tickq/").status_code == 303
        assert login(theirs, base).status_code == 303  # a new login works again


def test_log_out_everywhere_from_python_and_the_cli(q: Queue, base: str, tmp_path: Path) -> None:
    dashboard = Dashboard(q, password=PASSWORD)
    with httpx.Client() as a, httpx.Client() as b:
        login(a, base)
        login(b, base)
        assert dashboard.logout_everywhere() == 2
        assert a.get(f"{base}/tickq/").status_code == 303
        login(a, base)
        (tmp_path / "outapp.py").write_text(f"from tickq import Queue\nq = Queue({q.url!r})\n")
        done = run_tickq("dashboard", "outapp:q", "--logout-everywhere", timeout=30,
                         PYTHONPATH=f"{tmp_path}:{ROOT / 'src'}")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "ended 1 dashboard session: every browser must log in again" in done.stdout
        assert a.get(f"{base}/tickq/").status_code == 303


def test_sessions_expire_on_the_server_whatever_the_cookie_says(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    from datetime import timedelta

    with serving(frozen_queue.asgi_app(dashboard={"password": PASSWORD})) as url, \
            httpx.Client() as client:  # fmt: skip
        login(client, url)
        clock.advance(timedelta(seconds=SESSION_SECONDS - 60))
        assert client.get(f"{url}/tickq/").status_code == 200
        clock.advance(timedelta(seconds=120))
        assert client.get(f"{url}/tickq/").status_code == 303


def test_a_new_password_ends_the_sessions_of_the_old_one(q: Queue, base: str) -> None:
    with httpx.Client() as client:
        login(client, base)
        app = q.asgi_app(dashboard={"password": OTHER_PASSWORD})
        with serving(app) as changed:
            assert client.get(f"{changed}/tickq/").status_code == 303
            assert login(client, changed, OTHER_PASSWORD).status_code == 303
            assert client.get(f"{changed}/tickq/").status_code == 200


# -- finding 5: CSRF tokens bound to the session; sessions bound to the app ---------------
def test_a_token_for_a_nonce_the_attacker_chose_is_refused(q: Queue, base: str) -> None:
    job_id = q.list_jobs(status="failed")[0].id
    with httpx.Client(cookies={"tickq_csrf": NONCE}) as attacker:
        planted = csrf(attacker.get(f"{base}/tickq/login").text)  # a token for their nonce
    with httpx.Client() as victim:
        login(victim, base)
        victim.cookies.set("tickq_csrf", NONCE, path="/tickq")  # tossed from a sibling site
        tossed = victim.post(f"{base}/tickq/jobs/{job_id}/retry", data={"csrf_token": planted})
        assert tossed.status_code == 403
    assert q.get_job(job_id).status == "failed"


def test_csrf_tokens_belong_to_one_session_and_change_at_login(q: Queue, base: str) -> None:
    job_id = q.list_jobs(status="failed")[0].id
    with httpx.Client() as a, httpx.Client() as b:
        before = csrf(a.get(f"{base}/tickq/login").text)
        login(a, base)
        login(b, base)
        theirs = csrf(b.get(f"{base}/tickq/").text)
        mine = csrf(a.get(f"{base}/tickq/").text)
        assert len({before, theirs, mine}) == 3
        for token in (before, theirs):
            refused = a.post(f"{base}/tickq/jobs/{job_id}/retry", data={"csrf_token": token})
            assert refused.status_code == 403
        assert q.get_job(job_id).status == "failed"
        done = a.post(f"{base}/tickq/jobs/{job_id}/retry", data={"csrf_token": mine})
        assert done.status_code == 303 and q.get_job(job_id).status == "pending"


def test_a_session_of_one_app_is_refused_by_another_with_the_same_password_and_secret(
    q: Queue, base: str, other_url: str
) -> None:
    secret = "one-secret-shared-by-staging-and-prod"
    staging, production = Queue(other_url), q
    apps = [p.asgi_app(dashboard={"password": PASSWORD, "secret_key": secret})
            for p in (staging, production)]  # fmt: skip
    with serving(apps[0]) as stage, serving(apps[1]) as prod, httpx.Client() as client:
        page = client.get(f"{stage}/tickq/login")
        assert login(client, stage).status_code == 303
        session = client.cookies["tickq_session"]
        with httpx.Client(cookies={"tickq_session": session}) as carried:
            assert carried.get(f"{prod}/tickq/").status_code == 303
        with httpx.Client(cookies={"tickq_csrf": page.cookies["tickq_csrf"]}) as form:
            carried_form = {"password": PASSWORD, "csrf_token": csrf(page.text)}
            posted = form.post(f"{prod}/tickq/login", data=carried_form)
            assert posted.status_code == 403
    staging.close()


# -- finding 4: login limits in the database, no lock-out of a fresh client, no XFF -------
def test_failed_logins_count_across_processes(q: Queue, tmp_path: Path) -> None:
    app = q.asgi_app(dashboard={"password": PASSWORD})
    with serving(app) as here, standalone(tmp_path, q.url) as there, httpx.Client() as client:
        for url in (here, here, here, there, there):
            assert login(client, url, "wrong guess number x").status_code == 401
        for url in (here, there):  # five failures in all: the sixth try waits, on both
            blocked = login(client, url)
            assert blocked.status_code == 429, url
            assert int(blocked.headers["retry-after"]) > 0
        assert "tickq_session" not in client.cookies


def test_parallel_guesses_get_no_more_tries_than_sequential_ones(q: Queue) -> None:
    limiter = LoginLimiter(per_client=3, window=60)
    app = q.asgi_app(dashboard=Dashboard(q, password=PASSWORD, login_limiter=limiter))
    with serving(app) as url:
        with httpx.Client() as first:
            token = csrf(first.get(f"{url}/tickq/login").text)
            nonce = first.cookies["tickq_csrf"]
        statuses: list[int] = []
        barrier = threading.Barrier(12)

        def guess(n: int) -> None:
            with httpx.Client(cookies={"tickq_csrf": nonce}, timeout=30) as client:
                barrier.wait()
                form = {"password": f"parallel guess {n:02d}", "csrf_token": token}
                statuses.append(client.post(f"{url}/tickq/login", data=form).status_code)

        threads = [threading.Thread(target=guess, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(set(statuses)) == [401, 429] and statuses.count(401) <= 3, statuses


def test_a_flood_of_failures_never_locks_a_fresh_client_out(q: Queue) -> None:
    limiter = LoginLimiter(per_client=3, overall=5, window=60)
    app = q.asgi_app(dashboard=Dashboard(q, password=PASSWORD, login_limiter=limiter))
    with serving(app) as url:
        for n in range(8):
            with from_address(f"127.0.0.{10 + n}") as flooder:
                assert login(flooder, url, "flooding guess!").status_code == 401
        with from_address("127.0.0.10") as failed_before:
            assert login(failed_before, url).status_code == 429  # failed in the flood: waits
        with from_address("127.0.0.99") as owner:
            assert login(owner, url).status_code == 303
            assert owner.get(f"{url}/tickq/").status_code == 200


def test_x_forwarded_for_is_ignored_by_tickq_dashboard(q: Queue, tmp_path: Path) -> None:
    with standalone(tmp_path, q.url) as url, httpx.Client() as client:
        for n in range(5):
            client.headers["X-Forwarded-For"] = f"203.0.113.{n}"
            assert login(client, url, "wrong guess number y").status_code == 401
        client.headers["X-Forwarded-For"] = "203.0.113.77"
        assert login(client, url).status_code == 429
    trusting = ("--trusted-proxy", "127.0.0.1")
    with standalone(tmp_path, q.url, *trusting) as url, httpx.Client() as client:
        client.headers["X-Forwarded-For"] = "203.0.113.77"  # behind a proxy: someone new
        assert login(client, url).status_code == 303


def test_x_forwarded_for_counts_only_from_a_trusted_proxy(q: Queue) -> None:
    limiter = LoginLimiter(per_client=2, window=60)
    plain = Dashboard(q, password=PASSWORD, login_limiter=limiter)
    behind = Dashboard(q, password=PASSWORD, login_limiter=limiter,
                       trusted_proxies=["127.0.0.1"])  # fmt: skip
    with serving(q.asgi_app(dashboard=plain), proxy_headers=False) as url, httpx.Client() as client:
        for n in range(2):
            client.headers["X-Forwarded-For"] = f"198.51.100.{n}"
            assert login(client, url, "wrong guess number z").status_code == 401
        client.headers["X-Forwarded-For"] = "198.51.100.9"
        assert login(client, url).status_code == 429  # the peer, 127.0.0.1, failed twice
    with (
        serving(q.asgi_app(dashboard=behind), proxy_headers=False) as url,
        httpx.Client() as client,
    ):
        client.headers["X-Forwarded-For"] = "198.51.100.9, 127.0.0.1"
        assert login(client, url).status_code == 303  # the proxy says: someone new
        for _ in range(2):
            client.headers["X-Forwarded-For"] = "198.51.100.5"
            assert login(client, url, "wrong guess number z").status_code == 401
        assert login(client, url).status_code == 429
    with pytest.raises(ConfigurationError, match="trusted_proxies must be IP addresses"):
        Dashboard(q, password=PASSWORD, trusted_proxies=["proxy.internal"])


# -- addresses as addresses: networks of proxies, IPv4-mapped peers, IPv6 per /64 ----------
def guesses_from(url: str, addresses: list[str], password: str = "wrong guess number w",
                 **cookies: str) -> list[int]:  # fmt: skip
    """Log in once from each address, as a trusted proxy on 127.0.0.1 says it is."""
    statuses = []
    for address in addresses:
        with httpx.Client(headers={"X-Forwarded-For": address}, cookies=cookies) as client:
            statuses.append(login(client, url, password).status_code)
    return statuses


def test_trusted_proxies_may_be_networks(q: Queue) -> None:
    limiter = LoginLimiter(per_client=2, window=60)
    dashboard = Dashboard(q, password=PASSWORD, login_limiter=limiter,
                          trusted_proxies=["10.0.0.0/8", "127.0.0.0/8"])  # fmt: skip
    with serving(q.asgi_app(dashboard=dashboard), proxy_headers=False) as url:
        assert guesses_from(url, ["198.51.100.1, 10.1.2.3"] * 3) == [401, 401, 429]
        assert guesses_from(url, ["198.51.100.2, 10.200.0.1"], PASSWORD) == [303]
    with pytest.raises(ConfigurationError, match=r"or 10\.0\.0\.0/8\), got '10\.0\.0\.1/8'"):
        Dashboard(q, password=PASSWORD, trusted_proxies=["10.0.0.1/8"])  # host bits set


def test_an_ipv4_mapped_peer_is_the_ipv4_address_it_maps(q: Queue) -> None:
    """On a dual-stack socket the proxy at 127.0.0.1 is seen as ``::ffff:127.0.0.1``: still
    trusted; and ``::ffff:198.51.100.7`` is counted as 198.51.100.7."""
    limiter = LoginLimiter(per_client=2, window=60)
    dashboard = Dashboard(q, password=PASSWORD, login_limiter=limiter,
                          trusted_proxies=["127.0.0.1"])  # fmt: skip
    app = q.asgi_app(dashboard=dashboard)
    with serving(app, dual_stack=True, proxy_headers=False) as url:
        assert guesses_from(url, ["198.51.100.7", "::ffff:198.51.100.7", "198.51.100.7"]) == [
            401, 401, 429]  # fmt: skip
        assert guesses_from(url, ["198.51.100.8"], PASSWORD) == [303]  # not the peer's count


def test_ipv6_clients_are_counted_per_64(q: Queue) -> None:
    limiter = LoginLimiter(per_client=3, window=60)
    dashboard = Dashboard(q, password=PASSWORD, login_limiter=limiter,
                          trusted_proxies=["127.0.0.1"])  # fmt: skip
    with serving(q.asgi_app(dashboard=dashboard), proxy_headers=False) as url:
        one_64 = [f"2001:db8:0:7::{n:x}" for n in range(1, 40)]
        statuses = guesses_from(url, one_64)
        assert statuses.count(401) == 3 and set(statuses[3:]) == {429}, statuses
        assert guesses_from(url, ["2001:db8:0:8::1"], PASSWORD) == [303]  # the next /64


def test_a_flood_from_fresh_addresses_shares_one_budget_and_known_browsers_log_in(
    q: Queue,
) -> None:
    """Past ``overall`` failures in a window, clients not seen before share ``overall``
    more tries: at most ``2 * overall`` passwords checked, from however many addresses. A
    browser that logged in before (its signed device cookie) still logs in, from anywhere."""
    limiter = LoginLimiter(per_client=3, overall=4, window=60)
    dashboard = Dashboard(q, password=PASSWORD, login_limiter=limiter,
                          trusted_proxies=["127.0.0.1"])  # fmt: skip
    with serving(q.asgi_app(dashboard=dashboard), proxy_headers=False) as url:
        with httpx.Client(headers={"X-Forwarded-For": "192.0.2.1"}) as owner:
            assert login(owner, url).status_code == 303
            device = owner.cookies["tickq_device"]
        flood = guesses_from(url, [f"2001:db8:{n:x}::1" for n in range(30)])
        assert flood.count(401) == 8 and set(flood[8:]) == {429}, flood
        assert guesses_from(url, ["203.0.113.50"], PASSWORD) == [429]  # unknown: waits
        forged = device.split(".")[0] + "." + "0" * 64
        assert guesses_from(url, ["203.0.113.51"], PASSWORD, tickq_device=forged) == [429]
        assert guesses_from(url, ["2001:db8:1::1"], PASSWORD, tickq_device=device) == [303]


def test_a_refused_login_writes_nothing_to_the_database(q: Queue) -> None:
    """With another connection holding the login table against writes, refused (429)
    attempts are still answered at once: they only read."""
    limiter = LoginLimiter(per_client=2, window=60)
    app = q.asgi_app(dashboard=Dashboard(q, password=PASSWORD, login_limiter=limiter))
    with serving(app) as url, httpx.Client(timeout=5) as client:
        for _ in range(2):
            assert login(client, url, "wrong guess number v").status_code == 401
        with holding_the_logins_table(q.url):
            for _ in range(3):
                assert login(client, url, "wrong guess number v").status_code == 429


@contextmanager
def holding_the_logins_table(url: str) -> Iterator[None]:
    """Another connection takes a lock that lets readers in but no writer."""
    if url.startswith("sqlite:"):
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # the write lock: readers go on (WAL)
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    import psycopg

    with psycopg.connect(url) as conn:  # one transaction, rolled back at the end
        conn.execute("LOCK TABLE tickq_dashboard_logins IN SHARE MODE")
        yield
        conn.rollback()


# -- log out everywhere and the environment's password belong to tickq's own login --------
def test_log_out_everywhere_is_refused_under_an_auth_hook_and_when_read_only(
    q: Queue, base: str
) -> None:
    """Only a dashboard opened by tickq's own login may end every session: not one the
    host app's ``auth`` hook opens (a staff page), nor a read-only one."""
    hook = Dashboard(q, auth=lambda request: True)
    read_only = Dashboard(q, password=PASSWORD, read_only=True)
    with httpx.Client() as owner:
        assert login(owner, base).status_code == 303
        with serving(q.asgi_app(dashboard=hook)) as url, httpx.Client() as staff:
            staff.get(f"{url}/tickq/")
            token = hook.guard.nonce_token(staff.cookies["tickq_csrf"])  # the forms' own
            refused = staff.post(f"{url}/tickq/logout-everywhere", data={"csrf_token": token})
            assert refused.status_code == 403 and "host app" in refused.text
        with serving(q.asgi_app(dashboard=read_only)) as url, httpx.Client() as viewer:
            assert login(viewer, url).status_code == 303
            page = viewer.get(f"{url}/tickq/")
            assert "/logout-everywhere" not in page.text and "/logout" in page.text
            form = {"csrf_token": csrf(page.text)}
            refused = viewer.post(f"{url}/tickq/logout-everywhere", data=form)
            assert refused.status_code == 403 and "read-only" in refused.text
            assert viewer.get(f"{url}/tickq/").status_code == 200
        assert owner.get(f"{base}/tickq/").status_code == 200  # every session lives on


def test_an_auth_hook_ignores_the_environments_password(
    q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$TICKQ_DASHBOARD_PASSWORD`` set short for another tool does not break a dashboard
    the host app's login opens: with ``auth=`` it is not read."""
    monkeypatch.setenv("TICKQ_DASHBOARD_PASSWORD", "short")
    with serving(q.asgi_app(dashboard={"auth": lambda request: True})) as url:
        assert httpx.get(f"{url}/tickq/").status_code == 200
        assert httpx.get(f"{url}/tickq/login").status_code == 303  # no login form of ours
