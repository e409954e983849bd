"""Internal: payloads are JSON objects that arrive exactly as enqueued; anything else is refused at
enqueue time with a ``TypeError`` naming the field, the same on every backend.

A payload may hold ``dict`` (string keys), ``list``, ``str``, ``int`` (up to
``MAX_INT_DIGITS`` digits), finite ``float``, ``bool`` and ``None``, nested at most
``MAX_DEPTH`` containers deep. Subclasses (``IntEnum``, ``OrderedDict``…), tuples, NaN and
non-string keys are refused: JSON would hand the job something else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from json import JSONEncoder, encoder, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 100
"""Containers (dicts and lists, the payload itself included) nested deeper are refused."""
MAX_INT_DIGITS = 4300
"""Python's default limit for turning an int into text and back (``sys.int_info``)."""

_encode = JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_make_encoder: Any = getattr(encoder, "c_make_encoder", None)  # None without _json
_encode_checked = (
    # _encode's C encoder built once (JSONEncoder.encode builds one per call), for payloads
    # checked already: no circular check (they nest at most MAX_DEPTH), no default.
    _make_encoder(None, None, encoder.encode_basestring_ascii, None, ":", ",", False, False, False)
    if _make_encoder is not None
    else None
)
_INT_BOUND = 10**MAX_INT_DIGITS
_JOINED = re.compile("[\ud800-\udbff][\udc00-\udfff]").search
"""A high surrogate then a low one: JSON (and jsonb) can only spell them as the one
character they stand for, so such a str would not arrive as it was sent."""
_JSON_NAMES = {"list": "array", "str": "string", "NoneType": "null", "bool": "boolean"}
_HINTS = {
    "tuple": "pass a list",
    "set": "pass a sorted list",
    "frozenset": "pass a sorted list",
    "datetime": "pass value.isoformat()",
    "date": "pass value.isoformat()",
    "UUID": "pass str(value)",
    "Decimal": "pass str(value)",
    "bytes": "pass text, e.g. base64",
}


class Unreadable(dict):  # type: ignore[type-arg]
    """The payload of a stored row that can't be decoded or run (corrupted, too deep, bad
    stored options): empty, with ``reason`` saying why. The job fails alone, never retried."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason

    def __repr__(self) -> str:
        return f"Unreadable({self.reason!r})"


PLAIN_TYPES = (str, int, float, bool, type(None))
"""The JSON leaves a payload carries as they are."""


class Refused(Exception):
    """A value a payload can't carry, or that does not fit its parameter's annotation (typed
    payloads, ``payload_codecs``); ``path`` is filled in on the way out."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str] = []

    def where(self, root: str) -> str:
        return root + "".join(reversed(self.path))


def dump_payload(payload: Mapping[str, Any] | None, job_type: str) -> str:
    """Serialise ``payload`` or raise ``TypeError`` naming the offending field."""
    if payload is None:
        return "{}"
    if type(payload) is not dict:
        if not isinstance(payload, Mapping):
            raise TypeError(
                f"payload for job {job_type!r} must be a dict of keyword arguments, "
                f"got {type(payload).__name__}"
            )
        payload = dict(payload)
    try:
        _check_dict(payload, 1)
    except Refused as refused:
        where = refused.where("payload")
        if len(where) > 80:
            where = f"{where[:40]}...{where[-30:]}"
        raise TypeError(f"{where} of job {job_type!r} {refused.what}") from None
    return _encode(payload)


def dump_plain(payload: Any) -> str | None:
    """``dump_payload``'s JSON for a ``dict`` payload it accepts, else None (call
    ``dump_payload`` for the error): the same checks, a loop of its own over the top level
    (``enqueue_many`` runs it per job)."""
    if type(payload) is not dict:
        return None
    for key, value in payload.items():
        kind = type(value)
        if type(key) is not str or not (key.isascii() or _JOINED(key) is None):
            return None
        if kind is str:
            if value.isascii() or _JOINED(value) is None:
                continue
            return None
        if kind is bool or value is None:
            continue
        if kind is int:
            if -_INT_BOUND < value < _INT_BOUND:
                continue
            return None
        if kind is float:
            if value - value == 0.0:
                continue
            return None
        if not _fits(value):
            return None
    if _encode_checked is None:
        return _encode(payload)
    return "".join(_encode_checked(payload, 0))


def _fits(value: Any) -> bool:
    try:
        _check(value, 1)
    except Refused:
        return False
    return True


def load_payload(text: str | None) -> dict[str, Any]:
    """The stored payload, or ``Unreadable`` saying why it can't be (never raises)."""
    if not text:
        return {}
    if not isinstance(text, str | bytes):  # SQLite keeps any value in any column
        return Unreadable(
            f"stored payload {_short(text)} is a {type(text).__name__}, not JSON text"
        )
    try:
        value = loads(text)
    except RecursionError:
        return Unreadable("stored payload is nested too deeply to decode")
    except ValueError as exc:
        return Unreadable(f"stored payload is not valid JSON: {exc}")
    if type(value) is not dict:
        kind = _JSON_NAMES.get(type(value).__name__, "number")
        return Unreadable(f"stored payload is a JSON {kind}, not an object")
    return value


def _check(value: Any, depth: int) -> None:
    kind = type(value)
    if kind is str:
        return _check_str(value)
    if kind is bool or value is None:
        return
    if kind is int:
        if -_INT_BOUND < value < _INT_BOUND:
            return
        raise Refused(f"is an int of more than {MAX_INT_DIGITS} digits; pass it as a str")
    if kind is float:
        if value - value == 0.0:  # finite
            return
        raise Refused(f"is {value!r}, which JSON can't carry; pass None or a str instead")
    if kind is dict:
        return _check_dict(value, depth + 1)
    if kind is list:
        return _check_list(value, depth + 1)
    raise Refused(_unsupported(value))


def _check_dict(value: dict[Any, Any], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Refused(f"nests deeper than {MAX_DEPTH} levels of dicts and lists")
    key: Any = None
    try:
        for key, item in value.items():
            if type(key) is not str:
                raise Refused(
                    f"has a key of type {type(key).__name__} ({_short(key)}); JSON keys are "
                    "strings, so pass str keys (the job would receive the key changed)"
                )
            if not key.isascii() and _JOINED(key) is not None:
                bad, key = key, None  # the key itself: no path below it
                raise Refused(f"has a key {bad!r} that " + _joined_pair(bad))
            _check(item, depth)
    except Refused as refused:
        if type(key) is str:
            refused.path.append(f"[{key!r}]")
        raise


def _check_str(value: str) -> None:
    if not value.isascii() and _JOINED(value) is not None:
        raise Refused(_joined_pair(value))


def _joined_pair(value: str) -> str:
    pair = _JOINED(value)
    assert pair is not None
    joined = pair.group().encode("utf-16", "surrogatepass").decode("utf-16")
    return (
        f"holds a surrogate pair as two characters ({pair.group()!r} at index {pair.start()}), "
        f"which JSON can only deliver as the one character it stands for ({joined!r}); "
        "pass the joined text: s.encode('utf-16', 'surrogatepass').decode('utf-16')"
    )


def _check_list(value: list[Any], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Refused(f"nests deeper than {MAX_DEPTH} levels of dicts and lists")
    i = 0
    try:
        for i in range(len(value)):
            _check(value[i], depth)
    except Refused as refused:
        refused.path.append(f"[{i}]")
        raise


def _unsupported(value: Any) -> str:
    kind = type(value)
    if isinstance(value, str | int | float | dict | list):
        base = next(b for b in (bool, str, int, float, dict, list) if isinstance(value, b))
        hint = f"pass a plain {base.__name__}, e.g. {base.__name__}(value)"
        if isinstance(value, str | int) and hasattr(value, "value"):
            hint = "pass value.value"
    else:
        hint = _HINTS.get(kind.__name__, "pass plain JSON values, e.g. an id, not an object")
    return (
        f"is not JSON-serialisable as is ({kind.__name__}: {_short(value)}); {hint} "
        "(a job receives exactly what was enqueued, or nothing)"
    )


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."
