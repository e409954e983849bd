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

from .payload import PLAIN_TYPES, Refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from .payload_codecs import Codec


class PayloadTypes:
    """The typed parameters of one job function, built on first use."""

    __slots__ = ("_fields", "_fn", "_skip")

    def __init__(self, fn: Callable[..., Any], skip: str | None = None) -> None:
        self._fn, self._skip = fn, skip
        self._fields: dict[str, Codec] | None = None

    def __repr__(self) -> str:
        built = "not built yet" if self._fields is None else sorted(self._fields)
        return f"PayloadTypes({getattr(self._fn, '__name__', self._fn)!r}: {built})"

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
    from .payload_shapes import Builder  # and the codecs: only typed parameters need them

    builder = Builder()
    codecs = {}
    for name, note in _resolved(fn, wanted).items():
        try:
            codecs[name] = builder.codec(note)
        except Exception as exc:  # a dataclass field's annotation names an unknown type...
            from .errors import ConfigurationError

            shown = getattr(note, "__qualname__", None) or repr(note)
            raise ConfigurationError(
                f"payload.{name} of {getattr(fn, '__name__', fn)!r}: tickq can't read the "
                f"types in its annotation {shown} ({type(exc).__name__}: {exc}); import them "
                "at module level, not only under TYPE_CHECKING"
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
