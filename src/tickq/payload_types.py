"""Internal: typed payloads. A job parameter annotated with a dataclass, a ``TypedDict``, an
``Enum``, ``datetime``, ``date``, ``Decimal``, ``UUID`` or a Pydantic model (or ``list[X]``,
``dict[str, X]``, ``X | None`` of those) is converted to JSON at enqueue and rebuilt before
the job function is called. See docs/payload-types.md for the mapping.

Each job definition builds its converters once, on first use (``PayloadTypes.fields``); a job
with no such annotation pays one attribute read per enqueue and per run. Nothing here
imports ``typing``, ``dataclasses`` or Pydantic until a job's annotations need it: a type
annotated on a job was imported by the job's own module already.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Convert = Callable[[Any], Any]

PLAIN_TYPES = (str, int, float, bool, type(None))


class Refused(Exception):
    """A value that does not fit its annotation; ``path`` is filled in on the way out."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str] = []

    def where(self, root: str) -> str:
        return root + "".join(reversed(self.path))


class Codec:
    """How one annotation travels: ``dump`` a Python value to JSON (refusing what does not
    fit), ``load`` its JSON form back (refusing JSON that does not fit either)."""

    __slots__ = ("dump", "load", "text", "typed")

    def __init__(self, dump: Convert, load: Convert, typed: bool, text: str) -> None:
        self.dump, self.load, self.typed, self.text = dump, load, typed, text


class PayloadTypes:
    """The typed parameters of one job function, built on first use."""

    __slots__ = ("_fields", "_fn", "_skip")

    def __init__(self, fn: Callable[..., Any], skip: str | None = None) -> None:
        self._fn, self._skip = fn, skip
        self._fields: dict[str, Codec] | None = None

    def fields(self) -> dict[str, Codec]:
        """The parameters that convert, by name (empty: the payload is plain JSON)."""
        found = self._fields
        if found is None:
            found = self._fields = typed_parameters(self._fn, self._skip)
        return found

    def dump(self, payload: Mapping[str, Any], job_type: str, external: bool) -> dict[str, Any]:
        """``payload`` with its typed values as JSON; ``external``: it is JSON already (a
        webhook's body, the CLI), checked against the annotations and stored canonically."""
        fields = self.fields()
        out = dict(payload)
        for name, codec in fields.items():
            if name in out:
                value = out[name]
                out[name] = _at(codec, value, name, job_type, external)
        return out

    def dump_call(
        self, args: list[Any], kwargs: dict[str, Any], job_type: str
    ) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments (Django's tasks) with typed values as JSON."""
        return self._call(args, kwargs, job_type, False)

    def load_call(
        self, args: list[Any], kwargs: dict[str, Any], job_type: str
    ) -> tuple[list[Any], dict[str, Any]]:
        """``dump_call``'s JSON rebuilt (``TypeError`` naming the argument at fault)."""
        return self._call(args, kwargs, job_type, None)

    def _call(
        self, args: list[Any], kwargs: dict[str, Any], job_type: str, external: bool | None
    ) -> tuple[list[Any], dict[str, Any]]:
        fields = self.fields()
        if not fields:
            return args, kwargs
        from .signature import parameters

        names = [n for n, kind, *_ in parameters(self._fn) if kind in _BY_NAME and n != self._skip]
        args = [
            _at(fields[names[i]], a, names[i], job_type, external)
            if i < len(names) and names[i] in fields else a
            for i, a in enumerate(args)
        ]  # fmt: skip
        converted = {n: _at(fields[n], v, n, job_type, external) for n, v in kwargs.items()
                     if n in fields}  # fmt: skip
        return args, {**kwargs, **converted}

    def load(self, payload: dict[str, Any], job_type: str) -> dict[str, Any]:
        """The stored ``payload`` with its typed values rebuilt (``TypeError`` naming the
        field when a stored value does not fit)."""
        out = dict(payload)
        for name, codec in self.fields().items():
            if name in out:
                out[name] = _at(codec, out[name], name, job_type, None)
        return out


def _at(codec: Codec, value: Any, name: str, job_type: str, external: bool | None) -> Any:
    """``value`` dumped (``external``: loaded first, as JSON from outside), or loaded
    (None); a ``Refused`` becomes the ``TypeError`` users read."""
    try:
        if external is None:
            return codec.load(value)
        return codec.dump(codec.load(value) if external else value)
    except Refused as refused:
        refused.path.append("." + name)
        where = refused.where("payload")
        raise TypeError(f"{where}: {refused.what} (job {job_type!r})") from None


def typed_parameters(fn: Callable[..., Any], skip: str | None) -> dict[str, Codec]:
    """The codecs of ``fn``'s keyword parameters whose annotation converts."""
    from .signature import parameters

    wanted = [
        (name, note)
        for name, kind, _, note in parameters(fn)
        if kind in _BY_NAME and name != skip and not plain_note(note)
    ]
    if not wanted:
        return {}  # unannotated, or simple annotations only: today's plain-JSON rules
    builder = _Builder()
    codecs = {}
    for name, note in _resolved(fn, wanted).items():
        try:
            codecs[name] = builder.codec(note)
        except Exception as exc:  # a dataclass field's annotation names an unknown type...
            from .errors import ConfigurationError

            raise ConfigurationError(
                f"payload.{name}: tickq can't read the types in its annotation {note!r} "
                f"({type(exc).__name__}: {exc}); define or import them at module level"
            ) from None
    return {name: codec for name, codec in codecs.items() if codec.typed}


_BY_NAME = ("named", "positional")  # a Django task's positional arguments convert too


def plain_note(note: Any) -> bool:
    """True when ``note`` (an object or the text of one) names only JSON's own types:
    nothing to convert, and no need to import ``typing`` to find that out."""
    if note is None or isinstance(note, str):
        import re

        names = re.findall(r"[A-Za-z_][\w.]*", note or "")
        return all(name.rsplit(".", 1)[-1] in _PLAIN_NAMES for name in names)
    if note in PLAIN_TYPES or note in (list, dict, object):
        return True
    args = getattr(note, "__args__", None)
    if args is None:
        return repr(note) == "typing.Any"
    origin = getattr(note, "__origin__", None)
    union = type(note).__name__ == "UnionType" or repr(origin) == "typing.Union"
    return (union or origin in (list, dict)) and all(plain_note(a) for a in args)


_PLAIN_NAMES = frozenset(
    ("int", "float", "str", "bool", "None", "NoneType", "list", "List", "dict", "Dict",
     "Optional", "Union", "Any", "object")
)  # fmt: skip


def _resolved(fn: Callable[..., Any], wanted: list[tuple[str, Any]]) -> dict[str, Any]:
    """The annotations as objects: ``from __future__ import annotations`` keeps strings. One
    that can't be resolved (a name imported only under TYPE_CHECKING) is left out."""
    import inspect
    import typing

    target = inspect.unwrap(getattr(fn, "func", fn))
    try:
        hints = typing.get_type_hints(target)
    except Exception:
        hints = {}
    space = getattr(target, "__globals__", {})
    found = {}
    for name, note in wanted:
        if name in hints:
            found[name] = hints[name]
        elif not isinstance(note, str):
            found[name] = note
        else:
            try:
                found[name] = eval(note, dict(space))
            except Exception:
                continue
    return found


def _same(value: Any) -> Any:
    return value


PASS = Codec(_same, _same, False, "Any")
"""An annotation tickq does not convert: the value is plain JSON, checked as today."""


class _Builder:
    """Builds codecs, once per class (a dataclass may refer to itself)."""

    def __init__(self) -> None:
        self.classes: dict[Any, Codec] = {}
        import typing

        self.typing = typing

    def codec(self, note: Any) -> Codec:
        typing = self.typing
        origin, args = typing.get_origin(note), typing.get_args(note)
        if note is typing.Any or note is object:
            return PASS
        if note in PLAIN_TYPES or note is None:
            return _plain(type(None) if note is None else note)
        if origin is typing.Union or type(note).__name__ == "UnionType":
            return self.union(args)
        if origin is list or note is list:
            return _list(self.codec(args[0]) if args else PASS)
        if origin is dict or note is dict:
            return _dict(self.codec(args[1]) if len(args) == 2 else PASS)
        if not isinstance(note, type):
            return PASS  # Literal, a TypeVar, ...: plain JSON, as today
        if note in self.classes:
            return self.classes[note]
        return self.of_class(note)

    def union(self, args: tuple[Any, ...]) -> Codec:
        members = [a for a in args if a is not type(None)]
        if len(members) == 1 and len(args) == 2:
            return _optional(self.codec(members[0]))
        codecs = [self.codec(a) for a in args]
        # Only X | None converts: JSON can't tell two typed members apart (a date and a str
        # are both strings), so such a union stays plain JSON, as before.
        return PASS if any(c.typed for c in codecs) else _plain_union(codecs)

    def of_class(self, cls: type) -> Codec:
        modules = sys.modules
        for name, make in _LEAVES:
            module = modules.get(name)
            leaf = make(module, cls) if module is not None else None
            if leaf is not None:
                return leaf
        if hasattr(cls, "__dataclass_fields__"):
            return self.structure(cls, _dataclass_shape(cls, self))
        if self.typing.is_typeddict(cls):
            return self.structure(cls, _typeddict_shape(cls, self))
        pydantic = modules.get("pydantic")
        if pydantic is not None and issubclass(cls, pydantic.BaseModel):
            return _pydantic(cls)
        return PASS

    def structure(self, cls: type, shape: Callable[[], Codec]) -> Codec:
        """A codec for ``cls`` whose fields are built after it is known (recursion)."""
        box: list[Codec] = []
        self.classes[cls] = Codec(lambda v: box[0].dump(v), lambda v: box[0].load(v), True,
                                  cls.__name__)  # fmt: skip
        box.append(shape())
        self.classes[cls] = box[0]
        return box[0]


# -- leaves ---------------------------------------------------------------------------------


def _plain(kind: type) -> Codec:
    name = {"NoneType": "None"}.get(kind.__name__, kind.__name__)

    def check(value: Any) -> Any:
        if type(value) is kind or (kind is float and type(value) is int):
            return value
        raise Refused(f"expected {name}, got {_shown(value)}")

    def load(value: Any) -> Any:
        return float(check(value)) if kind is float else check(value)

    return Codec(check, load, False, name)


def _plain_union(codecs: list[Codec]) -> Codec:
    text = " | ".join(c.text for c in codecs)

    def check(value: Any) -> Any:
        for codec in codecs:
            try:
                return codec.dump(value)
            except Refused:
                pass
        raise Refused(f"expected {text}, got {_shown(value)}")

    return Codec(check, check, False, text)


def _datetime(module: Any, cls: Any) -> Codec | None:
    if cls is not module.datetime:
        return None
    datetime = module.datetime

    def dump(value: Any) -> Any:
        if not _is(value, datetime):
            raise Refused(f"expected datetime, got {_shown(value)}{_iso_hint(value)}")
        if value.utcoffset() is None:
            raise Refused(
                f"is a naive datetime ({value.isoformat()}); tickq keeps times in UTC, so pass "
                "an aware one, e.g. datetime.now(UTC) or value.replace(tzinfo=UTC)"
            )
        key = getattr(value.tzinfo, "key", None)  # a zoneinfo.ZoneInfo keeps its name
        return value.isoformat() + (f"[{key}]" if isinstance(key, str) else "")

    def load(value: Any) -> Any:
        text = _text(value, "an ISO 8601 date and time with an offset")
        key = None
        if text.endswith("]") and "[" in text:
            text, key = text[:-1].split("[", 1)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise Refused(f"{value!r} is not an ISO 8601 date and time") from None
        if parsed.utcoffset() is None:
            raise Refused(f"{value!r} has no UTC offset; send one, e.g. {text}+00:00")
        return parsed if key is None else _in_zone(parsed, _zone(key))

    return Codec(dump, load, True, "datetime")


def _date(module: Any, cls: Any) -> Codec | None:
    if cls is not module.date:
        return None
    date = module.date

    def dump(value: Any) -> Any:
        if not _is(value, date):
            hint = "; pass value.date()" if isinstance(value, module.datetime) else ""
            raise Refused(f"expected date, got {_shown(value)}{hint}")
        return value.isoformat()

    def load(value: Any) -> Any:
        try:
            return date.fromisoformat(_text(value, "an ISO 8601 date (YYYY-MM-DD)"))
        except ValueError:
            raise Refused(f"{value!r} is not an ISO 8601 date (YYYY-MM-DD)") from None

    return Codec(dump, load, True, "date")


def _decimal(module: Any, cls: Any) -> Codec | None:
    if cls is not module.Decimal:
        return None
    Decimal = module.Decimal

    def dump(value: Any) -> str:
        if not _is(value, Decimal):
            hint = "; pass Decimal(text), not a float" if type(value) is float else ""
            raise Refused(f"expected Decimal, got {_shown(value)}{hint or _iso_hint(value)}")
        if not value.is_finite():
            raise Refused(f"is {value!r}; pass a finite Decimal")
        return str(value)  # keeps every digit and the exponent: Decimal('1.10') stays 1.10

    def load(value: Any) -> Any:
        if type(value) is int:
            return Decimal(value)
        try:
            found = Decimal(_text(value, 'a decimal number as a string, e.g. "10.50"'))
        except ArithmeticError:
            raise Refused(f"{value!r} is not a decimal number") from None
        if not found.is_finite():
            raise Refused(f"is {value!r}; send a finite decimal number")
        return found

    return Codec(dump, load, True, "Decimal")


def _uuid(module: Any, cls: Any) -> Codec | None:
    if cls is not module.UUID:
        return None
    UUID = module.UUID

    def dump(value: Any) -> str:
        if not _is(value, UUID):
            hint = "; pass UUID(text)" if type(value) is str else ""
            raise Refused(f"expected UUID, got {_shown(value)}{hint}")
        return str(value)

    def load(value: Any) -> Any:
        try:
            return UUID(_text(value, "a UUID string"))
        except ValueError:
            raise Refused(f"{value!r} is not a UUID") from None

    return Codec(dump, load, True, "UUID")


def _enum(module: Any, cls: Any) -> Codec | None:
    if not issubclass(cls, module.Enum):
        return None
    allowed = [m.value for m in cls.__members__.values()]

    def dump(value: Any) -> Any:
        if not _is(value, cls):
            hint = f"; pass {cls.__name__}({value!r})" if value in allowed else ""
            raise Refused(f"expected a {cls.__name__} member, got {_shown(value)}{hint}")
        found = value.value
        if type(found) not in PLAIN_TYPES:
            raise Refused(f"{value!r} has a {type(found).__name__} value, which JSON can't carry")
        return found

    def load(value: Any) -> Any:
        try:
            return cls(value) if type(value) in PLAIN_TYPES else None
        except ValueError:
            pass
        shown = ", ".join(map(repr, allowed[:10]))
        raise Refused(f"{_shown(value)} is not a {cls.__name__} value (one of {shown})")

    return Codec(dump, load, True, cls.__name__)


_LEAVES = (("datetime", _datetime), ("datetime", _date), ("decimal", _decimal),
           ("uuid", _uuid), ("enum", _enum))  # fmt: skip


# -- containers -----------------------------------------------------------------------------


def _list(item: Codec) -> Codec:
    def each(convert: Convert) -> Convert:
        def run(value: Any) -> list[Any]:
            if type(value) is not list:
                hint = "; pass a list" if isinstance(value, tuple | set | frozenset) else ""
                raise Refused(f"expected list[{item.text}], got {_shown(value)}{hint}")
            i = 0
            try:
                out = []
                for i, x in enumerate(value):  # noqa: B007 - i names the item at fault
                    out.append(convert(x))
                return out
            except Refused as refused:
                refused.path.append(f"[{i}]")
                raise

        return run

    return Codec(each(item.dump), each(item.load), item.typed, f"list[{item.text}]")


def _dict(item: Codec) -> Codec:
    def each(convert: Convert) -> Convert:
        def run(value: Any) -> dict[str, Any]:
            if type(value) is not dict:
                raise Refused(f"expected dict[str, {item.text}], got {_shown(value)}")
            out = {}
            for key, x in value.items():
                if type(key) is not str:
                    raise Refused(f"has a key of type {type(key).__name__}; pass str keys")
                try:
                    out[key] = convert(x)
                except Refused as refused:
                    refused.path.append(f"[{key!r}]")
                    raise
            return out

        return run

    return Codec(each(item.dump), each(item.load), item.typed, f"dict[str, {item.text}]")


def _optional(item: Codec) -> Codec:
    def dump(value: Any) -> Any:
        return None if value is None else item.dump(value)

    def load(value: Any) -> Any:
        return None if value is None else item.load(value)

    return Codec(dump, load, item.typed, f"{item.text} | None")


def _fields_of(
    cls: type, names: dict[str, Codec], required: frozenset[str], read: Callable[[Any, str], Any]
) -> tuple[Convert, Convert]:
    """Dump (reading each field with ``read``) and load (a checked dict of JSON fields)."""

    def dump(value: Any) -> dict[str, Any]:
        out = {}
        for name, codec in names.items():
            try:
                found = read(value, name)
                if found is not _MISSING:
                    out[name] = codec.dump(found)
            except Refused as refused:
                refused.path.append(f".{name}")
                raise
        return out

    def load(value: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise Refused(f"expected {cls.__name__} as a JSON object, got {_shown(value)}")
        _keys_fit(cls, names, required, value)
        out = {}
        for name, x in value.items():
            try:
                out[name] = names[name].load(x)
            except Refused as refused:
                refused.path.append(f".{name}")
                raise
        return out

    return dump, load


def _keys_fit(
    cls: type, names: dict[str, Codec], required: frozenset[str], value: dict[str, Any]
) -> None:
    unknown = [k for k in value if k not in names]
    if unknown:
        raise Refused(f"{cls.__name__} has no field {unknown[0]!r}; remove it")
    missing = sorted(k for k in required if k not in value)
    if missing:
        raise Refused(f"{cls.__name__} misses required field {missing[0]!r}")


_MISSING = object()


def _dataclass_shape(cls: type, builder: _Builder) -> Callable[[], Codec]:
    def shape() -> Codec:
        import dataclasses

        hints = builder.typing.get_type_hints(cls)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = {f.name: builder.codec(hints.get(f.name, builder.typing.Any)) for f in fields}
        required = frozenset(
            f.name for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )  # fmt: skip
        dump_fields, load_fields = _fields_of(cls, names, required, getattr)

        def dump(value: Any) -> Any:
            if not _is(value, cls):
                hint = f"; pass {cls.__name__}(**value)" if type(value) is dict else ""
                raise Refused(f"expected {cls.__name__}, got {_shown(value)}{hint}")
            return dump_fields(value)

        def load(value: Any) -> Any:
            kwargs = load_fields(value)
            try:
                return cls(**kwargs)
            except Exception as exc:  # the class's own checks (__post_init__)
                raise Refused(f"{cls.__name__}(...) raised {type(exc).__name__}: {exc}") from None

        return Codec(dump, load, True, cls.__name__)

    return shape


def _typeddict_shape(cls: type, builder: _Builder) -> Callable[[], Codec]:
    def shape() -> Codec:
        typing = builder.typing
        hints = typing.get_type_hints(cls)
        names = {name: builder.codec(note) for name, note in hints.items()}
        required = frozenset(
            name for name, note in typing.get_type_hints(cls, include_extras=True).items()
            if _required(typing, note, name in cls.__required_keys__)  # type: ignore[attr-defined]
        )  # fmt: skip

        def read(value: dict[str, Any], name: str) -> Any:
            return value.get(name, _MISSING)

        dump_fields, load = _fields_of(cls, names, required, read)

        def dump(value: Any) -> Any:
            if type(value) is not dict:
                raise Refused(f"expected {cls.__name__} (a dict), got {_shown(value)}")
            _keys_fit(cls, names, required, value)
            return dump_fields(value)

        return Codec(dump, load, True, cls.__name__)

    return shape


def _required(typing: Any, note: Any, default: bool) -> bool:
    """Whether a TypedDict key is required: Python 3.11 misses ``NotRequired[...]`` written
    as text (``from __future__ import annotations``), so read the resolved note."""
    origin = typing.get_origin(note)
    if origin is typing.Annotated:
        origin = typing.get_origin(typing.get_args(note)[0])
    return {typing.Required: True, typing.NotRequired: False}.get(origin, default)


def _pydantic(cls: Any) -> Codec:
    def dump(value: Any) -> Any:
        if not _is(value, cls):
            hint = f"; pass {cls.__name__}.model_validate(value)" if type(value) is dict else ""
            raise Refused(f"expected {cls.__name__}, got {_shown(value)}{hint}")
        return value.model_dump(mode="json")

    def load(value: Any) -> Any:
        try:
            return cls.model_validate(value)
        except ValueError as exc:  # pydantic's ValidationError
            errors = exc.errors() if hasattr(exc, "errors") else []
            if not errors:
                raise Refused(str(exc)) from None
            first = errors[0]
            refused = Refused(f"{first['msg']} (input {_short(first.get('input'))})")
            refused.path = [f"[{p}]" if isinstance(p, int) else f".{p}"
                            for p in reversed(first.get("loc", ()))]  # fmt: skip
            raise refused from None

    return Codec(dump, load, True, cls.__name__)


# -- text -----------------------------------------------------------------------------------


def _is(value: Any, kind: Any) -> bool:
    """``type(value) is kind``, without narrowing ``value`` for mypy (``kind`` is Any)."""
    return type(value) is kind


def _text(value: Any, what: str) -> str:
    if type(value) is not str:
        raise Refused(f"expected {what}, got {_shown(value)}")
    return value


def _zone(key: str) -> Any:
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(key)
    except Exception:
        raise Refused(f"names the unknown time zone {key!r}") from None


def _in_zone(parsed: Any, zone: Any) -> Any:
    """``parsed`` (a fixed offset) in ``zone`` with the same wall time and offset, so a time
    in a repeated or skipped hour comes back as it was (its ``fold`` too)."""
    for fold in (0, 1):
        back = parsed.replace(tzinfo=zone, fold=fold)
        if back.utcoffset() == parsed.utcoffset():
            return back
    return parsed.astimezone(zone)  # the zone's rules changed since: the same instant


def _iso_hint(value: Any) -> str:
    return "; pass the parsed value, not its text" if type(value) is str else ""


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {_short(value)}"


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."
