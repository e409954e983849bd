"""A failed attempt's traceback: tickq writes the common one out itself (a fifth of what the
traceback module costs); it must read exactly as the traceback module prints it (no carets)."""

from __future__ import annotations

import traceback
from collections.abc import Callable

import pytest

from tickq.execute import _without_carets, format_error, plain_traceback


def as_python_prints_it(exc: BaseException) -> str:
    te = traceback.TracebackException.from_exception(exc, compact=True)
    return "".join(_without_carets(te).format())


def raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # the shapes include a BaseException
        return exc
    raise AssertionError("did not raise")


class Custom(Exception):
    pass


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no")


class Interrupted(BaseException):
    pass


def nested() -> None:
    def inner() -> None:
        raise KeyError("missing")

    inner()


def from_none() -> None:
    try:
        {}["x"]
    except KeyError:
        raise ValueError("replaced") from None


def no_source() -> None:
    exec(compile("def f():\n    raise RuntimeError('from a string')\nf()", "<generated>", "exec"))


def in_generator() -> None:
    def gen() -> object:
        yield 1
        raise RuntimeError("in a generator")

    list(gen())  # type: ignore[call-overload]


class Thing:
    def method(self) -> None:
        raise Custom("in a method")


def boom() -> None:
    raise RuntimeError("boom")


def loop(n: int) -> None:
    if n:
        loop(n - 1)
    raise RuntimeError("deep")


SHAPES: dict[str, Callable[[], object]] = {
    "simple": boom,
    "nested": nested,
    "lambda": lambda: 1 / 0,
    "from None": from_none,
    "no source line": no_source,
    "generator": in_generator,
    "method, own module": lambda: Thing().method(),
    "str() fails": lambda: (_ for _ in ()).throw(Unprintable()),
    "empty message": lambda: (_ for _ in ()).throw(RuntimeError()),
    "BaseException": lambda: (_ for _ in ()).throw(Interrupted("stop")),
    "multi-line message": lambda: (_ for _ in ()).throw(RuntimeError("one\ntwo")),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_written_out_as_python_prints_it(shape: str) -> None:
    exc = raised(SHAPES[shape])
    assert plain_traceback(exc) == as_python_prints_it(exc)


def test_an_exception_never_raised_is_its_line_alone() -> None:
    exc = RuntimeError("never raised")
    assert plain_traceback(exc) == as_python_prints_it(exc) == "RuntimeError: never raised\n"


def chained() -> None:
    try:
        boom()
    except RuntimeError as exc:
        raise ValueError("while handling") from exc


def context() -> None:
    try:
        boom()
    except RuntimeError:
        raise ValueError("during")  # noqa: B904 - the implicit context is the shape


def with_note() -> None:
    exc = RuntimeError("noted")
    exc.add_note("a note")
    raise exc


def group() -> None:
    raise ExceptionGroup("many", [RuntimeError("a"), KeyError("b")])


OTHERS: dict[str, Callable[[], object]] = {
    "cause": chained,
    "context": context,
    "note": with_note,
    "group": group,
    "repeated frames": lambda: loop(6),
    "syntax error": lambda: compile("def (", "<s>", "exec"),
}


@pytest.mark.parametrize("shape", OTHERS)
def test_every_other_shape_is_left_to_the_traceback_module(shape: str) -> None:
    exc = raised(OTHERS[shape])
    assert plain_traceback(exc) is None
    assert format_error(exc) == f"{type(exc).__name__}: {exc}\n{as_python_prints_it(exc)}"


def test_format_error_heads_the_traceback_with_the_error() -> None:
    exc = raised(boom)
    assert format_error(exc) == f"RuntimeError: boom\n{as_python_prints_it(exc)}"
