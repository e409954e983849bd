"""Submit now, collect later: a job that waits for a batch API with ``Snooze``.

Batch APIs (bulk AI requests, big exports) take a job now and have the results hours
later. ``submit_batch`` sends the work once; ``collect_batch`` asks whether it is done and,
while it isn't, raises ``Snooze(600)``: the job goes back to the queue for ten minutes
without using up an attempt, and the wait is a row in the database, so it survives
restarts and hosts that sleep (the first tick after those ten minutes runs it again).
``max_snooze`` bounds the whole wait: a batch still not done after a day fails the job,
loudly, instead of polling forever.

Run it: python examples/batch_collect_later.py
(it starts a fake batch API, then ticks with a clock it moves on ten minutes a time)

As a real app: set TICKQ_DATABASE_URL and BATCH_API_URL, and let your scheduler run
``tickq tick examples.batch_collect_later:q``, or serve ``examples.batch_collect_later:app``
with any ASGI server and have it call ``POST /api/cron/tick`` with the bearer token in
CRON_SECRET.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import urllib.request
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tickq import FrozenClock, JobContext, Queue, Snooze
from tickq.testing import SharedClock

POLL_EVERY = timedelta(minutes=10)


def _database_url() -> str:
    default = f"sqlite:///{tempfile.mkdtemp()}/batch.db"
    return os.environ.get("TICKQ_DATABASE_URL") or default


def _clock() -> SharedClock | None:
    """Tests move every process's clock at once through a file (``SharedClock``)."""
    path = os.environ.get("TICKQ_CLOCK_FILE")
    return SharedClock(path) if path else None


q = Queue(_database_url(), clock=_clock())
app = q.asgi_app()  # POST /api/cron/tick (Authorization: Bearer $CRON_SECRET)


def api(method: str, path: str, body: Any = None, key: str | None = None) -> Any:
    """One call to the batch API, JSON in and out."""
    base = os.environ.get("BATCH_API_URL", "http://127.0.0.1:8765")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Idempotency-Key", key)  # a retried submit makes no second batch
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@q.job(max_attempts=4)
def submit_batch(prompts: list[str], ctx: JobContext) -> str:
    """Send the work now; the collector waits for it."""
    batch = api("POST", "/batches", {"prompts": prompts}, key=ctx.idempotency_key)
    collect_batch.with_options(unique_key=f"collect-{batch['id']}").enqueue(batch_id=batch["id"])
    return str(batch["id"])


@q.job(max_attempts=4, max_snooze=timedelta(hours=24))
def collect_batch(batch_id: str, ctx: JobContext) -> list[str]:
    """Collect the results once the batch is done; until then, look again later."""
    batch = api("GET", f"/batches/{batch_id}")
    if batch["status"] == "in_progress":
        raise Snooze(POLL_EVERY)  # look again in ten minutes; ctx.snoozes counts the looks
    if batch["status"] != "completed":
        raise RuntimeError(f"batch {batch_id} ended {batch['status']}")
    results: list[str] = api("GET", f"/batches/{batch_id}/results")["results"]
    return results  # stored: q.get_job(id).result


class FakeBatchAPI(ThreadingHTTPServer):
    """A stand-in for a provider's batch API: a batch is done after ``polls`` looks."""

    daemon_threads = True

    def __init__(self, polls: int = 3, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.polls_to_finish = polls
        self.batches: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}
        self.calls: list[str] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> FakeBatchAPI:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def submit(self, prompts: list[str], key: str | None) -> dict[str, Any]:
        with self.lock:
            if key in self.keys:
                return self.batches[self.keys[key]]
            batch_id = f"batch_{len(self.batches) + 1}"
            self.batches[batch_id] = {"id": batch_id, "prompts": prompts, "looks": 0}
            if key:
                self.keys[key] = batch_id
            return self.batches[batch_id]

    def status(self, batch_id: str) -> dict[str, Any]:
        with self.lock:
            batch = self.batches[batch_id]
            batch["looks"] += 1
            done = batch["looks"] > self.polls_to_finish
            return {"id": batch_id, "status": "completed" if done else "in_progress"}

    def results(self, batch_id: str) -> dict[str, Any]:
        prompts = self.batches[batch_id]["prompts"]
        return {"results": [f"summary of {p!r}" for p in prompts]}


class _Handler(BaseHTTPRequestHandler):
    server: FakeBatchAPI

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._reply(self.server.submit(body["prompts"], self.headers.get("Idempotency-Key")))

    def do_GET(self) -> None:
        parts = self.path.strip("/").split("/")
        if parts[-1] == "results":
            self._reply(self.server.results(parts[1]))
        else:
            self._reply(self.server.status(parts[1]))

    def _reply(self, body: dict[str, Any]) -> None:
        self.server.calls.append(f"{self.command} {self.path}")
        data = json.dumps({k: v for k, v in body.items() if k != "looks"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    fake = FakeBatchAPI(polls=3).start()
    os.environ["BATCH_API_URL"] = fake.url
    clock = FrozenClock()
    q.clock = clock  # the demo moves time on itself: no waiting ten minutes
    q.migrate()
    job_id = submit_batch.enqueue(prompts=["first report", "second report"])
    print(f"submitted job {job_id}")
    collector = None
    for tick in range(1, 10):
        summary = q.tick()
        jobs = summary["jobs"]
        print(f"tick {tick} at {clock.now():%H:%M}: {jobs['succeeded']} succeeded, "
              f"{jobs['snoozed']} snoozed; next due {summary['next_due_at']}")  # fmt: skip
        collector = collector or next(iter(q.list_jobs(type="collect_batch")), None)
        if collector and (done := q.get_job(collector.id)) and done.status == "done":
            print(f"collected after {done.snoozes} snoozes, attempt {done.attempts}: "
                  f"{done.result}")  # fmt: skip
            break
        clock.advance(POLL_EVERY)
    fake.shutdown()


if __name__ == "__main__":
    main()
