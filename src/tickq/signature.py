"""Internal: what a job function accepts: its parameters, read when ``@q.job`` registers it.

A plain function's parameters are read off its code object: ``inspect`` costs a waking host
milliseconds of import, and most job functions are plain functions. Anything else
(``functools.partial``, wrapped functions, callable objects) goes through
``inspect.signature``, which the plain-function path agrees with (a test checks).
"""

from __future__ import annotations

from types import FunctionType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Parameter = tuple[str, str, bool, Any]
    """(name, kind, has a default, annotation); kind is ``positional`` (positional-only),
    ``named`` (may be passed by keyword), ``*args`` or ``**kwargs``."""

CO_VARARGS, CO_VARKEYWORDS, CO_COROUTINE = 0x04, 0x08, 0x80


def parameters(fn: Callable[..., Any]) -> list[Parameter]:
    """``fn``'s parameters in order; the annotation is None where there is none."""
    if not _plain(fn):
        return _inspected(fn)
    code = fn.__code__
    names, flags = code.co_varnames, code.co_flags
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    defaults, kwdefaults = len(fn.__defaults__ or ()), fn.__kwdefaults__ or {}
    notes = fn.__annotations__
    found = [
        (name, "positional" if i < code.co_posonlyargcount else "named", i >= n_pos - defaults,
         notes.get(name))
        for i, name in enumerate(names[:n_pos])
    ]  # fmt: skip
    extra = n_pos + n_kw  # co_varnames: positional, keyword-only, then *args and **kwargs
    if flags & CO_VARARGS:
        found.append((names[extra], "*args", False, notes.get(names[extra])))
        extra += 1
    found += [
        (name, "named", name in kwdefaults, notes.get(name)) for name in names[n_pos : n_pos + n_kw]
    ]
    if flags & CO_VARKEYWORDS:
        found.append((names[extra], "**kwargs", False, notes.get(names[extra])))
    return found


def is_async(fn: Callable[..., Any]) -> bool:
    """True for an ``async def`` function."""
    if _plain(fn):
        return bool(fn.__code__.co_flags & CO_COROUTINE)
    import inspect

    return inspect.iscoroutinefunction(fn)


def payload_names(
    params: list[Parameter], context_param: str | None
) -> tuple[frozenset[str] | None, frozenset[str]]:
    """(names a payload may use or None for **kwargs, names it must use)."""
    others = [p for p in params if p[0] != context_param]
    named = [p for p in others if p[1] == "named"]
    required = frozenset(name for name, _, has_default, _ in named if not has_default)
    if any(kind == "**kwargs" for _, kind, _, _ in others):
        return None, required
    return frozenset(name for name, *_ in named), required


def signature_text(fn: Callable[..., Any]) -> str:
    """``(user_id: int, *, reason: str = '')``, for error messages."""
    import inspect

    return str(inspect.signature(fn))


def _plain(fn: Callable[..., Any]) -> bool:
    return (
        type(fn) is FunctionType
        and not hasattr(fn, "__wrapped__")
        and not hasattr(fn, "__signature__")
        and not hasattr(fn, "_is_coroutine_marker")  # inspect.markcoroutinefunction
    )


def _inspected(fn: Callable[..., Any]) -> list[Parameter]:
    import inspect

    kinds: dict[inspect._ParameterKind, str] = {inspect.Parameter.POSITIONAL_ONLY: "positional",
             inspect.Parameter.VAR_POSITIONAL: "*args",
             inspect.Parameter.VAR_KEYWORD: "**kwargs"}  # fmt: skip
    return [
        (p.name, kinds.get(p.kind, "named"), p.default is not p.empty,
         None if p.annotation is p.empty else p.annotation)
        for p in inspect.signature(fn).parameters.values()
    ]  # fmt: skip
