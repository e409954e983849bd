"""Internal: heartbeat pings for dead-man's switches (healthchecks.io style), with the stdlib only.

After each tick tickq POSTs the summary to ``TICKQ_HEARTBEAT_URL``; after a failed tick it
POSTs to the same URL with ``/fail`` appended. A monitor that stops hearing from the app
alerts its owner; a ping that fails is logged and never fails the tick.
"""

from __future__ import annotations

import os

from .logger import log

HEARTBEAT_ENV = "TICKQ_HEARTBEAT_URL"
PING_TIMEOUT = 5.0


def heartbeat_url(configured: str | None = None) -> str | None:
    """The configured URL, else ``$TICKQ_HEARTBEAT_URL``, else None."""
    return configured or os.environ.get(HEARTBEAT_ENV, "").strip() or None


def ping_url(url: str, ok: bool) -> str:
    """``url`` for a success, ``url`` + ``/fail`` (before any query string) for a failure."""
    if ok:
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/fail"))


def shown(url: str) -> str:
    """The URL for a log line: scheme and host only, since a ping URL's path (or query) is
    usually its secret (healthchecks.io's UUID)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        where = f"{parts.scheme or '?'}://{parts.hostname or '?'}"
    except ValueError:
        where = "an unparsable URL"
    return f"{where}/… ({len(url)} characters)"


def ping(url: str, ok: bool, body: bytes = b"", timeout: float = PING_TIMEOUT) -> bool:
    """POST ``body`` to the heartbeat URL; True when the monitor answered 2xx."""
    import urllib.request  # only when a heartbeat is configured: it costs milliseconds
    from urllib.parse import urlsplit

    target = ping_url(url, ok)
    if urlsplit(target).scheme not in ("http", "https"):
        log.error("tickq heartbeat URL must be http(s)://..., got %s; not pinging", shown(url))
        return False
    request = urllib.request.Request(
        target,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "tickq-heartbeat"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(1024)
            status: int = response.status
            return 200 <= status < 300
    except (OSError, ValueError) as exc:
        log.warning("tickq heartbeat ping to %s failed: %s", shown(target), exc)
        return False
