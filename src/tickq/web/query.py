"""The tick's query string, parsed strictly: a value is what it says or a 400, never a guess.

``?limit=`` takes ASCII digits only (leading zeros allowed: ``0000000001`` is 1); a sign, a
space, a decimal point, ``1_000``, non-ASCII digits or more than nine significant digits are
refused. ``?strict=`` takes 1/true/yes/on or 0/false/no/off. An empty value (``?limit=``,
``?strict``) is refused rather than read as a default, and so is a name given twice or one
the tick does not know, so a typo (``?limt=5``) is not silently ignored.
"""

from __future__ import annotations

from urllib.parse import unquote_plus

MAX_QUERY_FIELDS = 20
MAX_DIGITS = 9
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class QueryError(ValueError):
    """A query string the endpoint refuses; the message says what is wrong (a 400)."""


def parse_query(query: str, known: tuple[str, ...]) -> dict[str, str]:
    """``limit=5&strict=1`` -> {name: value}, or ``QueryError``."""
    fields = [f for f in query.split("&") if f]
    if len(fields) > MAX_QUERY_FIELDS:
        raise QueryError(f"too many query parameters (at most {MAX_QUERY_FIELDS})")
    params: dict[str, str] = {}
    for field in fields:
        raw_name, _, raw_value = field.partition("=")
        name = unquote_plus(raw_name, errors="replace")
        if name not in known:
            raise QueryError(
                f"unknown query parameter {shown(name)}: this endpoint takes "
                f"{', '.join(n + '=' for n in known)}",
            )
        if name in params:
            raise QueryError(f"query parameter {name!r} is given more than once; give it once")
        params[name] = unquote_plus(raw_value, errors="replace")
    return params


def parse_limit(raw: str | None, default: int, max_limit: int) -> int:
    """``?limit=``: a whole number from 0, capped at ``max_limit``; absent: ``default``."""
    if raw is None:
        return default
    significant = raw.lstrip("0") if raw.isascii() and raw.isdigit() else None
    if significant is None or len(significant) > MAX_DIGITS:
        raise QueryError(
            f"limit must be a whole number from 0 to {max_limit} (ASCII digits only), "
            f"got {shown(raw)}",
        )
    return min(int(significant or "0"), max_limit)


def parse_flag(name: str, raw: str | None) -> bool:
    """``?strict=1``: one of the true or false words, any case; absent: False."""
    if raw is None or raw.lower() in FALSE_WORDS:  # an empty value is no answer: a 400
        return False
    if raw.lower() in TRUE_WORDS:
        return True
    raise QueryError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), got {shown(raw)}")


def shown(value: str, limit: int = 40) -> str:
    """``value`` quoted for an error message, cut to ``limit`` characters."""
    return repr(value[:limit]) + ("…" if len(value) > limit else "")
