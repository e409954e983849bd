"""Text for people: aligned tables, short times and ages, progress on stderr."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TextIO

from ..errors import ConfigurationError

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], stretch: int = -1) -> str:
    """Columns aligned to their widest cell; on a terminal, column ``stretch`` is cut to fit
    its width (piped output keeps every character, for grep)."""
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    room = shutil.get_terminal_size((120, 24)).columns
    if rows and sys.stdout.isatty():
        col = stretch % len(headers)
        others = sum(w + 2 for i, w in enumerate(widths) if i != col)
        widths[col] = max(len(headers[col]), min(widths[col], room - others))
    lines = ["  ".join(_fit(c, widths[i]) for i, c in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines)


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: max(width - 1, 0)] + "…"


def when(value: datetime | None) -> str:
    """``2026-01-02 03:04:05`` (UTC), or ``-``."""
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def age(seconds: float | None) -> str:
    """``3d 4h``, ``5m 2s``, ``0.4s``; ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    parts: list[str] = []
    rest = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or (unit == "s" and not parts):
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return " ".join(parts[:2])


def first_line(text: str | None) -> str:
    return (text or "").split("\n", 1)[0]


def parse_duration(text: str, option: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``1d12h``, ``90s``, ``2w`` -> timedelta."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or _DURATION.sub("", compact):
        raise ConfigurationError(
            f"{option} must be a duration like 7d, 12h, 30m or 1d12h, got {text!r}"
        )
    seconds = sum(float(n) * DURATION_UNITS[u] for n, u in _DURATION.findall(compact))
    return timedelta(seconds=seconds)


def port_number(text: str) -> int:
    """``--port``: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"must be a port number from 1 to 65535 (or 0 for any free port), got {text!r}"
        )
    return port


class Progress:
    """``label done/total`` on stderr: one rewritten line on a terminal, else one per step.

    The first step is held back until a second one comes: work done in one step shows only
    the command's own summary, not a progress line saying the same thing."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.label, self.stream, self.enabled = label, stream or sys.stderr, enabled
        self.tty = self.stream.isatty()
        self.shown = False
        self.held: str | None = None

    def __call__(self, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        text = f"{self.label} {done}" + (
            f"/{total} ({done * 100 // max(total, 1)}%)" if total else ""
        )
        if not self.shown and self.held is None:
            self.held = text
            return
        for line in (self.held, text) if self.held is not None else (text,):
            self.stream.write(f"\r{line}" if self.tty else f"{line}\n")
        self.stream.flush()
        self.held, self.shown = None, True

    def finish(self) -> None:
        if self.enabled and self.shown and self.tty:
            self.stream.write("\n")
