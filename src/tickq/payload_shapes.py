"""Internal: how typed payloads read annotations (``Builder``), and the codecs of the
structured types (dataclasses, ``TypedDict``s) whose fields convert one by one."""

from __future__ import annotations

import sys

from .payload import PLAIN_TYPES, Refused
from .payload_codecs import (
    LEAVES,
    PASS,
    Codec,
    dict_of,
    is_exactly,
    list_of,
    optional,
    plain,
    plain_union,
    pydantic_model,
    shown,
)  # fmt: skip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .payload_codecs import Convert


class Builder:
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
        if origin is typing.Annotated:
            return self.codec(args[0])
        if hasattr(note, "__supertype__"):  # NewType("UserId", UUID): a UUID at run time
            return self.codec(note.__supertype__)
        if note in PLAIN_TYPES or note is None:
            return plain(type(None) if note is None else note)
        if origin is typing.Union or type(note).__name__ == "UnionType":
            return self.union(args)
        if origin is list or note is list:
            return list_of(self.codec(args[0]) if args else PASS)
        if origin is dict or note is dict:
            return dict_of(self.codec(args[1]) if len(args) == 2 else PASS)
        if not isinstance(note, type):
            return PASS  # Literal, a TypeVar, ...: plain JSON, as today
        if note in self.classes:
            return self.classes[note]
        return self.of_class(note)

    def union(self, args: tuple[Any, ...]) -> Codec:
        members = [a for a in args if a is not type(None)]
        if len(members) == 1 and len(args) == 2:
            return optional(self.codec(members[0]))
        codecs = [self.codec(a) for a in args]
        # Only X | None converts: JSON can't tell two typed members apart (a date and a str
        # are both strings), so such a union stays plain JSON, as before.
        return PASS if any(c.typed for c in codecs) else plain_union(codecs)

    def of_class(self, cls: type) -> Codec:
        modules = sys.modules
        for name, make in LEAVES:
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
            return pydantic_model(cls)
        return PASS

    def structure(self, cls: type, shape: Callable[[], Codec]) -> Codec:
        """A codec for ``cls`` whose fields are built after it is known (recursion)."""
        box: list[Codec] = []
        self.classes[cls] = Codec(lambda v: box[0].dump(v), lambda v: box[0].load(v), True,
                                  cls.__name__)  # fmt: skip
        box.append(shape())
        self.classes[cls] = box[0]
        return box[0]


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
            raise Refused(f"expected {cls.__name__} as a JSON object, got {shown(value)}")
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


def _dataclass_shape(cls: type, builder: Builder) -> Callable[[], Codec]:
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
            if not is_exactly(value, cls):
                hint = f"; pass {cls.__name__}(**value)" if type(value) is dict else ""
                raise Refused(f"expected {cls.__name__}, got {shown(value)}{hint}")
            return dump_fields(value)

        def load(value: Any) -> Any:
            kwargs = load_fields(value)
            try:
                return cls(**kwargs)
            except Exception as exc:  # the class's own checks (__post_init__)
                raise Refused(f"{cls.__name__}(...) raised {type(exc).__name__}: {exc}") from None

        return Codec(dump, load, True, cls.__name__)

    return shape


def _typeddict_shape(cls: type, builder: Builder) -> Callable[[], Codec]:
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
                raise Refused(f"expected {cls.__name__} (a dict), got {shown(value)}")
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
