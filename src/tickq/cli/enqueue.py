"""``tickq enqueue``: store one job from the shell, its payload given as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import ConfigurationError


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    help_text = "store one job of TYPE with a JSON payload, checked against its annotations"
    parser = subparsers.add_parser("enqueue", help=help_text, description=help_text)
    parser.add_argument(
        "targets", nargs="+", metavar="[APP] TYPE [PAYLOAD]",
        help="APP is module:attribute naming your Queue (default: $TICKQ_APP); TYPE the job "
        "type; PAYLOAD a JSON object (default {}; - reads stdin)",
    )  # fmt: skip
    parser.add_argument("--queue", help="the queue to store it in (default: the job type's)")
    parser.add_argument("--priority", type=int, help="higher runs first (default: the type's)")
    parser.add_argument("--unique-key", help="while a job with this key is pending or running, "
                        "print its id instead of storing another")  # fmt: skip
    parser.set_defaults(handler=run_enqueue)


def run_enqueue(args: argparse.Namespace) -> int:
    from ..job_options import EnqueueOptions
    from .inspection import open_queue

    app, job_type, text = _targets(args.targets)
    payload = _payload(sys.stdin.read() if text == "-" else text)
    options = EnqueueOptions(queue=args.queue, priority=args.priority, unique_key=args.unique_key)
    q = open_queue(app, None)
    try:
        job_id = q._enqueue_json(job_type, payload, options)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(str(exc)) from None
    print(job_id)
    return 0


def _targets(targets: list[str]) -> tuple[str | None, str, str]:
    app = targets.pop(0) if len(targets) > 1 and ":" in targets[0] else None
    if len(targets) not in (1, 2):
        raise ConfigurationError("give [APP] TYPE [PAYLOAD], e.g. tickq enqueue app:q send '{}'")
    return app, targets[0], targets[1] if len(targets) == 2 else "{}"


def _payload(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"PAYLOAD is not valid JSON ({exc}): {text[:60]!r}") from None
    if type(value) is not dict:
        raise ConfigurationError(f"PAYLOAD must be a JSON object, got {text[:60]!r}")
    return value
