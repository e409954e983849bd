"""Payloads are JSON objects; anything else is refused at enqueue time, naming the field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from json import JSONEncoder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_encode = JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def dump_payload(payload: Mapping[str, Any] | None, job_type: str) -> str:
    """Serialise ``payload`` or raise ``TypeError`` naming the offending field."""
    if payload is None:
        return "{}"
    if type(payload) is not dict and not isinstance(payload, Mapping):
        raise TypeError(
            f"payload for job {job_type!r} must be a dict of keyword arguments, "
            f"got {type(payload).__name__}"
        )
    try:
        return _encode(payload)
    except (TypeError, ValueError) as exc:
        path, value = find_unserialisable(payload) or ("?", None)
        raise TypeError(
            f"payload field {path!r} of job {job_type!r} is not JSON-serialisable "
            f"({type(value).__name__}: {_short(value)}); pass plain JSON values, e.g. an id "
            "instead of an object, value.isoformat() for a datetime, str() for a UUID or Decimal"
        ) from exc


def find_unserialisable(value: Any, path: str = "") -> tuple[str, Any] | None:
    """The dotted path of the first value JSON can't carry, or None."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str):
                return where, key
            found = find_unserialisable(item, where)
            if found:
                return found
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = find_unserialisable(item, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if value is None or isinstance(value, str | int | float | bool):
        return None
    return path, value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
