"""``tickq pause | resume``: stop and restart claiming a queue's jobs, on every worker."""

from __future__ import annotations

import argparse

from ..errors import ConfigurationError
from .inspection import open_queue
from .names import check_queue


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for name, help_text in (
        ("pause", "claim no more jobs of QUEUE on any worker or tick (running ones finish)"),
        ("resume", "claim QUEUE's jobs again"),
    ):
        parser = subparsers.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("targets", nargs="+", metavar="[APP] QUEUE",
                            help="APP is module:attribute naming your Queue (default: "
                            "$TICKQ_APP); QUEUE is the queue's name")  # fmt: skip
        parser.add_argument("--url", help="database URL instead of APP (or $TICKQ_DATABASE_URL)")
        if name == "pause":
            parser.add_argument("--force", action="store_true",
                                help="pause QUEUE even though no job uses it yet")  # fmt: skip
        parser.set_defaults(handler=run_control)


def run_control(args: argparse.Namespace) -> int:
    app, queue = _targets(args)
    q = open_queue(app, args.url)
    if args.command == "pause":
        if not args.force:
            check_queue(q, queue, "pass --force to pause it before any job uses it")
        changed = q.pause(queue)
        print(f"queue {queue!r} paused: no worker or tick claims its jobs until "
              f"`tickq resume` (running jobs finish)" if changed else
              f"queue {queue!r} was already paused")  # fmt: skip
    else:
        changed = q.resume(queue)
        if not changed:
            check_queue(q, queue)
        print(f"queue {queue!r} resumed" if changed else f"queue {queue!r} was not paused")
    return 0


def _targets(args: argparse.Namespace) -> tuple[str | None, str]:
    targets = args.targets
    if len(targets) == 2 and ":" in targets[0]:
        return targets[0], targets[1]
    if len(targets) == 1:
        return None, targets[0]
    raise ConfigurationError(
        f"expected [APP] QUEUE (APP is module:attribute), got {' '.join(targets)!r}; "
        f"e.g. tickq {args.command} myapp.jobs:q emails"
    )
