"""Internal: the options of a job (priority, max_attempts, queue, unique_key…), checked once where a
caller passes them, so every backend stores the same thing and no stored row can stop the
queue. Types are refused with ``TypeError``, values with ``ConfigurationError`` (a
``ValueError``); each message names the option."""

from __future__ import annotations

from .errors import ConfigurationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
"""What an ``INTEGER`` column holds on both backends: priority and max_attempts live there."""
UNIQUE_SCOPES = ("active", "all")
MAX_NAME_BYTES = 1000
"""The longest job type or queue name, in bytes of UTF-8, on both backends: Postgres
indexes them (one B-tree entry holds ~2,700 bytes, and some hold a type and a queue), and a
queue name is the payload of ``NOTIFY`` (under 8,000 bytes)."""
MAX_UNIQUE_KEY_BYTES = 2000
"""The longest ``unique_key``, in bytes of UTF-8, on both backends (a unique index holds it)."""


def check_priority(value: Any) -> int:
    """``priority``: an int within ``INT_MIN``..``INT_MAX``; higher runs first."""
    return _int("priority", value, INT_MIN)


def check_max_attempts(value: Any) -> int:
    """``max_attempts``: an int from 1 (one attempt, no retry) to ``INT_MAX``."""
    return _int("max_attempts", value, 1)


def check_queue(value: Any, *, bounded: bool = True) -> str:
    """``queue``: a non-empty name of at most ``MAX_NAME_BYTES`` (``bounded=False``: of
    any length, to resume a queue paused before the limit)."""
    text = check_text("queue", value)
    if not text:
        raise ConfigurationError("queue must be a non-empty name, got ''")
    return check_size("queue", text, MAX_NAME_BYTES) if bounded else text


def check_job_type(value: Any) -> str:
    """A job type: a str of at most ``MAX_NAME_BYTES``."""
    return check_name("job type", value)


def check_name(option: str, value: Any) -> str:
    """A name tickq stores and indexes (job type, schedule): at most ``MAX_NAME_BYTES``."""
    return check_size(option, check_text(option, value), MAX_NAME_BYTES)


def check_unique_key(value: Any) -> str | None:
    """``unique_key``: None or a string of at most ``MAX_UNIQUE_KEY_BYTES``."""
    if value is None:
        return None
    text = check_text("unique_key", value)
    return check_size("unique_key", text, MAX_UNIQUE_KEY_BYTES, KEY_HINT)


KEY_HINT = ", e.g. to a hash of it (hashlib.sha256(key.encode()).hexdigest())"


def check_size(option: str, text: str, limit: int, hint: str = "") -> str:
    """``text`` if it is at most ``limit`` bytes of UTF-8, else one line naming the limit."""
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > limit:
        raise ConfigurationError(
            f"{option} {text[:40]!r}... is {size} bytes long (UTF-8); at most {limit} fit "
            f"every backend (Postgres indexes it): shorten it{hint}"
        )
    return text


def check_unique_scope(value: Any) -> str:
    if type(value) is not str or value not in UNIQUE_SCOPES:
        raise ConfigurationError(f"unique_scope must be 'active' or 'all', got {value!r}")
    return value


def check_text(option: str, value: Any) -> str:
    """A str both backends store as is: no NUL character, no lone surrogate."""
    if type(value) is not str:
        raise TypeError(f"{option} must be a str, got {type(value).__name__}: {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigurationError(
                f"{option} {value!r} contains a lone surrogate, which a database can't store"
            ) from None
    if "\x00" in value:
        raise ConfigurationError(
            f"{option} {value!r} contains a NUL character, which Postgres can't store"
        )
    return value


def _int(option: str, value: Any, low: int) -> int:
    if type(value) is not int:
        raise TypeError(f"{option} must be an int, got {type(value).__name__}: {value!r}")
    if value < low:
        raise ConfigurationError(f"{option} must be >= {low}, got {value}")
    if value > INT_MAX:
        raise ConfigurationError(f"{option} must be <= {INT_MAX} (a 32-bit integer), got {value}")
    return value
