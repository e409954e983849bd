"""Internal: ``JobFunction``, what ``@q.job`` returns: the function, plus ``.enqueue()``.

Public as ``tickq.queue.JobFunction``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Generic, ParamSpec, Protocol, TypeVar

    from .registry import JobDefinition

    P = ParamSpec("P")
    R = TypeVar("R")

    class Enqueuer(Protocol):
        """The ``Queue`` a job function enqueues through."""

        def enqueue(self, job_type: str, payload: Any = None, **options: Any) -> int: ...
        async def enqueue_async(
            self, job_type: str, payload: Any = None, **options: Any
        ) -> int: ...

    class _Generic(Generic[P, R]): ...

else:
    P = R = None

    class _Generic:
        """``JobFunction[P, R]`` at run time, without ``typing.Generic``."""

        __slots__ = ()

        def __class_getitem__(cls, params: object) -> type:
            return cls


class JobFunction(_Generic[P, R]):
    """A function registered with ``@q.job``: call it directly, or ``.enqueue(**kwargs)``."""

    def __init__(self, queue: Enqueuer, definition: JobDefinition) -> None:
        self.queue = queue
        self.definition = definition
        self.name = definition.name
        self.__wrapped__ = definition.fn
        self.__doc__ = definition.fn.__doc__
        self.__name__ = definition.fn.__name__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.definition.fn(*args, **kwargs)  # type: ignore[no-any-return]

    def enqueue(self, *, conn: Any = None, **payload: Any) -> int:
        """Enqueue with ``payload`` as keyword arguments; ``conn=`` joins your transaction."""
        return self.queue.enqueue(self.name, payload, conn=conn)

    async def enqueue_async(self, *, conn: Any = None, **payload: Any) -> int:
        """``enqueue`` for async code; ``conn=`` takes an async connection or session."""
        return await self.queue.enqueue_async(self.name, payload, conn=conn)

    def with_options(self, **options: Any) -> _BoundEnqueue:
        """Enqueue with options: ``f.with_options(run_after=..., unique_key=...).enqueue(...)``."""
        return _BoundEnqueue(self, options)

    def __repr__(self) -> str:
        return f"<tickq job {self.name!r}>"


class _BoundEnqueue:
    def __init__(self, fn: JobFunction[Any, Any], options: dict[str, Any]) -> None:
        self.fn, self.options = fn, options

    def enqueue(self, *, conn: Any = None, **payload: Any) -> int:
        return self.fn.queue.enqueue(self.fn.name, payload, conn=conn, **self.options)

    async def enqueue_async(self, *, conn: Any = None, **payload: Any) -> int:
        return await self.fn.queue.enqueue_async(self.fn.name, payload, conn=conn, **self.options)
