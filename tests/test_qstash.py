"""Upstash QStash calls the tick with a signed ``Upstash-Signature`` (a JWT, HS256, keyed
with the current or next signing key; claims iss, sub, exp, nbf, iat, jti and the body's
base64url SHA-256, as QStash documents) instead of a bearer token: verified over a real
server, with replays, expiry, another body, another URL and another key refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterator

import httpx
import pytest

from dashboard_serving import serving
from tickq import Queue

CURRENT = "sig_current_" + "a" * 20
NEXT = "sig_next_" + "b" * 20
SECRET = "s3cret-token-0123456789"
TICK = "/api/cron/tick"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def qstash_token(key: str, url: str, body: bytes = b"", *, age: float = 0, lifetime: float = 300,
                 jti: str | None = None, alg: str = "HS256", **claims: object) -> str:  # fmt: skip
    """A token as QStash makes one (its docs' header and claims; the body hash is padded
    base64url, as in their example)."""
    now = int(time.time() - age)
    payload = {"iss": "Upstash", "sub": url, "exp": now + int(lifetime), "nbf": now, "iat": now,
               "jti": jti or f"jwt_{secrets.token_hex(12)}",
               "body": base64.urlsafe_b64encode(hashlib.sha256(body).digest()).decode(),
               **claims}  # fmt: skip
    head = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    signing_input = f"{head}.{b64url(json.dumps(payload).encode())}"
    signature = hmac.new(key.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRON_SECRET", raising=False)
    monkeypatch.delenv("TICKQ_QSTASH_URL", raising=False)
    monkeypatch.setenv("QSTASH_CURRENT_SIGNING_KEY", CURRENT)
    monkeypatch.setenv("QSTASH_NEXT_SIGNING_KEY", NEXT)


@pytest.fixture
def base(queue: Queue, keys: None) -> Iterator[str]:
    @queue.job(name="chore")
    def chore() -> None:
        pass

    with serving(queue.asgi_app()) as url:
        yield url


def call(
    base: str, token: str | bytes | None, body: bytes = b"", path: str = TICK
) -> httpx.Response:
    headers = {"Upstash-Signature": token} if token is not None else {}
    return httpx.post(base + path, content=body, headers=headers, timeout=30)


def refused(response: httpx.Response, phrase: str) -> None:
    assert response.status_code == 401, response.text
    assert phrase in response.json()["error"], response.json()


def test_a_call_signed_with_either_key_runs_the_tick(queue: Queue, base: str) -> None:
    queue.enqueue("chore")
    first = call(base, qstash_token(CURRENT, base + TICK))
    assert first.status_code == 200, first.text
    assert first.json()["jobs"]["succeeded"] == 1
    body = b'{"from": "a QStash schedule"}'
    rotated = call(base, qstash_token(NEXT, base + TICK, body), body)
    assert rotated.status_code == 200, rotated.text


def test_a_replayed_call_is_refused_and_runs_nothing(queue: Queue, base: str) -> None:
    token = qstash_token(CURRENT, base + TICK)
    assert call(base, token).status_code == 200
    queue.enqueue("chore")
    refused(call(base, token), "was used before (a replay)")
    assert queue.stats()["by_status"]["pending"] == 1, "the replay ran nothing"


def test_expired_not_yet_valid_other_body_url_or_key_are_refused(queue: Queue, base: str) -> None:
    url = base + TICK
    queue.enqueue("chore")
    refused(call(base, qstash_token(CURRENT, url, age=400)), "expired")
    refused(call(base, qstash_token(CURRENT, url, age=-120)), "not valid for another")
    refused(call(base, qstash_token(CURRENT, url, b"signed"), b"tampered"), "not the one")
    refused(call(base, qstash_token(CURRENT, base + "/api/other")), "was signed for")
    other_host = url.replace("127.0.0.1", "evil.example")
    refused(call(base, qstash_token(CURRENT, other_host)), "was signed for")
    refused(call(base, qstash_token("sig_someone_else_" + "c" * 20, url)), "matches neither")
    refused(call(base, qstash_token(CURRENT, url, iss="Mallory")), "issuer")
    refused(call(base, qstash_token(CURRENT, url, alg="none")), "HS256")
    refused(call(base, "not.a-jwt"), "not a JWT")
    refused(call(base, "é.é.é".encode("latin-1")), "not a JWT")
    assert queue.stats()["by_status"]["pending"] == 1, "no refused call ran the tick"


def test_without_a_signature_it_is_401_not_503_and_bearer_still_works(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused(call(base, None), "missing Upstash-Signature header")
    monkeypatch.setenv("CRON_SECRET", SECRET)
    bearer = httpx.post(base + TICK, headers={"Authorization": f"Bearer {SECRET}"}, timeout=30)
    assert bearer.status_code == 200, bearer.text
    assert httpx.post(base + TICK, timeout=30).status_code == 401


def test_a_fixed_public_url_for_hosts_behind_a_rewriting_proxy(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    public = "https://app.example.com/api/cron/tick"
    monkeypatch.setenv("TICKQ_QSTASH_URL", public)
    assert call(base, qstash_token(CURRENT, public)).status_code == 200
    refused(call(base, qstash_token(CURRENT, base + TICK)), "TICKQ_QSTASH_URL")


def test_without_signing_keys_the_header_is_ignored(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QSTASH_CURRENT_SIGNING_KEY", raising=False)
    monkeypatch.delenv("QSTASH_NEXT_SIGNING_KEY", raising=False)
    monkeypatch.setenv("CRON_SECRET", SECRET)
    with serving(queue.asgi_app()) as base:
        refused(call(base, qstash_token(CURRENT, base + TICK)), "missing Authorization header")


def test_token_ids_are_kept_until_they_expire(queue: Queue) -> None:
    now = time.time()
    assert queue._store.remember_token("jwt_1", now + 60)
    assert not queue._store.remember_token("jwt_1", now + 60)
    assert queue._store.remember_token("jwt_old", now - 1)
    assert queue._store.remember_token("jwt_2", now + 60)  # forgets jwt_old meanwhile
    assert queue._store.remember_token("jwt_old", now + 60), "an expired id was forgotten"


def test_signing_keys_alone_need_no_cron_secret_warning(
    queue: Queue, keys: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="tickq")
    queue.asgi_app()
    assert [r for r in caplog.records if r.name == "tickq"] == []


def test_a_signed_call_through_a_wsgi_server(queue: Queue, keys: None) -> None:
    import threading
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    class Threaded(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    server = make_server("127.0.0.1", 0, queue.wsgi_app(), server_class=Threaded,
                         handler_class=Quiet)  # fmt: skip
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        body = b'{"schedule": "every 15 minutes"}'
        assert call(base, qstash_token(CURRENT, base + TICK, body), body).status_code == 200
        refused(call(base, qstash_token(CURRENT, base + TICK, body), b"{}"), "not the one")
    finally:
        server.shutdown()
