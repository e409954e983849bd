"""Dashboard pages over a million jobs on Postgres: p50 / p95 of the overview, a filtered
list page (first and a deep keyset page) and a job's detail page.

    python bench/dashboard.py [--url postgresql://postgres@127.0.0.1:5432/test] [--jobs N]

Fills its own schema (dropped afterwards) with INSERT … SELECT over generate_series, then
times each page as the dashboard renders it (queries and template, no network), after a
warm-up. Target: each under 100 ms at p95.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from urllib.parse import quote, urlsplit

import psycopg

from tickq import Queue
from tickq.dashboard import Dashboard
from tickq.dashboard.auth import SESSION_COOKIE
from tickq.web.http import Headers, Request

TYPES = ["send_email", "resize_image", "sync_crm", "charge_card", "generate_pdf",
         "call_model", "import_csv", "send_reminder"]  # fmt: skip
TRACEBACK = (
    "ConnectionError: provider unreachable\n"
    "Traceback (most recent call last):\n"
    '  File "app/jobs.py", line 42, in charge_card\n'
    "    provider.charge(order)\n"
    "ConnectionError: provider unreachable"
)

# 1,000,000 jobs created over 30 days: 3 % failed (4 failed attempts each), 0.5 % cancelled,
# 1.6 % pending (the newest 1.5 %, and one in a thousand waiting for a retry; half of them
# due), the newest 50 running, the rest done; one in ten has a unique key.
FILL = """
INSERT INTO tickq_jobs (type, queue, payload, status, attempts, max_attempts, run_after,
                        last_error, unique_key, created_at, updated_at, attempted_at,
                        finished_at, lease_owner, lease_expires_at, duration)
SELECT t.type, t.queue, jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'),
       s.status, s.attempts, 4, s.created + interval '1 second',
       CASE WHEN s.status = 'failed' THEN %(traceback)s END,
       CASE WHEN g %% 10 = 0 THEN 'key:' || g END,
       s.created, s.created + interval '2 seconds',
       CASE WHEN s.attempts > 0 THEN s.created + interval '1 second' END,
       CASE WHEN s.status IN ('done', 'failed', 'cancelled')
            THEN s.created + interval '2 seconds' END,
       CASE WHEN s.status = 'running' THEN 'bench:1:abc' END,
       CASE WHEN s.status = 'running' THEN now() + interval '1 minute' END,
       CASE WHEN s.status = 'done' THEN 0.05 END
FROM generate_series(1, %(jobs)s) AS g,
LATERAL (SELECT (ARRAY{types})[1 + g %% 8] AS type,
                (ARRAY['default', 'default', 'mail', 'media'])[1 + (g / 8) %% 4] AS queue) AS t,
LATERAL (SELECT CASE WHEN g > %(jobs)s - 50 THEN 'running'
                     WHEN g > %(jobs)s * 0.985 OR g %% 1000 = 1 THEN 'pending'
                     WHEN g %% 100 IN (3, 4, 5) THEN 'failed' WHEN g %% 200 = 9 THEN 'cancelled'
                     ELSE 'done' END AS status,
                now() - (interval '30 days') * (1 - g::float8 / %(jobs)s) AS created,
                CASE WHEN g > %(jobs)s * 0.985 THEN 0 WHEN g %% 1000 = 1 THEN 1
                     WHEN g %% 100 IN (3, 4, 5) THEN 4 ELSE 1 END AS attempts) AS s
"""
FUTURE = """UPDATE tickq_jobs SET run_after = now() + interval '1 hour'
WHERE status = 'pending' AND id % 2 = 0"""
ATTEMPTS = """
INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error, duration)
SELECT j.id, a, j.created_at + (a * interval '1 minute'),
       j.created_at + (a * interval '1 minute') + interval '1 second', 'error', j.last_error, 0.2
FROM tickq_jobs j, generate_series(1, 4) AS a WHERE j.status = 'failed'
"""


def fill(url: str, jobs: int) -> None:
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        types = "[" + ", ".join(f"'{t}'" for t in TYPES) + "]"
        conn.execute(FILL.replace("{types}", types), {"jobs": jobs, "traceback": TRACEBACK})
        conn.execute(FUTURE)
        conn.execute(ATTEMPTS)
        conn.execute("VACUUM ANALYZE tickq_jobs")
        conn.execute("VACUUM ANALYZE tickq_attempts")
    print(f"filled {jobs:,} jobs in {time.perf_counter() - started:.1f} s")


def timings(dashboard: Dashboard, path: str, runs: int) -> tuple[float, float]:
    parts = urlsplit(path)
    cookies = {SESSION_COOKIE: dashboard.guard.open_session(), "tickq_csrf": "n"}
    cookie = Headers([("cookie", "; ".join(f"{k}={v}" for k, v in cookies.items()))])
    times = []
    for i in range(runs + 5):
        request = Request("GET", parts.path, "/tickq", query_string=parts.query, headers=cookie)
        started = time.perf_counter()
        response = dashboard.handle(request)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise SystemExit(f"{path} answered {response.status}: {response.body[:300]!r}")
        if i >= 5:  # warm-up: connections, templates, prepared statements
            times.append(elapsed)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    schema = f"bench_dash_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{args.url}{'&' if '?' in args.url else '?'}options={quote(f'-csearch_path={schema}')}"
    try:
        q = Queue(url)
        q.migrate()
        fill(url, args.jobs)
        failed = q.list_jobs(status="failed", limit=1)[0].id
        deep = q.list_jobs(status="failed", type="charge_card", limit=1)[0].id // 2
        dashboard = Dashboard(q, password="bench-password")
        pages = {
            "overview": "/",
            "list, status=failed&type=charge_card": "/jobs?status=failed&type=charge_card",
            "list, deep keyset page": f"/jobs?status=failed&type=charge_card&before={deep}",
            "list, queue=mail": "/jobs?queue=mail",
            "list, status=running": "/jobs?status=running",
            "list, a queue with no jobs (worst case)": "/jobs?queue=reports",
            "list, search by unique key": "/jobs?q=key:500000",
            "detail (4 failed attempts)": f"/jobs/{failed}",
        }
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"{os.cpu_count()} CPUs, load average {load:.1f}")
        print(f"{'page':<40} {'p50 ms':>8} {'p95 ms':>8}")
        for name, path in pages.items():
            p50, p95 = timings(dashboard, path, args.runs)
            print(f"{name:<40} {p50:>8.1f} {p95:>8.1f}{'' if p95 < 100 else '  (over 100 ms)'}")
        q.close()
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
