"""Internal: reading a request body within a limit, in chunks, stopping at the limit.

The endpoints that take a body (webhooks) never hold more than ``limit`` bytes of it: a
larger ``Content-Length`` is refused before reading, and a body that grows past the limit
while streaming (chunked) is refused as soon as it does.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping
    from typing import Any

CHUNK = 64 * 1024


class BodyRefused(Exception):
    """The body can't be taken: ``status`` (413 or 400) and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def too_large(limit: int) -> BodyRefused:
    """413; the route adds how to raise its limit."""
    return BodyRefused(413, f"the body is larger than this endpoint's limit of {limit} bytes")


def declared_length(value: str | None, limit: int) -> int | None:
    """The ``Content-Length`` header as an int (None when absent), refused past ``limit``."""
    if value is None:
        return None
    if not (value.isascii() and value.strip().isdigit()):
        raise BodyRefused(400, f"Content-Length must be a number of bytes, got {value[:20]!r}")
    length = int(value)
    if length > limit:
        raise too_large(limit)
    return length


def read_all(read: Callable[[int], bytes], length: int | None, limit: int) -> bytes:
    """Read up to ``length`` bytes (until EOF when None) with ``read(n)``, at most ``limit``."""
    chunks, size = [], 0
    remaining = limit + 1 if length is None else length
    while remaining > 0:
        chunk = read(min(CHUNK, remaining))
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


async def receive_all(
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]], limit: int
) -> bytes:
    """The ASGI request body, refused as soon as it passes ``limit`` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise BodyRefused(400, "the client disconnected before sending the whole body")
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
