"""tickq's logger, ``logging.getLogger("tickq")``, with ``logging`` imported on first use.

Importing ``logging`` costs a waking host milliseconds, and a tick with nothing to do logs
nothing. Log lines carry structured fields in ``extra`` (see ``tickq.logfmt``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

INFO, WARNING = 20, 30  # logging.INFO, logging.WARNING


class LazyLogger:
    """Stands in for a ``logging.Logger``; every attribute comes from the real one."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        import logging

        value = getattr(logging.getLogger(self.name), attr)
        if callable(value):
            setattr(self, attr, value)  # a bound method stays valid: look it up once
        return value


log: Any = LazyLogger("tickq")
