"""A traced web app and its jobs, for tests/test_otel.py's request -> job trace.

Each process that imports it configures the OpenTelemetry SDK with an in-memory exporter
that also writes every finished span to ``$TICKQ_TEST_SPANS/<pid>.jsonl``, so the test can
read the spans of the web server and of the worker. ``app``: ``POST /signup`` opens a
SERVER span (continuing a ``traceparent`` header, as HTTP instrumentation would) and
enqueues ``send_welcome`` in it; anything else goes to tickq's own ASGI app (the tick).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tickq import Queue


class WrittenOut(InMemorySpanExporter):
    """The SDK's in-memory exporter, each batch also appended to this process's file."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        folder = os.environ.get("TICKQ_TEST_SPANS")
        if folder:
            with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as f:
                f.writelines(json.dumps(as_dict(s)) + "\n" for s in spans)
        return result


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    return {
        "name": span.name, "kind": span.kind.name, "pid": os.getpid(),
        "trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "links": [f"{link.context.span_id:016x}" for link in span.links],
        "attributes": dict(span.attributes or {}), "status": span.status.status_code.name,
        "events": [event.name for event in span.events],
    }  # fmt: skip


exporter = WrittenOut()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("traced_app")

q = Queue()


@q.job(max_attempts=1)
def send_welcome(email: str) -> None:
    with tracer.start_as_current_span("smtp send"):
        if email.startswith("bad"):
            raise ValueError(f"no mailbox {email}")


tick_app = q.asgi_app()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http" or scope["path"] != "/signup":
        await tick_app(scope, receive, send)
        return
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    with tracer.start_as_current_span("POST /signup", context=propagate.extract(headers),
                                      kind=SpanKind.SERVER) as span:  # fmt: skip
        email = dict(p.split("=", 1) for p in scope["query_string"].decode().split("&"))["email"]
        job_id = await q.enqueue_async("send_welcome", {"email": email})
        trace_id = f"{span.get_span_context().trace_id:032x}"
    body = json.dumps({"job_id": job_id, "trace_id": trace_id}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})
