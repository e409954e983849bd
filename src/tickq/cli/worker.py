"""``tickq worker APP``: run jobs continuously on an always-on host."""

from __future__ import annotations

import argparse

from ..logger import Fallback
from .app import add_app_argument, load_app


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    worker = subparsers.add_parser(
        "worker",
        help="run jobs continuously (always-on hosts); SIGTERM/SIGINT stops it gracefully",
        description="Claim and run due jobs until SIGTERM or SIGINT. The first signal stops "
        "claiming, lets running jobs finish for up to --grace seconds, puts the rest back "
        "and exits 0; a second signal exits at once.",
    )
    add_app_argument(worker)
    worker.add_argument(
        "--queues", metavar="A,B", help="comma-separated queues to run (default: all)"
    )
    worker.add_argument(
        "--concurrency", type=int, default=10, metavar="N",
        help="jobs at a time, sync and async together (default: 10)",
    )  # fmt: skip
    worker.add_argument(
        "--poll-interval", type=float, default=None, metavar="SECONDS",
        help="look for due jobs at least this often (default: 5 on Postgres, 1 on SQLite)",
    )  # fmt: skip
    worker.add_argument(
        "--grace", type=float, default=25.0, metavar="SECONDS",
        help="on shutdown, wait this long for running jobs before putting them back "
        "(default: 25)",
    )  # fmt: skip
    worker.add_argument(
        "--log-format", choices=("text", "json"), default=None,
        help="log lines for people (text) or one JSON object per line (json); default: "
        "TICKQ_LOG_FORMAT, else text",
    )  # fmt: skip
    worker.add_argument(
        "--listen-url", default=None, metavar="URL",
        help="a direct Postgres connection for LISTEN when the app's URL goes through a "
        "transaction pooler (default: $TICKQ_LISTEN_URL; without either it polls there)",
    )  # fmt: skip
    worker.add_argument(
        "--idle-check", type=float, default=300.0, metavar="SECONDS",
        help="with nothing running and nothing due, send no query for this long (LISTEN "
        "still wakes it; default: 300, so a serverless database can suspend)",
    )  # fmt: skip
    worker.set_defaults(handler=run_worker)


def run_worker(args: argparse.Namespace) -> int:
    q = load_app(args.app)
    q.run_worker(
        queues=args.queues, concurrency=args.concurrency, poll_interval=args.poll_interval,
        grace=args.grace, log_format=args.log_format or Fallback.log_format or "text",
        listen_url=args.listen_url, idle_check=args.idle_check,
    )  # fmt: skip
    return 0
