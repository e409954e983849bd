"""A webhook on the backend's Queue, routed by ``q.django_urls()`` to Django's view."""

import hashlib
import hmac
import json
import uuid

import pytest
from django.test import RequestFactory

from tickq.contrib.django import queue
from tickq.webhooks import GitHub

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "django-webhook-secret"


def signed(body: bytes, delivery: str) -> dict[str, str]:
    mac = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"HTTP_X_HUB_SIGNATURE_256": f"sha256={mac}", "HTTP_X_GITHUB_DELIVERY": delivery}


def test_a_signed_event_is_stored_once_and_a_forged_one_refused() -> None:
    q, name, seen = queue(), f"on_push_{uuid.uuid4().hex[:8]}", []
    q.webhook(f"/hooks/{name}", verify=GitHub(SECRET), name=name)(lambda event: seen.append(event))
    (pattern,) = q.django_urls(tick=False)
    assert str(pattern.pattern) == f"hooks/{name}"

    def deliver(body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
        request = RequestFactory().post("/" + str(pattern.pattern), data=body,
                                        content_type="application/json", **headers)  # fmt: skip
        response = pattern.callback(request)
        return response.status_code, json.loads(response.content)

    body = b'{"ref": "refs/heads/main"}'
    status, first = deliver(body, signed(body, "d-1"))
    assert status == 200 and first["received"] is True
    assert deliver(body, signed(body, "d-1")) == (200, first)
    assert deliver(body, {"HTTP_X_HUB_SIGNATURE_256": "sha256=00"})[0] == 401
    assert deliver(b"x" * (2 * 1024 * 1024), signed(b"", "d-2"))[0] == 413
    assert q.process_jobs()["succeeded"] == 1
    assert seen == [{"ref": "refs/heads/main"}]
