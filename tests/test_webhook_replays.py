"""Webhook replays through a real uvicorn socket, on SQLite and Postgres: where the provider
signs no event id (GitHub, ``HMAC(id_header=...)``) a captured delivery sent again under a
new delivery id runs nothing; headers the signature does not cover reach the job only as
``unsigned_headers``; a redelivery of a known event id with another signed body is
acknowledged, not run, and logged at WARNING with both bodies' digests."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from test_web import serving
from test_webhooks import (
    GH_SECRET,
    NOW,
    ST_SECRET,
    SW_SECRET,
    counts,
    github,
    post,
    standard,
    stripe,
)
from tickq import FrozenClock, JobContext, Queue
from tickq.webhooks import HMAC, GitHub, StandardWebhooks, Stripe

SHOP_SECRET = "shop-secret-example"


def shopify(body: bytes, webhook_id: str, topic: str = "orders/create") -> dict[str, str]:
    mac = hmac.new(SHOP_SECRET.encode(), body, hashlib.sha256).digest()
    return {"X-Shopify-Hmac-Sha256": base64.b64encode(mac).decode(),
            "X-Shopify-Webhook-Id": webhook_id, "X-Shopify-Topic": topic}  # fmt: skip


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class Receiving:
    """A Queue with a GitHub, a Shopify-style HMAC, a Standard Webhooks and a Stripe
    webhook; ``runs`` holds (path, event, ctx.meta["webhook"]) of each run."""

    def __init__(self, url: str) -> None:
        self.clock = FrozenClock(NOW)
        self.q = Queue(url, clock=self.clock)
        self.q.migrate()
        self.runs: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        verifiers = {
            "/hooks/github": GitHub(GH_SECRET),
            "/hooks/shop": HMAC(SHOP_SECRET, header="X-Shopify-Hmac-Sha256",
                                encoding="base64", id_header="X-Shopify-Webhook-Id"),
            "/hooks/standard": StandardWebhooks(SW_SECRET),
            "/hooks/stripe": Stripe(ST_SECRET),
        }  # fmt: skip
        for path, verifier in verifiers.items():
            self.q.webhook(path, verify=verifier, name="on" + path.replace("/", "_"))(
                self.recorder(path)
            )

    def recorder(self, path: str) -> Any:
        def handle(event: dict[str, Any], ctx: JobContext) -> None:
            self.runs.append((path, event, ctx.meta["webhook"]))

        handle.__name__ = "on" + path.replace("/", "_")
        return handle

    @property
    def now(self) -> int:
        return int(self.clock.now().timestamp())


@pytest.fixture
def receiving(db_url: str) -> Iterator[Receiving]:
    r = Receiving(db_url)
    yield r
    r.q.close()


def test_a_replayed_github_delivery_with_a_new_delivery_id_runs_nothing(
    receiving: Receiving,
) -> None:
    r, body = receiving, b'{"ref": "refs/heads/main", "after": "1a2b3c"}'
    with serving(r.q.asgi_app()) as base:
        first = post(base, "/hooks/github", body, github(body, "delivery-1"))
        assert first.status_code == 200, first.text
        assert r.q.process_jobs()["succeeded"] == 1
        for n in range(2, 5):  # the captured request, each time under a new delivery id
            replay = {**github(body, f"delivery-{n}"), "X-GitHub-Event": "delete"}
            again = post(base, "/hooks/github", body, replay)
            assert again.status_code == 200 and again.json() == first.json(), again.text
        assert r.q.process_jobs()["claimed"] == 0
        r.clock.advance(days=60)  # still nothing, months later: no timestamp to expire
        late = post(base, "/hooks/github", body, github(body, "delivery-late"))
        assert late.json() == first.json()
        assert r.q.process_jobs()["claimed"] == 0
    assert len(r.runs) == 1
    assert r.runs[0][2]["unsigned_headers"]["x-github-delivery"] == "delivery-1"
    assert r.runs[0][2]["unsigned_headers"]["x-github-event"] == "push"
    assert counts(r.q) == {"done": 1}


def test_a_replayed_hmac_delivery_with_a_new_id_header_runs_nothing(
    receiving: Receiving,
) -> None:
    r, body = receiving, b'{"id": 820982911946154508, "total_price": "10.00"}'
    with serving(r.q.asgi_app()) as base:
        first = post(base, "/hooks/shop", body, shopify(body, "wh-1"))
        assert first.status_code == 200, first.text
        replay = post(base, "/hooks/shop", body, shopify(body, "wh-2", topic="orders/paid"))
        assert replay.status_code == 200 and replay.json() == first.json(), replay.text
        assert r.q.process_jobs()["succeeded"] == 1
        assert post(base, "/hooks/shop", body, shopify(body, "wh-3")).json() == first.json()
        assert r.q.process_jobs()["claimed"] == 0
        other = b'{"id": 820982911946154509, "total_price": "12.00"}'  # another event runs
        assert post(base, "/hooks/shop", other, shopify(other, "wh-4")).status_code == 200
        assert r.q.process_jobs()["succeeded"] == 1
        missing = shopify(body, "x")
        del missing["X-Shopify-Webhook-Id"]
        assert post(base, "/hooks/shop", body, missing).status_code == 400
    assert [meta["event_id"] for _, _, meta in r.runs] == [
        "sha256:" + sha256(body),
        "sha256:" + sha256(other),
    ]
    assert r.runs[0][2]["unsigned_headers"]["x-shopify-webhook-id"] == "wh-1"
    assert r.runs[0][2]["unsigned_headers"]["x-shopify-topic"] == "orders/create"


def test_headers_the_signature_does_not_cover_are_marked_unsigned(receiving: Receiving) -> None:
    r = receiving
    extra = {"X-Custom": "chosen-by-the-sender", "Authorization": "Bearer no", "Cookie": "a=b"}
    gh_body, sw_body = b'{"action": "opened"}', b'{"type": "user.created"}'
    st_body = json.dumps({"id": "evt_u", "type": "invoice.paid"}).encode()
    with serving(r.q.asgi_app()) as base:
        for path, body, headers in [
            ("/hooks/github", gh_body, github(gh_body, "d-1")),
            ("/hooks/standard", sw_body, standard(sw_body, "msg_u", r.now)),
            ("/hooks/stripe", st_body, stripe(st_body, r.now)),
        ]:
            answer = post(base, path, body, {**headers, **extra})
            assert answer.status_code == 200, answer.text
        assert r.q.process_jobs()["succeeded"] == 3
    meta = {path: m for path, _, m in r.runs}
    assert meta["/hooks/standard"]["headers"] == {
        "webhook-id": "msg_u",
        "webhook-timestamp": str(r.now),
    }
    assert meta["/hooks/github"]["headers"] == {} == meta["/hooks/stripe"]["headers"]
    assert meta["/hooks/github"]["unsigned_headers"]["x-github-event"] == "push"
    for m in meta.values():
        assert m["unsigned_headers"]["x-custom"] == "chosen-by-the-sender"
        assert not set(m["headers"]) & set(m["unsigned_headers"])
        kept = {*m["headers"], *m["unsigned_headers"]}
        assert not {"authorization", "cookie", "webhook-signature", "stripe-signature",
                    "x-hub-signature-256"} & kept  # fmt: skip
    assert meta["/hooks/standard"]["event_id"] == "msg_u"
    assert meta["/hooks/stripe"]["event_id"] == "evt_u"
    assert meta["/hooks/standard"]["body_sha256"] == sha256(sw_body)


@pytest.mark.parametrize("path", ["/hooks/standard", "/hooks/stripe"])
def test_a_known_event_id_with_another_body_is_not_run_and_logs_both_digests(
    path: str, receiving: Receiving, caplog: pytest.LogCaptureFixture
) -> None:
    r = receiving
    first_body = json.dumps({"id": "evt_7", "type": "invoice.paid", "amount": 100}).encode()
    other_body = json.dumps({"id": "evt_7", "type": "invoice.paid", "amount": 9999}).encode()

    def sign(body: bytes) -> dict[str, str]:
        return standard(body, "evt_7", r.now) if path.endswith("standard") else stripe(body, r.now)

    caplog.set_level(logging.INFO, logger="tickq")
    with serving(r.q.asgi_app()) as base:
        first = post(base, path, first_body, sign(first_body))
        assert first.status_code == 200, first.text
        same = post(base, path, first_body, sign(first_body))  # an ordinary redelivery
        assert same.json() == first.json()
        assert not [rec for rec in caplog.records if "different body" in rec.getMessage()]
        r.clock.advance(minutes=1)
        changed = post(base, path, other_body, sign(other_body))
        assert changed.status_code == 200 and changed.json() == first.json(), changed.text
        assert r.q.process_jobs()["succeeded"] == 1
    warned = [rec for rec in caplog.records if "different body" in rec.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING, caplog.text
    message = warned[0].getMessage()
    assert sha256(first_body) in message and sha256(other_body) in message, message
    assert "'evt_7'" in message and path in message
    assert [event for _, event, _ in r.runs] == [json.loads(first_body)]


@pytest.mark.parametrize("path", ["/hooks/github", "/hooks/shop"])
def test_a_known_body_under_another_unsigned_delivery_id_is_logged_at_info(
    path: str, receiving: Receiving, caplog: pytest.LogCaptureFixture
) -> None:
    r, body = receiving, b'{"id": 11, "action": "opened"}'

    def sign(delivery: str) -> dict[str, str]:
        return github(body, delivery) if path.endswith("github") else shopify(body, delivery)

    def noted() -> list[logging.LogRecord]:
        return [rec for rec in caplog.records if "arrived again under" in rec.getMessage()]

    caplog.set_level(logging.INFO, logger="tickq")
    with serving(r.q.asgi_app()) as base:
        first = post(base, path, body, sign("delivery-1"))
        assert post(base, path, body, sign("delivery-1")).json() == first.json()
        assert noted() == []  # the same delivery again: nothing to say
        assert post(base, path, body, sign("delivery-2")).json() == first.json()
    [info] = noted()
    assert info.levelno == logging.INFO, caplog.text
    assert "'delivery-2'" in info.getMessage() and "'delivery-1'" in info.getMessage()
    assert path in info.getMessage()
    assert not [rec for rec in caplog.records if "webhook" in rec.getMessage()
                and rec.levelno >= logging.WARNING], caplog.text  # fmt: skip


def test_a_first_delivery_is_not_read_back(receiving: Receiving) -> None:
    """Only a delivery whose event is already stored reads the stored job back to compare
    it: a first one costs its insert alone."""
    r, reads = receiving, []
    real_get = r.q._store.get

    def get(job_id: int) -> Any:  # the real read, counted
        reads.append(job_id)
        return real_get(job_id)

    r.q._store.get = get  # type: ignore[method-assign]
    bodies = [json.dumps({"id": f"evt_{n}", "type": "invoice.paid"}).encode() for n in range(3)]
    with serving(r.q.asgi_app()) as base:
        answers = [post(base, "/hooks/stripe", b, stripe(b, r.now)) for b in bodies]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert reads == []
        again = post(base, "/hooks/stripe", bodies[0], stripe(bodies[0], r.now))
        assert again.json() == answers[0].json()
        assert reads == [answers[0].json()["job_id"]]
