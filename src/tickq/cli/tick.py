"""``tickq tick APP``: one tick from a shell, for a host's own cron (no HTTP needed)."""

from __future__ import annotations

import argparse
import json
import re
from datetime import timedelta

from ..cycle import CALL_PATIENCE
from ..errors import ConfigurationError
from ..heartbeat import heartbeat_url, ping
from ..logger import Fallback
from ..tick import run_tick as tick_once
from ..tick import strict_problems
from .app import add_app_argument, load_app

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    tick = subparsers.add_parser(
        "tick",
        help="enqueue due schedule slots, run a batch of due jobs, print the summary",
        description="Run one tick, as the HTTP tick endpoint would: enqueue the schedule "
        "slots that came due, run up to --limit due jobs within --time-budget seconds, and "
        "print the JSON summary. Pings $TICKQ_HEARTBEAT_URL when set.",
    )
    add_app_argument(tick)
    tick.add_argument("--limit", type=int, default=100, help="jobs to run at most (100)")
    tick.add_argument(
        "--time-budget",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="start no job after this many seconds (20)",
    )
    tick.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when jobs failed for good in this tick, or the oldest due "
        "job waited longer than --max-wait",
    )
    tick.add_argument(
        "--max-wait",
        type=duration,
        default=timedelta(hours=1),
        metavar="AGE",
        help="with --strict: how long due work may wait, e.g. 30m, 2h (1h)",
    )
    tick.set_defaults(handler=run_tick)


def duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``2h``, ``7d`` -> timedelta."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"expected a duration like 90s, 15m, 2h or 7d, got {text!r}"
        )
    return timedelta(**{UNITS[match[2]]: float(match[1])})


def run_tick(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise ConfigurationError(f"--limit must be >= 0, got {args.limit}")
    if args.time_budget <= 0:
        raise ConfigurationError(f"--time-budget must be positive seconds, got {args.time_budget}")
    Fallback.to_stderr = True  # this command is the app: its warnings go to stderr
    q = load_app(args.app)
    url = heartbeat_url()
    try:
        # A process of its own, not a request: it can wait out an outage, as process_jobs.
        summary = tick_once(q._runtime, args.limit, args.time_budget, q._alerts, CALL_PATIENCE)
    except Exception as exc:
        if url:
            ping(url, ok=False, body=json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        raise
    finally:
        q.close()  # outcomes still held for the database: one more try, then named
    problems = strict_problems(summary, args.max_wait) if args.strict else []
    if args.strict:
        summary["strict"] = {"ok": not problems, "problems": problems}
    body = json.dumps(summary, indent=2)
    if url:
        ping(url, ok=not problems, body=body.encode())
    print(body)
    return 1 if problems else 0
