"""Log lines for people (``text``) or for machines (``json``: one object per line).

tickq logs through the ``tickq`` logger with structured fields in ``extra`` (``event``,
``job_id``, ``job_type``, ``attempt``, ``outcome``, ``duration_ms`` ...); the JSON format
puts them at the top level of each line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from .errors import ConfigurationError

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName",
}  # fmt: skip


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", <extra fields>..., "error"?}`` per line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update((k, v) for k, v in vars(record).items() if k not in _STANDARD)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def log_to_stderr(fmt: str) -> logging.Handler:
    """Send log lines to stderr in ``fmt``; returns the handler (for ``stop_logging``).

    Installs on the root logger when nothing else is configured, so job functions' own
    log lines come out the same way; otherwise only on the ``tickq`` logger.
    """
    if fmt not in LOG_FORMATS:
        raise ConfigurationError(f"log_format must be 'text' or 'json', got {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root, tickq = logging.getLogger(), logging.getLogger("tickq")
    if root.handlers:
        tickq.addHandler(handler)
        tickq.propagate = False
    else:
        root.addHandler(handler)
        root.setLevel(logging.INFO)
    if tickq.level == logging.NOTSET:
        tickq.setLevel(logging.INFO)
    return handler


def stop_logging(handler: logging.Handler) -> None:
    for logger in (logging.getLogger(), logging.getLogger("tickq")):
        logger.removeHandler(handler)
    logging.getLogger("tickq").propagate = True
