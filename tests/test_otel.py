"""OpenTelemetry: spans for enqueues, attempts and ticks, metrics, the trace carried in
the job row from a web request to a worker in another process, and nothing at all when
OpenTelemetry is not imported.

The in-process tests give tickq a watcher bound to their own SDK providers (the global
provider can be set once per process); the end-to-end test configures the global SDK in
each of its processes (tests/apps/traced_app.py).
"""

from __future__ import annotations

import asyncio
import json
import select
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import ROOT, run_tickq, tickq_env
from tickq import FrozenClock, Queue, observe
from tickq.otel import OtelWatcher
from workerproc import WorkerProcess, eventually

SECRET = "a-tick-secret-of-32-characters.."


class Sdk:
    """An SDK of the test's own: spans in memory, metrics read on demand."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("test")

    def finished(self, name: str) -> list[Any]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        metrics = [m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]
        return [point for m in metrics if m.name == metric for point in m.data.data_points]

    def by_queue(self, metric: str) -> dict[str, Any]:
        return {p.attributes["messaging.destination.name"]: p.value for p in self.points(metric)}


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    sdk = Sdk()
    saved, seen = list(observe.WATCHERS), dict(observe._otel)
    observe._otel["seen"] = True  # no watcher on the global (no-op) provider beside ours
    observe.WATCHERS[:] = [OtelWatcher(sdk.tracer_provider, sdk.meter_provider)]
    try:
        yield sdk
    finally:
        observe.WATCHERS[:] = saved
        observe._otel.update(seen)
        sdk.meter_provider.shutdown()


def traced_queue(db_url: str, clock: FrozenClock | None = None) -> Queue:
    q = Queue(db_url, clock=clock)
    q.migrate()

    @q.job(max_attempts=2, queue="mail")
    def send_welcome(email: str) -> None:
        if email.startswith("bad"):
            raise ValueError(f"no mailbox {email}")

    return q


def test_a_job_run_later_is_a_child_of_the_request_that_enqueued_it(db_url: str, sdk: Sdk) -> None:
    q = traced_queue(db_url)
    with sdk.tracer.start_as_current_span("POST /signup") as request:
        job_id = q.enqueue("send_welcome", {"email": "ann@example.com"})
    q.process_jobs()
    [send] = sdk.finished("send mail")
    [process] = sdk.finished("process mail")
    trace_id = request.get_span_context().trace_id
    assert send.kind is SpanKind.PRODUCER and process.kind is SpanKind.CONSUMER
    assert send.context.trace_id == process.context.trace_id == trace_id
    assert send.parent.span_id == request.get_span_context().span_id
    assert process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert dict(send.attributes) == {
        "messaging.system": "tickq", "messaging.operation.type": "send",
        "messaging.operation.name": "send", "messaging.destination.name": "mail",
        "messaging.message.id": str(job_id), "tickq.job.type": "send_welcome",
    }  # fmt: skip
    assert dict(process.attributes) == {
        "messaging.system": "tickq", "messaging.operation.type": "process",
        "messaging.operation.name": "process", "messaging.destination.name": "mail",
        "messaging.message.id": str(job_id), "tickq.job.type": "send_welcome",
        "tickq.job.attempt": 1, "tickq.job.outcome": "succeeded",
    }  # fmt: skip
    assert process.status.status_code is StatusCode.UNSET
    assert q.get_job(job_id).meta["trace"]["traceparent"].split("-")[2] == (
        f"{send.context.span_id:016x}"
    )


def test_a_failed_attempt_records_its_exception_and_an_error_status(db_url: str, sdk: Sdk) -> None:
    q = traced_queue(db_url)
    q.enqueue("send_welcome", {"email": "bad@example.com"})
    q.process_jobs()  # its retry is not due yet
    [send] = sdk.finished("send mail")
    [first] = sdk.finished("process mail")
    assert first.attributes["tickq.job.outcome"] == "retried"
    assert first.status.status_code is StatusCode.ERROR
    assert first.status.description == "ValueError: no mailbox bad@example.com"
    [event] = first.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert first.parent.span_id == send.context.span_id  # its enqueue began the trace
    assert not send.parent


def test_an_enqueue_outside_any_span_starts_its_own_trace_and_carries_it(
    db_url: str, sdk: Sdk
) -> None:
    q = traced_queue(db_url)
    ids = q.enqueue_many([("send_welcome", {"email": "a@x.org"}),
                          ("send_welcome", {"email": "b@x.org"})])  # fmt: skip
    q.process_jobs()
    [send] = sdk.finished("send mail")
    assert send.attributes["messaging.batch.message_count"] == 2
    assert "messaging.message.id" not in send.attributes
    runs = sdk.finished("process mail")
    assert sorted(r.attributes["messaging.message.id"] for r in runs) == sorted(map(str, ids))
    assert {r.parent.span_id for r in runs} == {send.context.span_id}


def test_enqueue_async_is_traced_in_the_callers_span(db_url: str, sdk: Sdk) -> None:
    q = traced_queue(db_url)

    async def handle() -> Any:
        with sdk.tracer.start_as_current_span("handler") as handler:
            await q.enqueue_async("send_welcome", {"email": "ann@example.com"})
        return handler

    handler = asyncio.run(handle())
    [send] = sdk.finished("send mail")
    assert send.parent.span_id == handler.get_span_context().span_id


def test_a_webhook_delivery_is_enqueued_in_a_producer_span(tmp_path: Path, sdk: Sdk) -> None:
    import hashlib
    import hmac

    import httpx

    from test_web import serving
    from tickq.webhooks import HMAC

    secret = "whsec-for-the-otel-test-0123456789"
    q = Queue(f"sqlite:///{tmp_path / 'hooks.db'}")
    q.migrate()

    @q.webhook("/hooks/shop", verify=HMAC(secret, header="X-Signature"))
    def on_order(event: dict[str, Any]) -> None:
        pass

    body = b'{"order": 7}'
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    with serving(q.asgi_app()) as base:
        answer = httpx.post(f"{base}/hooks/shop", content=body, timeout=30,
                            headers={"X-Signature": signature}).json()  # fmt: skip
    q.process_jobs()
    [send] = sdk.finished("send default")
    [process] = sdk.finished("process default")
    assert send.attributes["messaging.message.id"] == str(answer["job_id"])
    assert send.attributes["tickq.job.type"] == "on_order"
    assert process.parent.span_id == send.context.span_id
    assert set(q.get_job(answer["job_id"]).meta) == {"webhook", "trace"}


def test_a_schedule_slot_enqueued_by_a_tick_is_in_the_ticks_trace(db_url: str, sdk: Sdk) -> None:
    clock = FrozenClock()
    q = Queue(db_url, clock=clock)
    q.migrate()

    @q.schedule("*/15 * * * *")
    def report() -> None:
        pass

    q.tick()  # first sight: the latest slot is enqueued, and run
    [tick] = sdk.finished("tickq tick")
    [send] = sdk.finished("send default")
    [process] = sdk.finished("process default")
    assert send.parent.span_id == tick.context.span_id
    assert process.parent.span_id == send.context.span_id
    [job] = q.list_jobs(type="report")
    assert send.attributes["messaging.message.id"] == str(job.id)
    assert set(job.meta) >= {"schedule", "slot", "trace"}


def test_enqueue_async_on_the_callers_connection_carries_the_trace(
    pg_schema_url: str, sdk: Sdk
) -> None:
    import psycopg

    q = traced_queue(pg_schema_url)

    async def handle() -> tuple[Any, int]:
        async with await psycopg.AsyncConnection.connect(pg_schema_url) as conn:
            with sdk.tracer.start_as_current_span("handler") as handler:
                job_id = await q.enqueue_async("send_welcome", {"email": "a@x.org"}, conn=conn)
            await conn.commit()
        return handler, job_id

    handler, job_id = asyncio.run(handle())
    q.process_jobs()
    [send] = sdk.finished("send mail")
    [process] = sdk.finished("process mail")
    assert send.parent.span_id == handler.get_span_context().span_id
    assert send.attributes["messaging.message.id"] == str(job_id)
    assert process.parent.span_id == send.context.span_id


def test_a_tick_is_a_span_with_its_figures(db_url: str, sdk: Sdk) -> None:
    q = traced_queue(db_url)
    q.enqueue("send_welcome", {"email": "ann@example.com"})
    q.tick()
    [tick] = sdk.finished("tickq tick")
    assert tick.attributes["tickq.jobs.claimed"] == 1
    assert tick.attributes["tickq.jobs.succeeded"] == 1
    assert tick.attributes["tickq.remaining_due"] == 0
    [process] = sdk.finished("process mail")
    assert process.attributes["tickq.job.outcome"] == "succeeded"
    assert sdk.points("tickq.run.duration")[0].attributes == {"tickq.run": "tickq tick"}


def test_metrics_count_attempts_by_outcome_and_time_runs_waits_and_queues(
    db_url: str, sdk: Sdk
) -> None:
    clock = FrozenClock()
    q = traced_queue(db_url, clock)
    q.enqueue("send_welcome", {"email": "ann@example.com"})
    q.enqueue("send_welcome", {"email": "bad@example.com"})
    q.enqueue("send_welcome", {"email": "later@example.com"}, run_after=clock.now() + _minutes(5))
    clock.advance(seconds=3)  # both due ones wait 3 s for their claim
    q.process_jobs()
    by_outcome = {p.attributes["tickq.job.outcome"]: p.value for p in sdk.points("tickq.attempts")}
    assert by_outcome == {"succeeded": 1, "retried": 1}
    [duration] = sdk.points("tickq.job.duration")
    assert duration.count == 2
    assert duration.attributes == {"messaging.destination.name": "mail",
                                   "tickq.job.type": "send_welcome"}  # fmt: skip
    [wait] = sdk.points("tickq.job.queue_wait")
    assert (wait.count, wait.sum) == (2, pytest.approx(6.0, abs=0.01))
    due = {
        p.attributes["messaging.destination.name"]: p.value for p in sdk.points("tickq.jobs.due")
    }
    assert due == {"mail": 0}  # the retry and the later job are pending, not yet due
    clock.advance(minutes=10)
    due = {
        p.attributes["messaging.destination.name"]: p.value for p in sdk.points("tickq.jobs.due")
    }
    assert due == {"mail": 2}
    running = sdk.points("tickq.jobs.running")
    assert [p.value for p in running] == [0]


def _minutes(n: int) -> Any:
    from datetime import timedelta

    return timedelta(minutes=n)


def test_without_opentelemetry_imported_tickq_imports_none_of_it(tmp_path: Path) -> None:
    script = f"""
import sys
from tickq import Queue
q = Queue("sqlite:///{tmp_path / "lean.db"}")
q.migrate()
@q.job
def hello(name: str) -> None:
    pass
q.enqueue("hello", {{"name": "x"}})
report = q.tick()
assert report["jobs"]["succeeded"] == 1, report
print(sorted(m for m in sys.modules
             if m.startswith(("opentelemetry", "sentry_sdk", "tickq.observe", "tickq.otel"))))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=tickq_env(), timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_request_to_a_web_server_and_the_job_a_worker_runs_share_one_trace(
    pg_schema_url: str, tmp_path: Path
) -> None:
    spans_dir = tmp_path / "spans"
    spans_dir.mkdir()
    env = {"TICKQ_DATABASE_URL": pg_schema_url, "TICKQ_TEST_SPANS": str(spans_dir),
           "TICKQ_LOG_FORMAT": "json", "CRON_SECRET": SECRET}  # fmt: skip
    Queue(pg_schema_url).migrate()
    server, base = start_server(env, tmp_path / "server.log")
    try:
        caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        request = urllib.request.Request(f"{base}/signup?email=ann@example.com", method="POST",
                                         headers={"traceparent": caller})  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        with WorkerProcess("--concurrency", "1", app="apps.traced_app:q", **env) as worker:
            worker.wait_for_line('"outcome": "succeeded"')
            worker.send(signal.SIGTERM)
            assert worker.wait() == 0
        lines = [json.loads(ln) for ln in worker.lines]  # every line one JSON object
        [done] = [ln for ln in lines if ln.get("event") == "succeeded"]
        assert done["job_id"] == answer["job_id"] and done["job_type"] == "send_welcome"
        spans = eventually(lambda: complete(spans_dir, 4), what="the spans of both processes")
    finally:
        server.kill()
        server.wait(10)
    by_name = {s["name"]: s for s in spans}
    web, send = by_name["POST /signup"], by_name["send default"]
    process, smtp = by_name["process default"], by_name["smtp send"]
    assert {s["trace_id"] for s in spans} == {"0af7651916cd43dd8448eb211c80319c"}
    assert answer["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert web["pid"] == send["pid"] != process["pid"] == smtp["pid"]
    assert (web["parent_id"], send["parent_id"]) == ("b7ad6b7169203331", web["span_id"])
    assert (process["parent_id"], smtp["parent_id"]) == (send["span_id"], process["span_id"])
    assert process["links"] == [send["span_id"]]
    assert (send["kind"], process["kind"]) == ("PRODUCER", "CONSUMER")
    job = str(answer["job_id"])
    assert send["attributes"]["messaging.message.id"] == job
    assert process["attributes"] == {
        "messaging.system": "tickq", "messaging.operation.type": "process",
        "messaging.operation.name": "process", "messaging.destination.name": "default",
        "messaging.message.id": job, "tickq.job.type": "send_welcome",
        "tickq.job.attempt": 1, "tickq.job.outcome": "succeeded",
    }  # fmt: skip
    (tmp_path / "trace.json").write_text(json.dumps(spans, indent=1))


def test_the_http_tick_logs_json_lines_and_is_traced(pg_schema_url: str, tmp_path: Path) -> None:
    spans_dir = tmp_path / "spans"
    spans_dir.mkdir()
    env = {"TICKQ_DATABASE_URL": pg_schema_url, "TICKQ_TEST_SPANS": str(spans_dir),
           "TICKQ_LOG_FORMAT": "json", "CRON_SECRET": SECRET}  # fmt: skip
    Queue(pg_schema_url).migrate()
    log = tmp_path / "server.log"
    server, base = start_server(env, log)
    try:
        post(f"{base}/signup?email=bad@example.com")
        tick = urllib.request.Request(f"{base}/api/cron/tick", method="POST",
                                      headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
        with urllib.request.urlopen(tick, timeout=30) as response:
            assert json.loads(response.read())["jobs"]["failed"] == 1
        spans = eventually(lambda: complete(spans_dir, 5), what="the tick's spans")
    finally:
        server.kill()
        server.wait(10)
    text = log.read_text().splitlines()
    assert not [ln for ln in text if "tickq" in ln and not ln.startswith("{")], text
    lines = [json.loads(ln) for ln in text if ln.startswith("{")]
    assert {ln["logger"] for ln in lines} == {"tickq"}
    assert [ln["event"] for ln in lines if "event" in ln] == ["failed", "job_failed"], lines
    assert lines[-1]["message"].startswith("tick: ") and lines[-1]["tick"]["jobs"]["failed"] == 1
    [failed] = [ln for ln in lines if ln.get("event") == "failed"]
    assert {"ts", "level", "logger", "message", "job_id", "job_type", "attempt", "outcome",
            "duration_ms"} <= set(failed)  # fmt: skip
    assert failed["level"] == "warning" and "ValueError: no mailbox" in failed["message"]
    by_name = {s["name"]: s for s in spans}
    assert by_name["process default"]["status"] == "ERROR"
    assert by_name["process default"]["events"] == ["exception"]
    assert by_name["tickq tick"]["attributes"]["tickq.jobs.failed"] == 1


def test_tickq_tick_logs_json_lines_when_asked(db_url: str) -> None:
    q = Queue(db_url, strict=False)
    q.migrate()
    q.enqueue("send_welcome", {"email": "bad@example.com"}, max_attempts=1)
    done = run_tickq("tick", "apps.traced_app:q", TICKQ_DATABASE_URL=db_url,
                     TICKQ_LOG_FORMAT="json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(ln) for ln in done.stderr.splitlines()]  # each line one object
    assert [ln["event"] for ln in lines if "event" in ln] == ["failed", "job_failed"]
    assert {ln["level"] for ln in lines} >= {"info", "warning", "error"}
    assert json.loads(done.stdout)["jobs"]["failed"] == 1


def post(url: str) -> Any:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30) as r:
        return json.loads(r.read())


def complete(folder: Path, count: int) -> list[dict[str, Any]] | None:
    spans = [json.loads(ln) for p in sorted(folder.glob("*.jsonl"))
             for ln in p.read_text().splitlines() if ln]  # fmt: skip
    return spans if len(spans) >= count else None


def start_server(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[str], str]:
    with log.open("w") as errors:
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "asgi_process.py"), "apps.traced_app:app"],
            stdout=subprocess.PIPE, stderr=errors, text=True, env=tickq_env(**env), cwd=ROOT,
        )  # fmt: skip
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], 30)
    line = server.stdout.readline() if ready else ""
    if not line.startswith("serving on "):
        server.kill()
        pytest.fail(f"the traced app did not start: {line!r}\n{log.read_text()}")
    return server, line.removeprefix("serving on ").strip()


def test_the_global_watcher_comes_with_the_api(tmp_path: Path) -> None:
    script = """
import opentelemetry.trace
from tickq import observe
from tickq.otel import OtelWatcher
assert [type(w) for w in observe.watchers()] == [OtelWatcher]
assert len(observe.watchers()) == 1
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=tickq_env(), timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
