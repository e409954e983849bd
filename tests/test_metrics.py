"""Prometheus metrics: the same figures as q.stats(), served by a real uvicorn socket."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tickq import FrozenClock, Queue
from tickq.metrics import MetricsApp, render

TOKEN = "s3cret-metrics-token-for-tests"


def _fails(n: int) -> None:
    raise TimeoutError(f"upstream slow ({n})")


def _fill(q: Queue, clock: FrozenClock) -> None:
    @q.job()
    def thumbnail(n: int) -> None:
        pass

    q.job(name="ocr", queue="heavy", max_attempts=1)(_fails)
    for n in range(3):
        thumbnail.enqueue(n=n)
    q.enqueue("ocr", {"n": 1})
    q.process_jobs()
    thumbnail.enqueue(n=9)
    clock.advance(seconds=42)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_render_exports_what_stats_says(frozen_queue: Queue, clock: FrozenClock) -> None:
    _fill(frozen_queue, clock)
    stats = frozen_queue.stats()
    got = samples(render(frozen_queue))

    assert got[("tickq_jobs", (("queue", "default"), ("status", "done")))] == 3
    assert got[("tickq_jobs", (("queue", "default"), ("status", "pending")))] == 1
    assert got[("tickq_jobs", (("queue", "heavy"), ("status", "failed")))] == 1
    assert got[("tickq_due_jobs", ())] == stats["due"] == 1
    assert got[("tickq_oldest_due_job_age_seconds", ())] == 42
    assert got[("tickq_failed_last_hour", ())] == 1
    assert got[("tickq_failed_attempts_last_hour", ())] == 1
    done = (("outcome", "done"), ("queue", "default"), ("type", "thumbnail"))
    error = (("outcome", "error"), ("queue", "heavy"), ("type", "ocr"))
    assert got[("tickq_processed_total", done)] == 3
    assert got[("tickq_processed_total", error)] == 1
    labels = (("queue", "default"), ("type", "thumbnail"))
    assert got[("tickq_job_duration_seconds_count", labels)] == 3
    assert got[("tickq_job_duration_seconds_bucket", (("le", "+Inf"), *labels))] == 3
    h = stats["duration_seconds"]["default"]["thumbnail"]
    assert got[("tickq_job_duration_seconds_sum", labels)] == pytest.approx(h["sum"])


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free loopback port; yield its base URL."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            thread.join(0.01)
        assert server.started, "uvicorn did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        server.should_exit = True
        thread.join(10)


def get(url: str, token: str | None = None, method: str = "GET") -> tuple[int, dict, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    request = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def test_endpoint_is_protected_by_a_bearer_token(frozen_queue: Queue, clock: FrozenClock) -> None:
    _fill(frozen_queue, clock)
    with serve(MetricsApp(frozen_queue, token=TOKEN)) as url:
        status, headers, body = get(url, TOKEN)
        assert status == 200 and headers["content-type"].startswith("text/plain; version=")
        assert samples(body)[("tickq_due_jobs", ())] == 1

        for wrong in (None, "", "nope", TOKEN + "x", TOKEN[:-1]):
            status, headers, body = get(url, wrong)
            assert status == 401 and headers["www-authenticate"] == "Bearer"
            assert "tickq_jobs" not in body
        assert get(url, TOKEN, method="POST")[0] == 405
        assert get(url, TOKEN, method="HEAD")[:1] == (200,)


def test_endpoint_is_off_until_the_token_is_set(
    frozen_queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKQ_METRICS_TOKEN", raising=False)
    with serve(MetricsApp(frozen_queue)) as url:
        status, _, body = get(url, "anything")
        assert status == 503 and "set TICKQ_METRICS_TOKEN" in body
    monkeypatch.setenv("TICKQ_METRICS_TOKEN", TOKEN)
    with serve(MetricsApp(frozen_queue)) as url:
        assert get(url, TOKEN)[0] == 200


def test_endpoint_says_503_when_the_database_is_missing(tmp_path: object) -> None:
    q = Queue(f"sqlite:///{tmp_path}/never-migrated.db")
    with serve(MetricsApp(q, token=TOKEN)) as url:
        status, _, body = get(url, TOKEN)
    assert status == 503 and "run q.migrate()" in body


def test_the_tick_app_serves_metrics_only_when_enabled(
    frozen_queue: Queue, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(frozen_queue, clock)
    monkeypatch.setenv("CRON_SECRET", "a-cron-secret-long-enough")
    monkeypatch.setenv("TICKQ_METRICS_TOKEN", TOKEN)
    with serve(frozen_queue.asgi_app()) as url:
        assert get(url, TOKEN)[0] == 404, "off unless enabled"
    with serve(frozen_queue.asgi_app(metrics=True)) as url:
        status, headers, body = get(url, TOKEN)
        assert status == 200 and headers["content-type"].startswith("text/plain; version=")
        assert samples(body)[("tickq_due_jobs", ())] == 1
        assert get(url, "a-cron-secret-long-enough")[0] == 401, "the tick's token is not enough"
        health = url.replace("/metrics", "/api/cron/health")
        assert get(health)[0] in (200, 503)
