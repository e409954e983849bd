"""Internal: tickq's logger, ``logging.getLogger("tickq")``, importing ``logging`` on first need.

Importing ``logging`` costs a waking host milliseconds. Until something imports it, nobody
can have configured a handler or a level: info lines are skipped without importing it. As
a library should, tickq adds a ``NullHandler`` to its logger, so nothing reaches stderr
(logging's last-resort handler) unless the app configures logging; ``tickq tick`` sends
warnings and errors to stderr (``Fallback``). Log lines carry structured fields in ``extra`` (see
``tickq.logfmt``).

``TICKQ_LOG_FORMAT=json`` (or ``text``) gives the library what ``tickq worker
--log-format`` gives a worker, wherever tickq runs (a tick, a web app, Django): its lines
go to stderr in that format, one per line, from INFO up, and only there (not also through
the app's own root handlers, which would print each twice).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEBUG, INFO, WARNING = 10, 20, 30  # logging.DEBUG, logging.INFO, logging.WARNING


class LazyLogger:
    """Stands in for a ``logging.Logger``; every attribute comes from the real one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._logger: Any = None

    def _real(self) -> Any:
        if self._logger is None:
            self._logger = library_logger(self.name)
        return self._logger

    def isEnabledFor(self, level: int) -> bool:
        if level < WARNING and "logging" not in sys.modules and not Fallback.log_format:
            return False
        return bool(self._real().isEnabledFor(level))

    def debug(self, msg: str, *args: Any, **kwargs: Any) -> None:
        if self.isEnabledFor(DEBUG):
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
            self._real().debug(msg, *args, **kwargs)

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        if self.isEnabledFor(INFO):
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
            self._real().info(msg, *args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._real(), attr)
        if callable(value):
            setattr(self, attr, value)  # a bound method stays valid: look it up once
        return value


class Fallback:
    """What tickq's logger gets when the app configured no handler of its own."""

    to_stderr = False
    """Set by a CLI command that is the app itself (``tickq tick``): warnings and errors
    then go to stderr, as one line each; otherwise a ``NullHandler`` keeps them quiet."""
    installed = False
    log_format = os.environ.get("TICKQ_LOG_FORMAT", "").strip().lower()
    """``TICKQ_LOG_FORMAT``: ``text`` or ``json`` sends tickq's lines to stderr so."""


def library_logger(name: str) -> Any:
    """``logging.getLogger(name)``, with tickq's fallback handler added (once)."""
    import logging

    if not Fallback.installed:
        Fallback.installed = True
        if Fallback.log_format and not holders():  # not when a worker chose --log-format
            from .logfmt import log_from_environment

            log_from_environment(Fallback.log_format)
            return logging.getLogger(name)
        handler: logging.Handler = logging.NullHandler()
        if Fallback.to_stderr and not logging.getLogger().handlers:
            handler = logging.StreamHandler()
            handler.setLevel(logging.WARNING)
            handler.setFormatter(logging.Formatter("tickq: %(levelname)s: %(message)s"))
        logging.getLogger("tickq").addHandler(handler)
    return logging.getLogger(name)


log: Any = LazyLogger("tickq")


def holders() -> list[Any]:
    """``tickq.logfmt.HOLDERS``, the handlers that can hold back lines; none until
    something imported that module (only it makes them), so it is not imported here."""
    logfmt = sys.modules.get("tickq.logfmt")
    return logfmt.HOLDERS if logfmt is not None else []


class held_lines:
    """Lines this thread logs inside the block reach tickq's stderr handler at its end, in
    one write: a worker logs a line per job, and a write per line cost more than the line."""

    __slots__ = ()

    def __enter__(self) -> None:
        for handler in holders():
            handler.hold_lines()

    def __exit__(self, *exc: object) -> None:
        for handler in holders():
            handler.write_held()
