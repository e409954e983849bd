"""The ``tickq`` command: thin commands over the Queue facade.

Each area lives in its own module exposing ``register(subparsers)``; a command's handler
takes the parsed ``args`` and returns an exit code. User errors print one line, never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import TickqError
from ..redact import redact_text

TYPE_CHECKING = False  # typing costs a waking host's `tickq tick` its import
if TYPE_CHECKING:
    from typing import NoReturn

COMMAND_MODULES = ("core", "tick", "scheduler", "plan", "demo", "worker", "inspection", "controls",
                   "dashboard", "workflows")  # fmt: skip


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; given the ``command`` about to run, only the modules up to the one that
    defines it are imported (``tickq tick`` on a waking host skips the demo's imports)."""
    from .. import __version__

    parser = Parser(
        prog="tickq",
        description="Durable background jobs in your app's own database.",
    )
    parser.add_argument("--version", action="version", version=f"tickq {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
        if command is not None and command in subparsers.choices:
            break
    return parser


class Parser(argparse.ArgumentParser):
    """argparse, but its errors never show a password: a URL given where another argument
    goes is echoed back (``unrecognized arguments: --url postgresql://app:***@db/app``)."""

    def error(self, message: str) -> NoReturn:
        super().error(redact_text(message))


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here, not at exit
        return code
    except BrokenPipeError:
        return reader_went_away()
    except TickqError as exc:
        trace = redact_text(getattr(exc, "user_traceback", ""))
        print(f"{trace}tickq: error: {redact_text(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def reader_went_away() -> int:
    """``tickq show APP 1 | head``: the reader closed the pipe. Exit quietly, as ``cat``
    does (128 + SIGPIPE); stdout goes to devnull so the flush at exit cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
