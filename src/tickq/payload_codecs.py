"""Internal: the codecs of typed payloads, one per annotation: ``dump`` a Python value to its
JSON form, refusing one that does not fit; ``load`` the JSON form back, refusing JSON that
does not fit either. Leaves (datetime, date, Decimal, UUID, Enum, Pydantic models) and
containers (list, dict, optional); ``payload_shapes`` builds them from annotations.

A leaf's module (``datetime``, ``decimal``...) is the one the job's own module imported:
nothing here imports it first.
"""

from __future__ import annotations

from .payload import PLAIN_TYPES, Refused, _short

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Convert = Callable[[Any], Any]


class Codec:
    """How one annotation travels: ``dump`` a Python value to JSON (refusing what does not
    fit), ``load`` its JSON form back (refusing JSON that does not fit either)."""

    __slots__ = ("dump", "load", "text", "typed")

    def __init__(self, dump: Convert, load: Convert, typed: bool, text: str) -> None:
        self.dump, self.load, self.typed, self.text = dump, load, typed, text


def _same(value: Any) -> Any:
    return value


PASS = Codec(_same, _same, False, "Any")
"""An annotation tickq does not convert: the value is plain JSON, checked as today."""

# -- leaves ---------------------------------------------------------------------------------


def plain(kind: type) -> Codec:
    name = {"NoneType": "None"}.get(kind.__name__, kind.__name__)

    def check(value: Any) -> Any:
        if type(value) is kind or (kind is float and type(value) is int):
            return value
        raise Refused(f"expected {name}, got {shown(value)}")

    def load(value: Any) -> Any:
        return float(check(value)) if kind is float else check(value)

    return Codec(check, load, False, name)


def plain_union(codecs: list[Codec]) -> Codec:
    text = " | ".join(c.text for c in codecs)

    def check(value: Any) -> Any:
        for codec in codecs:
            try:
                return codec.dump(value)
            except Refused:
                pass
        raise Refused(f"expected {text}, got {shown(value)}")

    return Codec(check, check, False, text)


def _datetime(module: Any, cls: Any) -> Codec | None:
    if cls is not module.datetime:
        return None
    datetime = module.datetime

    def dump(value: Any) -> Any:
        if not is_exactly(value, datetime):
            raise Refused(f"expected datetime, got {shown(value)}{_iso_hint(value)}")
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
        if not is_exactly(value, date):
            hint = "; pass value.date()" if isinstance(value, module.datetime) else ""
            raise Refused(f"expected date, got {shown(value)}{hint}")
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
        if not is_exactly(value, Decimal):
            hints = {float: "; pass Decimal(text), not a float", str: "; pass Decimal(value)"}
            raise Refused(f"expected Decimal, got {shown(value)}{hints.get(type(value), '')}")
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
        if not is_exactly(value, UUID):
            hint = "; pass UUID(text)" if type(value) is str else ""
            raise Refused(f"expected UUID, got {shown(value)}{hint}")
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
        if not is_exactly(value, cls):
            hint = f"; pass {cls.__name__}({value!r})" if value in allowed else ""
            raise Refused(f"expected a {cls.__name__} member, got {shown(value)}{hint}")
        found = value.value
        if type(found) not in PLAIN_TYPES:
            raise Refused(f"{value!r} has a {type(found).__name__} value, which JSON can't carry")
        return found

    def load(value: Any) -> Any:
        if type(value) in PLAIN_TYPES:
            try:
                return cls(value)
            except ValueError:
                pass
        values = ", ".join(map(repr, allowed[:10]))
        raise Refused(f"{shown(value)} is not a {cls.__name__} value (one of {values})")

    return Codec(dump, load, True, cls.__name__)


LEAVES = (("datetime", _datetime), ("datetime", _date), ("decimal", _decimal),
           ("uuid", _uuid), ("enum", _enum))  # fmt: skip


# -- containers -----------------------------------------------------------------------------


def list_of(item: Codec) -> Codec:
    def each(convert: Convert) -> Convert:
        def run(value: Any) -> list[Any]:
            if type(value) is not list:
                hint = "; pass a list" if isinstance(value, tuple | set | frozenset) else ""
                raise Refused(f"expected list[{item.text}], got {shown(value)}{hint}")
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


def dict_of(item: Codec) -> Codec:
    def each(convert: Convert) -> Convert:
        def run(value: Any) -> dict[str, Any]:
            if type(value) is not dict:
                raise Refused(f"expected dict[str, {item.text}], got {shown(value)}")
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


def optional(item: Codec) -> Codec:
    def dump(value: Any) -> Any:
        return None if value is None else item.dump(value)

    def load(value: Any) -> Any:
        return None if value is None else item.load(value)

    return Codec(dump, load, item.typed, f"{item.text} | None")


def pydantic_model(cls: Any) -> Codec:
    def dump(value: Any) -> Any:
        if not is_exactly(value, cls):
            hint = f"; pass {cls.__name__}.model_validate(value)" if type(value) is dict else ""
            raise Refused(f"expected {cls.__name__}, got {shown(value)}{hint}")
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


def is_exactly(value: Any, kind: Any) -> bool:
    """``type(value) is kind``, without narrowing ``value`` for mypy (``kind`` is Any)."""
    return type(value) is kind


def _text(value: Any, what: str) -> str:
    if type(value) is not str:
        raise Refused(f"expected {what}, got {shown(value)}")
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


def shown(value: Any) -> str:
    return f"{type(value).__name__} {_short(value)}"
