"""Templates (Jinja2, autoescaped) and the files under ``static/``."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import cache
from typing import Any

from ..errors import ConfigurationError

HERE = os.path.dirname(__file__)
STATIC = os.path.join(HERE, "static")
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".svg": "image/svg+xml"}  # fmt: skip


@cache
def environment() -> Any:
    try:
        import jinja2
    except ImportError:
        raise ConfigurationError(
            "the dashboard needs Jinja2: pip install 'tickq[dashboard]'"
        ) from None
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(utc=utc, ago=ago, first_line=first_line, number=number, iso=iso)
    return env


def render(template: str, **context: Any) -> bytes:
    page: str = environment().get_template(template).render(**context)
    return page.encode("utf-8")


def static_file(name: str) -> tuple[bytes, str] | None:
    """(content, content type) of a file shipped in ``static/``; None for anything else."""
    if name not in _static_names():
        return None
    with open(os.path.join(STATIC, name), "rb") as f:
        content = f.read()
    return content, STATIC_TYPES.get(os.path.splitext(name)[1], "application/octet-stream")


@cache
def _static_names() -> frozenset[str]:
    return frozenset(os.listdir(STATIC))


def iso(value: datetime | None) -> str:
    return value.astimezone(UTC).isoformat() if value else ""


def utc(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def ago(value: datetime | None, now: datetime) -> str:
    """``3 min ago`` / ``in 2 h``."""
    if value is None:
        return "—"
    seconds = (now - value).total_seconds()
    text = duration(abs(seconds))
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def first_line(text: str | None, limit: int = 160) -> str:
    line = (text or "").strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def number(value: int) -> str:
    return f"{value:,}"
