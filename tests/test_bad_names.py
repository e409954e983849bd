"""Names and queries tickq can't store, and secrets it must not echo.

A job type, queue or unique_key longer than Postgres can index (or NOTIFY) is refused at
enqueue, registration and ``pause``, the same way on both backends, naming the limit,
before the database is touched; a value that does reach Postgres too large is a
``ConfigurationError``, never ``DatabaseUnavailable``. The dashboard answers 400 to a NUL in
a filter and to more than 50 query fields (ASGI, WSGI, Flask), and its 503 page names no
host, port or database. A password never reaches an error line, whatever argument a URL
(or a libpq key/value string) was given in.
"""

from __future__ import annotations

import random
import string
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import PG_URL, require_postgres, run_tickq
from dashboard_serving import serving
from test_database_down import closed_port
from test_http_fuzz import wsgiref_serving
from tickq import ConfigurationError, DatabaseUnavailable, Queue
from tickq.job import NewJob

PASSWORD = "correct horse battery staple"
LETTERS = string.ascii_letters + string.digits


def text(size: int) -> str:
    """Random letters, which Postgres can't compress below its index limit."""
    return "".join(random.choice(LETTERS) for _ in range(size))


@pytest.fixture
def lax(db_url: str) -> Iterator[Queue]:
    q = Queue(db_url, strict=False)
    q.migrate()
    yield q
    q.close()


def test_names_too_long_to_index_are_refused_alike_on_both_backends_naming_the_limit(
    lax: Queue,
) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("x", {"unique_key": text(2001)}),
        ("x", {"unique_key": "é" * 1001}),  # 1,001 characters, 2,002 bytes
        (text(1001), {}),
        ("x", {"queue": text(1001)}),
        ("x", {"queue": text(9000)}),  # too long to NOTIFY, too
    ]
    for job_type, options in cases:
        with pytest.raises(ConfigurationError, match=r"bytes long \(UTF-8\); at most \d+ fit"):
            lax.enqueue(job_type, {}, **options)
    for name in (text(1001), "ü" * 501, text(9000)):
        with pytest.raises(ConfigurationError, match="at most 1000 fit"):
            lax.pause(name)
    assert lax.paused() == set() and sum(lax.stats()["by_status"].values()) == 0
    with pytest.raises(ConfigurationError, match=r"job type .* at most 1000"):
        lax.job(name=text(1001))(lambda: None)
    with pytest.raises(ConfigurationError, match=r"schedule name .* at most 1000"):
        lax.schedule(every=timedelta(hours=1), name=text(1001))(lambda: None)


def test_names_at_the_limits_work_everywhere(lax: Queue) -> None:
    job_type, queue_name = text(1000), text(1000)

    @lax.job(name=job_type, queue=queue_name, max_attempts=1)
    def fails() -> None:
        raise RuntimeError("for the totals and the failed index")

    @lax.schedule(every=timedelta(minutes=1), name=text(1000))
    def every_minute() -> None:
        pass

    fails.with_options(unique_key=text(2000)).enqueue()
    lax.enqueue(job_type, {}, unique_key=text(2000), unique_scope="all")
    assert lax.pause(queue_name) and lax.resume(queue_name)
    report = lax.tick()
    assert report["jobs"]["failed"] == 2 and report["jobs"]["succeeded"] == 1, report
    assert lax.retry_failed(job_type) == 2


def test_a_value_too_large_for_postgres_is_a_data_error_not_an_outage(pg_schema_url: str) -> None:
    q = Queue(pg_schema_url, strict=False)
    q.migrate()
    # Past enqueue's checks, as an older caller's row would be:
    row = NewJob(type="x", payload_json="{}", queue="default", priority=0, max_attempts=1,
                 run_after=None, unique_key=text(3000), unique_scope="active",
                 meta_json=None)  # fmt: skip
    with pytest.raises(ConfigurationError) as caught:
        q._store.insert([row])
    assert not isinstance(caught.value, DatabaseUnavailable)
    assert "too large to store" in str(caught.value) and "not an outage" in str(caught.value)
    assert "index row size" in str(caught.value)
    assert q.enqueue("x", {}) > 0  # the connection is fine
    q.close()


@contextmanager
def flask_serving(q: Queue, **dashboard: Any) -> Iterator[str]:
    from flask import Flask
    from werkzeug.serving import make_server

    app = Flask(__name__)
    app.register_blueprint(q.flask_blueprint(dashboard=dashboard))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


def served(q: Queue, adapter: str, **dashboard: Any) -> Any:
    if adapter == "asgi":
        return serving(q.asgi_app(dashboard=dashboard))
    if adapter == "wsgi":
        return wsgiref_serving(q.wsgi_app(dashboard=dashboard))
    return flask_serving(q, **dashboard)


@pytest.mark.parametrize("adapter", ["asgi", "wsgi", "flask"])
def test_more_than_50_query_fields_is_a_400_before_any_login(
    lax: Queue, adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    query = "&".join(f"f{i}=1" for i in range(51))
    with served(lax, adapter, password=PASSWORD) as base:
        for path in ("/tickq/jobs", "/tickq/login", "/tickq/"):
            r = httpx.get(f"{base}{path}?{query}", timeout=30)
            assert r.status_code == 400, (path, r.status_code, r.text[:300])
            assert "too many query parameters: at most 50" in r.text
        assert httpx.get(f"{base}/tickq/login?next=%2Ftickq%2F", timeout=30).status_code == 200
    assert "Traceback" not in caplog.text


def test_a_nul_in_a_dashboard_filter_is_a_400(lax: Queue) -> None:
    lax.enqueue("x", {}, unique_key="k")
    with serving(lax.asgi_app(dashboard={"auth": lambda request: True})) as base:
        for name in ("q", "type", "queue"):
            r = httpx.get(f"{base}/tickq/jobs", params={name: "a\x00b"}, timeout=30)
            assert r.status_code == 400, (name, r.status_code, r.text[:300])
            assert "contains a NUL character" in r.text
        assert httpx.get(f"{base}/tickq/jobs", params={"q": "k"}, timeout=30).status_code == 200


def test_the_dashboards_503_page_names_no_host_port_user_or_database() -> None:
    port = closed_port()
    q = Queue(f"postgresql://alice_db_user:pw-hunter2@127.0.0.1:{port}/orders_prod")
    with serving(q.asgi_app(dashboard={"auth": lambda request: True})) as base:
        for path in ("/tickq/", "/tickq/jobs", "/tickq/schedules"):
            r = httpx.get(base + path, timeout=30)
            assert r.status_code == 503, (path, r.text[:300])
            assert r.headers["retry-after"] == "30"
            assert "the database is unreachable or dropped the connection" in r.text
            for word in ("127.0.0.1", str(port), "alice_db_user", "orders_prod", "hunter2"):
                assert word not in r.text, (word, path)


def test_the_dashboard_on_a_database_that_does_not_exist_names_none_of_it() -> None:
    require_postgres()
    parts = urlsplit(PG_URL)
    missing = f"orders_prod_{random.randrange(10**9)}"
    q = Queue(parts._replace(path=f"/{missing}").geturl())
    with serving(q.asgi_app(dashboard={"auth": lambda request: True})) as base:
        for path in ("/tickq/", "/tickq/jobs", "/tickq/schedules", "/tickq/jobs/1"):
            r = httpx.get(base + path, timeout=30)
            assert r.status_code == 503, (path, r.text[:300])
            assert "tickq is misconfigured" in r.text
            for word in (missing, str(parts.port or 5432), parts.hostname or "127.0.0.1"):
                assert word not in r.text, (word, path)


def test_a_libpq_key_value_string_is_refused_without_its_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Queue("host=db.example.com password=S3cret-pw dbname=orders")
    assert "S3cret" not in str(caught.value)
    assert "password=***" in str(caught.value) and "write it as a URL" in str(caught.value)


URL = "postgresql://app:S3cret-pw@db.example.com/orders"


@pytest.mark.parametrize(
    "argv",
    [
        ("migrate", URL),  # a URL where APP goes
        ("tick", URL),
        ("worker", URL),
        ("stats", URL),
        ("tick", "apps.counter:q", f"--url={URL}"),  # an option the command doesn't take
        ("tick", "apps.counter:q", "--url", URL),
        ("worker", "apps.counter:q", "--url", URL),
        (URL,),  # where the command goes
        ("migrate", "--url", "host=db.example.com password=S3cret-pw dbname=orders"),
    ],
)
def test_the_cli_never_prints_a_password_whatever_argument_the_url_is_in(
    argv: tuple[str, ...],
) -> None:
    result = run_tickq(*argv)
    assert result.returncode != 0
    assert "S3cret" not in result.stderr + result.stdout, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("tickq: error: "), result.stderr
