"""Log lines for people (``text``) or for machines (``json``: one object per line).

tickq logs through the ``tickq`` logger with structured fields in ``extra`` (``event``,
``job_id``, ``job_type``, ``attempt``, ``outcome``, ``duration_ms`` ...); the JSON format
puts them at the top level of each line. ``TICKQ_LOG_FORMAT=json`` (or ``tickq worker
--log-format json``) uses these formatters; to route the lines yourself, name them in
your logging configuration (``{"()": "tickq.logfmt.JsonFormatter"}``).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from .errors import ConfigurationError

__all__ = ["JsonFormatter", "TextFormatter"]

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
HOLDERS: list[StderrHandler] = []
"""Handlers that can hold back lines (``tickq.logger.held_lines``) while registered."""
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName",
}  # fmt: skip


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``, formatting each second's date and time once (a worker logs a line
    per job, thousands a second)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")

    def usesTime(self) -> bool:
        return True

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second, text = self._second
        if int(record.created) != second:
            second = int(record.created)
            text = time.strftime("%Y-%m-%d %H:%M:%S", self.converter(second))
            self._second = (second, text)
        return f"{text},{int(record.msecs):03d}"


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", <extra fields>..., "error"?}`` per line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _iso_ms(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update((k, v) for k, v in vars(record).items() if k not in _STANDARD)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def _iso_ms(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that holds back the lines a thread logs inside
    ``tickq.logger.held_lines()`` and writes them in one go at the end of the block."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._held = threading.local()

    def hold_lines(self) -> None:
        self._held.lines = []

    def write_held(self) -> None:
        lines, self._held.lines = getattr(self._held, "lines", None), None
        if lines:
            self.acquire()
            try:
                self.stream.write("".join(lines))
                self.flush()
            finally:
                self.release()

    def emit(self, record: logging.LogRecord) -> None:
        lines = getattr(self._held, "lines", None)
        if lines is None:
            super().emit(record)
            return
        try:
            lines.append(self.format(record) + self.terminator)
        except Exception:
            self.handleError(record)


def log_to_stderr(fmt: str) -> logging.Handler:
    """Send log lines to stderr in ``fmt``; returns the handler (for ``stop_logging``).

    Installs on the root logger when nothing else is configured, so job functions' own
    log lines come out the same way; otherwise only on the ``tickq`` logger.
    """
    if fmt not in LOG_FORMATS:
        raise ConfigurationError(f"log_format must be 'text' or 'json', got {fmt!r}")
    handler = StderrHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    HOLDERS.append(handler)
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


def log_from_environment(fmt: str) -> logging.Handler:
    """``TICKQ_LOG_FORMAT``'s handler: tickq's lines to stderr in ``fmt``, INFO and up
    unless the app set the ``tickq`` logger's level, and not passed on to the root logger
    as well. A value other than text or json says so on stderr and logs text."""
    if fmt not in LOG_FORMATS:
        sys.stderr.write(f"tickq: TICKQ_LOG_FORMAT must be 'text' or 'json', got {fmt!r}; "
                         "logging text\n")  # fmt: skip
        fmt = "text"
    handler = StderrHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    HOLDERS.append(handler)
    tickq = logging.getLogger("tickq")
    tickq.addHandler(handler)
    tickq.propagate = False
    if tickq.level == logging.NOTSET:
        tickq.setLevel(logging.INFO)
    return handler


def stop_logging(handler: logging.Handler) -> None:
    if handler in HOLDERS:
        HOLDERS.remove(handler)
    for logger in (logging.getLogger(), logging.getLogger("tickq")):
        logger.removeHandler(handler)
    logging.getLogger("tickq").propagate = True
