"""Webhooks (``@q.webhook``) through a real uvicorn socket: each provider's published test
vector, valid / invalid / stale / future / replayed signatures, one event delivered many
times (at once, from threads) running once on SQLite and Postgres, the body limit, bad
JSON, a database that is down, and the Flask blueprint behind a real WSGI server."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from test_database_down import Proxy, closed_port
from test_web import serving
from tickq import ConfigurationError, FrozenClock, JobContext, Queue
from tickq.webhooks import HMAC, GitHub, StandardWebhooks, Stripe, Verifier, WebhookRejected

# The Standard Webhooks reference vector (svix / standard-webhooks libraries' tests).
SW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SW_ID, SW_TS, SW_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
SW_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
# GitHub's "Validating webhook deliveries" example.
GH_SECRET, GH_BODY = "It's a Secret to Everybody", b"Hello, World!"
GH_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
# Stripe documents the scheme (``t.payload``, HMAC-SHA256, hex) but publishes no secret;
# this is stripe-python's test secret and payload, the signature computed with
# `printf '1492774577.<payload>' | openssl dgst -sha256 -hmac whsec_test_secret`.
ST_SECRET, ST_TS = "whsec_test_secret", 1492774577
ST_BODY = b'{\n  "id": "evt_test_webhook",\n  "object": "event"\n}'
ST_SIGNATURE = "c2f890decbc5ede7c5060bb9a6d31e0626a4342bacb9aeae2adb1bcea72f9812"
# A generic HMAC-SHA1, base64 (`openssl dgst -sha1 -binary -hmac generic-secret | base64`).
HM_SECRET, HM_BODY, HM_SIGNATURE = (
    "generic-secret",
    b'{"id": 7, "kind": "ping"}',
    ("KgtCbUVxPUHSOZTLijn8oYMEsM8="),
)
NOW = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


# -- the published vectors, verifier by verifier (pure) ----------------------------------
def test_standard_webhooks_reference_vector() -> None:
    headers = {"webhook-id": SW_ID, "webhook-timestamp": str(SW_TS),
               "webhook-signature": f"v1,bm9wZQ== {SW_SIGNATURE}"}  # fmt: skip
    verifier = StandardWebhooks(SW_SECRET)
    verifier.check(headers, SW_BODY, SW_TS + 10)
    StandardWebhooks(SW_SECRET.removeprefix("whsec_")).check(headers, SW_BODY, SW_TS)
    assert verifier.event_id(headers, {}, SW_BODY) == SW_ID
    with pytest.raises(WebhookRejected, match="no v1 signature"):
        verifier.check(headers, SW_BODY + b" ", SW_TS)
    with pytest.raises(WebhookRejected, match="no v1 signature"):  # only v1 counts
        verifier.check({**headers, "webhook-signature": "v2" + SW_SIGNATURE[2:]}, SW_BODY, SW_TS)


def test_github_documented_example() -> None:
    verifier = GitHub(GH_SECRET)
    verifier.check({"x-hub-signature-256": GH_SIGNATURE}, GH_BODY, 0)
    verifier.check({"x-hub-signature-256": GH_SIGNATURE.upper().replace("SHA", "sha")}, GH_BODY, 0)
    with pytest.raises(WebhookRejected, match="does not match"):
        verifier.check({"x-hub-signature-256": GH_SIGNATURE}, GH_BODY + b"!", 0)
    with pytest.raises(WebhookRejected, match="sha256="):
        verifier.check({"x-hub-signature-256": "sha1=" + GH_SIGNATURE[7:]}, GH_BODY, 0)


def test_stripe_scheme_with_several_v1_and_a_v0() -> None:
    verifier = Stripe(ST_SECRET)
    header = f"t={ST_TS},v1={'0' * 64},v1={ST_SIGNATURE},v0=6ffbb59b2300aae63f27"
    verifier.check({"stripe-signature": header}, ST_BODY, ST_TS)
    assert verifier.event_id({}, json.loads(ST_BODY), ST_BODY) == "evt_test_webhook"
    with pytest.raises(WebhookRejected, match="needs t= and at least one v1="):
        verifier.check({"stripe-signature": f"t={ST_TS},v0={ST_SIGNATURE}"}, ST_BODY, ST_TS)
    with pytest.raises(WebhookRejected, match="no v1 signature"):  # signed for another t
        verifier.check({"stripe-signature": f"t={ST_TS + 1},v1={ST_SIGNATURE}"}, ST_BODY, ST_TS)


def test_generic_hmac_base64_sha1_with_a_body_id_field() -> None:
    verifier = HMAC(HM_SECRET, header="X-Signature", algorithm="sha1", encoding="base64",
                    id_field="id")  # fmt: skip
    verifier.check({"x-signature": HM_SIGNATURE}, HM_BODY, 0)
    assert verifier.event_id({}, json.loads(HM_BODY), HM_BODY) == "7"
    hashed = HMAC(HM_SECRET, header="X-Signature").event_id({}, {}, HM_BODY)
    assert hashed == "sha256:" + hashlib.sha256(HM_BODY).hexdigest()
    with pytest.raises(WebhookRejected, match="does not match"):
        verifier.check({"x-signature": "not base64!"}, HM_BODY, 0)


def test_a_rotated_secret_list_accepts_either_and_no_secret_is_ever_shown() -> None:
    verifier = GitHub(["a-new-secret-not-yet-used", GH_SECRET])
    verifier.check({"x-hub-signature-256": GH_SIGNATURE}, GH_BODY, 0)
    assert repr(verifier) == "GitHub(<2 secrets hidden>)"
    with pytest.raises(ConfigurationError, match="not 'whsec_' followed by base64") as info:
        StandardWebhooks("whsec_***not-base64***")
    assert "not-base64" not in str(info.value)
    with pytest.raises(ConfigurationError, match="secret #2 is empty"):
        Stripe(["whsec_x", ""])


# -- sending signed requests -------------------------------------------------------------
def standard(body: bytes, msg_id: str, ts: int, secret: str = SW_SECRET) -> dict[str, str]:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts),
            "webhook-signature": "v1," + base64.b64encode(mac).decode()}  # fmt: skip


def stripe(body: bytes, ts: int, secret: str = ST_SECRET) -> dict[str, str]:
    mac = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    return {"Stripe-Signature": f"t={ts},v1={mac}"}


def github(body: bytes, delivery: str, secret: str = GH_SECRET) -> dict[str, str]:
    mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={mac}", "X-GitHub-Delivery": delivery,
            "X-GitHub-Event": "push"}  # fmt: skip


def generic(body: bytes, secret: str = HM_SECRET) -> dict[str, str]:
    mac = hmac.new(secret.encode(), body, hashlib.sha1).digest()
    return {"X-Signature": base64.b64encode(mac).decode()}


Signer = Callable[[bytes, str, int], dict[str, str]]


class Provider:
    """One verifier's endpoint and how to sign for it (``sign(body, event_id, ts)``)."""

    def __init__(self, path: str, verifier: Verifier, sign: Signer) -> None:
        self.path, self.verifier, self.sign = path, verifier, sign

    def body(self, event_id: str) -> bytes:
        return json.dumps({"id": event_id, "type": "thing.happened"}).encode()


PROVIDERS = {
    "standard": Provider("/hooks/standard", StandardWebhooks(SW_SECRET), standard),
    "stripe": Provider("/hooks/stripe", Stripe(ST_SECRET), lambda b, i, t: stripe(b, t)),
    "github": Provider("/hooks/github", GitHub(GH_SECRET), lambda b, i, t: github(b, i)),
    "hmac": Provider("/hooks/hmac", HMAC(HM_SECRET, header="X-Signature", algorithm="sha1",
                     encoding="base64", id_field="id"), lambda b, i, t: generic(b)),
}  # fmt: skip


class Hooks:
    """A Queue with one webhook per provider; ``runs`` records each run's event."""

    def __init__(self, url: str, clock: FrozenClock, **options: Any) -> None:
        self.q = Queue(url, clock=clock)
        self.clock = clock
        self.runs: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self.lock = threading.Lock()
        for name, provider in PROVIDERS.items():
            self.q.webhook(provider.path, verify=provider.verifier, name=f"on_{name}",
                           **options)(self.recorder(name))  # fmt: skip

    def recorder(self, name: str) -> Callable[..., None]:
        def handle(event: dict[str, Any], ctx: JobContext) -> None:
            with self.lock:
                self.runs.append((name, event, ctx.meta["webhook"]))

        handle.__name__ = f"on_{name}"
        return handle

    @property
    def now(self) -> int:
        return int(self.clock.now().timestamp())


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(NOW)


@pytest.fixture
def hooks(db_url: str, clock: FrozenClock) -> Iterator[Hooks]:
    h = Hooks(db_url, clock)
    h.q.migrate()
    yield h
    h.q.close()


@pytest.fixture
def sqlite_hooks(tmp_path: Path, clock: FrozenClock) -> Iterator[Hooks]:
    h = Hooks(f"sqlite:///{tmp_path / 'hooks.db'}", clock)
    h.q.migrate()
    yield h
    h.q.close()


def counts(q: Queue) -> dict[str, int]:
    return {status: n for status, n in q.stats()["by_status"].items() if n}


def post(base: str, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(base + path, content=body, headers=headers, timeout=30)


# -- through a real server socket ---------------------------------------------------------
@pytest.mark.parametrize("kind", PROVIDERS)
def test_valid_invalid_and_replayed_requests(kind: str, sqlite_hooks: Hooks) -> None:
    h, provider = sqlite_hooks, PROVIDERS[kind]
    body = provider.body("evt_1")
    with serving(h.q.asgi_app()) as base:
        good = post(base, provider.path, body, provider.sign(body, "evt_1", h.now))
        assert good.status_code == 200, good.text
        assert good.json()["received"] is True
        forged = provider.sign(body, "evt_1", h.now)
        key = next(k for k in forged if k.lower() in provider.verifier.signature_headers)
        forged[key] = forged[key][:-6] + ("AAAA==" if kind in ("standard", "hmac") else "000000")
        bad = post(base, provider.path, body, forged)
        assert bad.status_code == 401, bad.text
        missing = post(base, provider.path, body, {})
        assert missing.status_code == 401 and "missing" in missing.json()["error"]
        tampered = post(base, provider.path, body.replace(b"happened", b"changed!"),
                        provider.sign(body, "evt_1", h.now))  # fmt: skip
        assert tampered.status_code == 401
        h.clock.advance(minutes=2)  # a redelivery, signed again
        again = post(base, provider.path, body, provider.sign(body, "evt_1", h.now))
        assert again.status_code == 200 and again.json() == good.json()
        assert h.q.process_jobs()["succeeded"] == 1
        assert h.q.process_jobs()["claimed"] == 0
    assert [(name, event) for name, event, _ in h.runs] == [(kind, json.loads(body))]


@pytest.mark.parametrize("kind", ["standard", "stripe"])
def test_stale_and_future_timestamps_are_refused(kind: str, sqlite_hooks: Hooks) -> None:
    h, provider = sqlite_hooks, PROVIDERS[kind]
    body = provider.body("evt_old")
    with serving(h.q.asgi_app()) as base:
        old = post(base, provider.path, body, provider.sign(body, "evt_old", h.now - 301))
        assert old.status_code == 401 and "301 s old" in old.json()["error"], old.text
        future = post(base, provider.path, body, provider.sign(body, "evt_old", h.now + 301))
        assert future.status_code == 401 and "in the future" in future.json()["error"]
        edge = post(base, provider.path, body, provider.sign(body, "evt_old", h.now - 300))
        assert edge.status_code == 200, edge.text
    assert counts(h.q) == {"pending": 1}


def test_the_tolerance_is_configurable(sqlite_hooks: Hooks) -> None:
    h = sqlite_hooks
    h.q.webhook("/hooks/lax", verify=Stripe(ST_SECRET, tolerance=timedelta(hours=1)))(
        lambda event: None
    )
    body = PROVIDERS["stripe"].body("evt_lax")
    with serving(h.q.asgi_app()) as base:
        assert post(base, "/hooks/lax", body, stripe(body, h.now - 3000)).status_code == 200
        assert post(base, "/hooks/lax", body, stripe(body, h.now - 3700)).status_code == 401


def test_the_standard_webhooks_vector_through_http(tmp_path: Path) -> None:
    q = Queue(
        f"sqlite:///{tmp_path / 'v.db'}", clock=FrozenClock(datetime.fromtimestamp(SW_TS, UTC))
    )
    q.migrate()
    seen: list[dict[str, Any]] = []
    q.webhook("/sw", verify=StandardWebhooks(SW_SECRET))(lambda event: seen.append(event))
    headers = {
        "webhook-id": SW_ID,
        "webhook-timestamp": str(SW_TS),
        "webhook-signature": SW_SIGNATURE,
    }
    with serving(q.asgi_app()) as base:
        assert post(base, "/sw", SW_BODY, headers).status_code == 200
    q.process_jobs()
    assert seen == [{"test": 2432232314}]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["standard", "github"])
def test_one_event_delivered_five_times_at_once_runs_once(kind: str, hooks: Hooks) -> None:
    h, provider = hooks, PROVIDERS[kind]
    body = provider.body("evt_dup")
    barrier = threading.Barrier(5)

    def deliver(i: int) -> httpx.Response:
        headers = provider.sign(body, "evt_dup", h.now - i)  # each delivery signed anew
        barrier.wait(timeout=10)
        return post(base, provider.path, body, headers)

    with serving(h.q.asgi_app()) as base:
        with ThreadPoolExecutor(5) as pool:
            answers = list(pool.map(deliver, range(5)))
        assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
        assert len({a.json()["job_id"] for a in answers}) == 1
        assert h.q.process_jobs()["succeeded"] == 1
        for _ in range(5):  # and again, one by one, after it ran
            assert post(base, provider.path, body, provider.sign(body, "evt_dup", h.now)).json() \
                == answers[0].json()  # fmt: skip
        assert h.q.process_jobs()["claimed"] == 0
        h.clock.advance(days=90)  # months later, signed afresh: still acknowledged, not run
        late = post(base, provider.path, body, provider.sign(body, "evt_dup", h.now))
        assert late.status_code == 200 and late.json() == answers[0].json()
        assert h.q.process_jobs()["claimed"] == 0
    expected_id = "sha256:" + hashlib.sha256(body).hexdigest() if kind == "github" else "evt_dup"
    assert len(h.runs) == 1 and h.runs[0][2]["event_id"] == expected_id
    assert counts(h.q) == {"done": 1}


def test_a_failed_event_job_is_not_run_again_by_a_redelivery(sqlite_hooks: Hooks) -> None:
    h = sqlite_hooks
    attempts: list[int] = []

    @h.q.webhook("/hooks/flaky", verify=GitHub(GH_SECRET), max_attempts=1)
    def flaky(event: dict[str, Any]) -> None:
        attempts.append(1)
        raise RuntimeError("downstream is down")

    body = b'{"n": 1}'
    with serving(h.q.asgi_app()) as base:
        assert post(base, "/hooks/flaky", body, github(body, "d-1")).status_code == 200
        assert h.q.process_jobs()["failed"] == 1
        assert post(base, "/hooks/flaky", body, github(body, "d-1")).status_code == 200
        assert h.q.process_jobs()["claimed"] == 0
    assert attempts == [1]  # retries are tickq's (q.retry / the dashboard), not the sender's


def test_the_job_sees_the_headers_but_no_signature_or_credentials(sqlite_hooks: Hooks) -> None:
    h, body = sqlite_hooks, b'{"action": "opened"}'
    headers = {**github(body, "d-9"), "Authorization": "Bearer hidden", "Cookie": "a=b"}
    with serving(h.q.asgi_app()) as base:
        assert post(base, "/hooks/github", body, headers).status_code == 200
    h.q.process_jobs()
    ((_, event, meta),) = h.runs
    assert event == {"action": "opened"}
    assert meta["event_id"] == "sha256:" + hashlib.sha256(body).hexdigest()
    assert meta["path"] == "/hooks/github"
    assert meta["unsigned_headers"]["x-github-event"] == "push"
    assert meta["unsigned_headers"]["x-github-delivery"] == "d-9"
    assert meta["headers"] == {}  # GitHub's signature covers no header
    kept = {*meta["headers"], *meta["unsigned_headers"]}
    assert not {"authorization", "cookie", "x-hub-signature-256"} & kept


BAD_BODIES = [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"a": 1e999}', "can't be stored"),
    (b"\xff\xfe", "not valid JSON"),
]


def test_bad_bodies_and_methods(sqlite_hooks: Hooks, caplog: pytest.LogCaptureFixture) -> None:
    h = sqlite_hooks
    h.q.webhook("/hooks/small", verify=GitHub(GH_SECRET), max_body=100)(lambda event: None)
    big = b'{"pad": "' + b"x" * 200 + b'"}'
    caplog.set_level(logging.DEBUG, logger="tickq")
    with serving(h.q.asgi_app()) as base:
        r = post(base, "/hooks/small", big, github(big, "d"))
        assert r.status_code == 413 and "limit of 100 bytes" in r.json()["error"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit stops the stream
            yield from (big[i : i + 20] for i in range(0, len(big), 20))

        r = httpx.post(base + "/hooks/small", content=chunks(), headers=github(big, "d"))
        assert r.status_code == 413, r.text
        for body, says in BAD_BODIES:
            r = post(base, "/hooks/github", body, github(body, "d-bad"))
            assert r.status_code == 400 and says in r.json()["error"], r.text
        r = httpx.get(base + "/hooks/github")
        assert r.status_code == 405 and r.headers["allow"] == "POST"
        forged = github(b"{}", "d-x", secret="wrong-secret")
        assert post(base, "/hooks/github", b"{}", forged).status_code == 401
    assert counts(h.q) == {}
    assert GH_SECRET not in caplog.text and "wrong-secret" not in caplog.text
    assert "refused (401)" in caplog.text


def test_registration_errors_are_clear(sqlite_hooks: Hooks) -> None:
    q = sqlite_hooks.q
    cases: list[tuple[Any, dict[str, Any], str]] = [
        ("hooks/x", {"verify": GitHub("s")}, "must start with '/'"),
        ("/hooks/github", {"verify": GitHub("s")}, "already registered at '/hooks/github'"),
        ("/api/cron/tick", {"verify": GitHub("s")}, "the tick answers"),
        ("/tickq/hook", {"verify": GitHub("s")}, "under the dashboard"),
        ("/hooks/y", {"verify": "secret"}, "verify= must be a verifier"),
        ("/hooks/y?a=1", {"verify": GitHub("s")}, "plain URL path"),
        ("/hooks/y", {"verify": GitHub("s"), "max_body": 0}, "max_body must be a positive"),
        ("/hooks/y", {"verify": GitHub("s"), "rate_limit": "fast"}, "rate_limit"),
        ("/hooks/y", {"verify": GitHub("s"), "concurrency": 0}, "concurrency"),
    ]
    for path, options, says in cases:
        with pytest.raises(ConfigurationError, match=says.replace("?", r"\?")):
            q.webhook(path, **options)(lambda event: None)
    with pytest.raises(ConfigurationError, match="exactly one parameter, the event"):
        q.webhook("/hooks/two", verify=GitHub("s"))(lambda event, other: None)
    assert "/hooks/two" not in q._runtime.webhooks and "<lambda>" not in q.job_names()
    with pytest.raises(ConfigurationError, match="under the dashboard's prefix '/admin'"):
        q.webhook("/admin/hook", verify=GitHub("s"), name="admin_hook")(lambda event: None)
        q.asgi_app(dashboard={"prefix": "/admin"})
    with pytest.raises(ConfigurationError, match="is where the tick endpoint answers"):
        q.webhook("/custom-tick", verify=GitHub("s"))(lambda event: None)
        q.asgi_app(path="/custom-tick")


def test_a_webhook_job_takes_every_job_option(sqlite_hooks: Hooks) -> None:
    q = sqlite_hooks.q
    job = q.webhook("/hooks/limited", verify=GitHub("s"), name="limited_hook", concurrency=2,
                    rate_limit="10/s", max_snooze=timedelta(hours=1), max_attempts=2)(
        lambda event: None)  # fmt: skip
    definition = q._definition(job.name)
    assert definition is not None and definition.max_attempts == 2
    assert definition.max_snooze == timedelta(hours=1)
    assert definition.limit is not None
    assert (definition.limit.concurrency, definition.limit.rate, definition.limit.per) == (
        2,
        10,
        1.0,
    )


def test_a_webhook_declared_after_the_app_was_built_is_served(sqlite_hooks: Hooks) -> None:
    h = sqlite_hooks
    app = h.q.asgi_app()
    h.q.webhook("/hooks/late", verify=GitHub(GH_SECRET))(lambda event: None)
    with serving(app) as base:
        assert post(base, "/hooks/late", b"{}", github(b"{}", "late")).status_code == 200


# -- a database that is down ------------------------------------------------------------
def test_a_database_on_a_closed_port_answers_503_and_stores_nothing(clock: FrozenClock) -> None:
    port = closed_port()
    h = Hooks(f"postgresql://bob:pw-hunter2@127.0.0.1:{port}/shop?sslmode=disable", clock)
    body = PROVIDERS["github"].body("evt")
    with serving(h.q.asgi_app()) as base:
        r = post(base, "/hooks/github", body, github(body, "evt"))
    assert r.status_code == 503 and r.headers["retry-after"] == "30", r.text
    assert "deliver it again later" in r.json()["error"]
    for word in ("hunter2", "bob", str(port), GH_SECRET):
        assert word not in r.text


@pytest.mark.timeout(120)
def test_a_dropped_database_answers_503_then_the_redelivery_is_stored_once(
    pg_schema_url: str, clock: FrozenClock
) -> None:
    Queue(pg_schema_url).migrate()
    parts = urlsplit(pg_schema_url)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        via = parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}").geturl()
        h = Hooks(via, clock)
        body = PROVIDERS["stripe"].body("evt_outage")
        with serving(h.q.asgi_app()) as base:
            first = PROVIDERS["stripe"].body("evt_before")
            assert post(base, "/hooks/stripe", first, stripe(first, h.now)).status_code == 200
            proxy.cut()
            down = post(base, "/hooks/stripe", body, stripe(body, h.now))
            assert down.status_code == 503 and down.headers["retry-after"] == "30"
            proxy.listen()
            for _ in range(2):
                assert post(base, "/hooks/stripe", body, stripe(body, h.now)).status_code == 200
        assert h.q.process_jobs()["succeeded"] == 2
        assert sorted(event["id"] for _, event, _ in h.runs) == ["evt_before", "evt_outage"]
        h.q.close()
    finally:
        proxy.cut()


# -- Flask, behind a real WSGI server ----------------------------------------------------
def test_the_flask_blueprint_routes_webhooks(sqlite_hooks: Hooks) -> None:
    from flask import Flask
    from werkzeug.serving import make_server

    h = sqlite_hooks
    app = Flask(__name__)
    app.register_blueprint(h.q.flask_blueprint(), url_prefix="/in")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}/in"
    try:
        body = PROVIDERS["stripe"].body("evt_flask")
        assert post(base, "/hooks/stripe", body, stripe(body, h.now)).json()["received"]
        assert post(base, "/hooks/stripe", body, stripe(body, h.now)).status_code == 200
        assert post(base, "/hooks/stripe", body, {}).status_code == 401
        assert httpx.get(base + "/hooks/stripe").status_code == 405
        big = b"{" + b" " * (2 * 1024 * 1024) + b"}"
        assert post(base, "/hooks/stripe", big, stripe(big, h.now)).status_code == 413
    finally:
        server.shutdown()
        thread.join(10)
    assert h.q.process_jobs()["succeeded"] == 1
    assert [event["id"] for _, event, _ in h.runs] == ["evt_flask"]


def test_the_wsgi_app_routes_webhooks(sqlite_hooks: Hooks) -> None:
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    h = sqlite_hooks
    server = make_server("127.0.0.1", 0, h.q.wsgi_app(), handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base, body = f"http://127.0.0.1:{server.server_port}", b'{"zen": "hi"}'
        assert post(base, "/hooks/github", body, github(body, "w-1")).status_code == 200
        assert post(base, "/hooks/github", body, github(body + b" ", "w-1")).status_code == 401
    finally:
        server.shutdown()
        thread.join(10)
    assert counts(h.q) == {"pending": 1}


def test_the_fastapi_router_routes_webhooks_beside_the_apps_own(sqlite_hooks: Hooks) -> None:
    from fastapi import FastAPI

    h, app = sqlite_hooks, FastAPI()

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    app.include_router(h.q.fastapi_router(), prefix="/in")
    body = PROVIDERS["standard"].body("msg_api")
    with serving(app) as base:
        headers = standard(body, "msg_api", h.now)
        assert post(base, "/in/hooks/standard", body, headers).status_code == 200
        assert post(base, "/in/hooks/standard", body + b" ", headers).status_code == 401
        assert httpx.get(base + "/hello").json() == {"hello": "world"}
    assert counts(h.q) == {"pending": 1}
