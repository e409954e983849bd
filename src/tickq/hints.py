"""Internal: whether payload values fit a job function's annotations, checked at enqueue.

Only simple annotations are checked: ``int``, ``float`` (an int fits too), ``str``,
``bool``, ``None``, ``list``, ``dict``, ``list[X]``, ``dict[str, X]``, ``X | Y``,
``Optional[X]``, ``Union[...]`` and ``Any``, written as objects or as strings (``from
__future__ import annotations``). Anything else is accepted as is. The checks are built on
a job's first enqueue, not at import, and without importing ``typing``.
"""

from __future__ import annotations

import re
from contextlib import suppress
from weakref import WeakKeyDictionary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Check = Callable[[Any], bool]

_SCALARS: dict[str, Check] = {
    "int": lambda v: type(v) is int,
    "float": lambda v: type(v) is float or type(v) is int,
    "str": lambda v: type(v) is str,
    "bool": lambda v: type(v) is bool,
    "None": lambda v: v is None,
    "NoneType": lambda v: v is None,
}
_CONTAINERS = {"list": list, "List": list, "dict": dict, "Dict": dict}
_ANY = ("Any", "object")
_TOKEN = re.compile(r"\s*([\w.]+|[\[\],|])")
_cache: WeakKeyDictionary[Any, dict[str, tuple[str, Check]]] = WeakKeyDictionary()


def mismatch(fn: Any, payload: dict[str, Any]) -> str | None:
    """``payload['a'] is str '1', not int`` for the first value that doesn't fit, or None."""
    checks = checks_of(fn)
    for key, value in payload.items():
        found = checks.get(key)
        if found is not None and not found[1](value):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            return f"payload[{key!r}] is {type(value).__name__} {shown}, not {found[0]}"
    return None


def checks_of(fn: Any) -> dict[str, tuple[str, Check]]:
    """The checks of ``fn``'s simply annotated parameters: name -> (annotation text, check)."""
    try:
        return _cache[fn]
    except (KeyError, TypeError):
        pass
    from .signature import parameters

    checks = {}
    for name, kind, _, note in parameters(fn):
        check = compile_note(note) if kind == "named" and note is not None else None
        if check is not None:
            checks[name] = (note.strip("'\"") if isinstance(note, str) else _text(note), check)
    with suppress(TypeError):  # not weak-referenceable: built again next time
        _cache[fn] = checks
    return checks


def compile_note(note: Any) -> Check | None:
    """A check for ``note``, or None when it isn't a simple annotation (anything fits)."""
    if isinstance(note, str):
        if len(note) > 1 and note[0] == note[-1] and note[0] in "'\"":
            note = note[1:-1]  # quoted as well as postponed: "'int | None'"
        tokens = _TOKEN.findall(note)
        if "".join(tokens) != re.sub(r"\s", "", note):
            return None
        check, rest = _parse_union(tokens)
        return check if not rest else None
    return _from_object(note)


def _from_object(note: Any) -> Check | None:
    if note is None or note is type(None):
        return _SCALARS["None"]
    if isinstance(note, type) and note.__name__ in _SCALARS and note.__module__ == "builtins":
        return _SCALARS[note.__name__]
    if note in (list, dict):
        return _container(note, None)
    origin, args = getattr(note, "__origin__", None), getattr(note, "__args__", None)
    if type(note).__name__ == "UnionType" or repr(origin) == "typing.Union":
        return _union([_from_object(a) for a in args or ()])
    if origin in (list, dict) and args:
        return _container(origin, _from_object(args[-1]))
    return None


def _parse_union(tokens: list[str]) -> tuple[Check | None, list[str]]:
    parts = []
    check, tokens = _parse_atom(tokens)
    parts.append(check)
    while tokens and tokens[0] == "|":
        check, tokens = _parse_atom(tokens[1:])
        parts.append(check)
    return (parts[0] if len(parts) == 1 else _union(parts)), tokens


def _parse_atom(tokens: list[str]) -> tuple[Check | None, list[str]]:
    if not tokens or not re.fullmatch(r"[\w.]+", tokens[0]):
        return None, ["?"]
    name, tokens = tokens[0].rsplit(".", 1)[-1], tokens[1:]
    args: list[Check | None] = []
    if tokens and tokens[0] == "[":
        tokens = tokens[1:]
        while True:
            check, tokens = _parse_union(tokens)
            args.append(check)
            if not tokens or tokens[0] not in ",]":
                return None, ["?"]
            closing, tokens = tokens[0] == "]", tokens[1:]
            if closing:
                break
    return _named(name, args), tokens


def _named(name: str, args: list[Check | None]) -> Check | None:
    if name in _SCALARS and not args:
        return _SCALARS[name]
    if name in _CONTAINERS:
        return _container(_CONTAINERS[name], args[-1] if args else None)
    if name == "Optional" and len(args) == 1:
        return _union([args[0], _SCALARS["None"]])
    if name == "Union" and args:
        return _union(args)
    return None


def _container(kind: type, item: Check | None) -> Check:
    if item is None:
        return lambda v: type(v) is kind
    if kind is list:
        return lambda v: type(v) is list and all(item(x) for x in v)
    return lambda v: type(v) is dict and all(item(x) for x in v.values())


def _union(checks: list[Check | None]) -> Check | None:
    if any(c is None for c in checks):
        return None  # one member is unknown: anything may fit it
    return lambda v: any(c(v) for c in checks)  # type: ignore[misc]


def _text(note: Any) -> str:
    if isinstance(note, type) and not getattr(note, "__args__", None):
        return note.__name__
    return repr(note).replace("typing.", "")
