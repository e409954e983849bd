"""Internal: the job types a ``Queue`` knows (``JobDefinition``), how ``@q.job`` builds
them, and the ``JobFunction`` it returns (public as ``tickq.queue.JobFunction``).

The facade fills a ``Registry``; the drivers (cycle, pool, worker) only read it.
"""

from __future__ import annotations

from datetime import timedelta

from .errors import ConfigurationError
from .job import Frozen
from .job_options import check_job_type
from .signature import is_async, parameters, payload_names, signature_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, Generic, ParamSpec, Protocol, TypeVar

    from .controls import Limit
    from .retry import Backoff

    P = ParamSpec("P")
    R = TypeVar("R")

    class Enqueuer(Protocol):
        """The ``Queue`` a job function enqueues through."""

        def enqueue(self, *args: Any, **options: Any) -> int: ...
        async def enqueue_async(self, *args: Any, **options: Any) -> int: ...

    class _Generic(Generic[P, R]): ...

else:
    P = R = None

    class _Generic:
        """``JobFunction[P, R]`` at run time, without ``typing.Generic``."""

        __slots__ = ()

        def __class_getitem__(cls, params: object) -> type:
            return cls


RESERVED_PARAMS = ("conn",)
DEFAULT_MAX_SNOOZE = timedelta(hours=24)
"""How long a job may keep snoozing when ``@q.job`` doesn't say: long enough for the batch
APIs that promise results within a day, short enough that a job waiting for something that
never comes fails loudly (and alerts) the next day instead of polling forever."""


class JobDefinition(Frozen):
    """How to run one job type; built by ``@q.job``."""

    __slots__ = ()
    _fields = ("name", "fn", "max_attempts", "backoff", "queue", "priority", "timeout",
               "max_delay", "is_async", "context_param", "accepted", "required",
               "max_snooze", "limit")  # fmt: skip
    _docs = {
        "accepted": "Keyword names the function takes; None: it takes **kwargs.",
        "max_snooze": "How long the job may keep snoozing, from its first snooze (None: "
        "without bound).",
        "limit": "Its concurrency and rate limits (``controls.Limit``), or None.",
    }

    if TYPE_CHECKING:
        name: str
        fn: Callable[..., Any]
        max_attempts: int
        backoff: Backoff
        queue: str
        priority: int
        timeout: float | None
        max_delay: timedelta | None
        is_async: bool
        context_param: str | None
        accepted: frozenset[str] | None
        required: frozenset[str]
        max_snooze: timedelta | None
        limit: Limit | None

    def __new__(
        cls,
        name: str,
        fn: Callable[..., Any],
        max_attempts: int,
        backoff: Backoff,
        queue: str,
        priority: int,
        timeout: float | None,
        max_delay: timedelta | None,
        is_async: bool,
        context_param: str | None,
        accepted: frozenset[str] | None = None,
        required: frozenset[str] = frozenset(),
        max_snooze: timedelta | None = DEFAULT_MAX_SNOOZE,
        limit: Limit | None = None,
    ) -> JobDefinition:
        return tuple.__new__(cls, (
            name, fn, max_attempts, backoff, queue, priority, timeout, max_delay, is_async,
            context_param, accepted, required, max_snooze, limit,
        ))  # fmt: skip

    @property
    def effective_max_delay(self) -> timedelta:
        """How late an enqueued job may start: ``max_delay``, else ``DEFAULT_MAX_DELAY``."""
        from .schedule import DEFAULT_MAX_DELAY

        return self.max_delay or DEFAULT_MAX_DELAY

    def check_payload(self, payload: Mapping[str, Any]) -> None:
        """Raise ``TypeError`` now if the job function could never accept ``payload``, or a
        value doesn't fit a simple annotation (``a="1"`` for ``a: int``)."""
        from .hints import mismatch

        problem = self.unfit(payload) or mismatch(self.fn, payload)  # type: ignore[arg-type]
        if problem:
            raise TypeError(
                f"payload does not fit job {self.name!r}{signature_text(self.fn)}: {problem}"
            )

    def unfit(self, payload: Mapping[str, Any]) -> str | None:
        """What keeps the function from ever taking ``payload`` as keywords, or None."""
        keys = payload.keys()
        unexpected = sorted(keys - self.accepted) if self.accepted is not None else []
        missing = sorted(self.required - keys)
        problems = [f"unexpected {', '.join(map(repr, unexpected))}"] if unexpected else []
        problems += [f"missing {', '.join(map(repr, missing))}"] if missing else []
        if self.accepted is None and self.context_param in keys:  # **kwargs would lose it
            problems.append(f"{self.context_param!r} is the name of its JobContext parameter")
        return "; ".join(problems) or None


class Registry:
    """The job definitions of one Queue, by type name."""

    __slots__ = ("_definitions", "version")

    def __init__(self) -> None:
        self._definitions: dict[str, JobDefinition] = {}
        self.version = 0
        """Counts changes: a process declares its types' limits again when it moves."""

    def definition(self, job_type: str) -> JobDefinition | None:
        """How to run ``job_type``, or None when this process doesn't know it."""
        return self._definitions.get(job_type)

    def job_names(self) -> list[str]:
        """Every registered type name, in registration order."""
        return list(self._definitions)

    def limits(self) -> dict[str, Limit | None]:
        """Each registered type's limits (None: it declares none)."""
        return {name: d.limit for name, d in self._definitions.items()}

    def check_new(self, job_type: str) -> None:
        """Raise ``ConfigurationError`` if ``job_type`` is taken."""
        if job_type in self._definitions:
            raise ConfigurationError(f"a job named {job_type!r} is already registered")

    def add(self, definition: JobDefinition) -> None:
        self.check_new(definition.name)
        self._definitions[definition.name] = definition
        self.version += 1

    def remove(self, job_type: str) -> None:
        del self._definitions[job_type]
        self.version += 1

    def limited(self, job_type: str) -> bool:
        """True when ``job_type`` declares a concurrency or rate limit."""
        definition = self._definitions.get(job_type)
        return definition is not None and definition.limit is not None

    def __contains__(self, job_type: object) -> bool:
        return job_type in self._definitions


def define(f: Callable[..., Any], name: str | None, max_attempts: int, backoff: Backoff,
           queue: str, priority: int, timeout: float | None,
           max_delay: timedelta | None,
           max_snooze: timedelta | None = DEFAULT_MAX_SNOOZE,
           limit: Limit | None = None) -> JobDefinition:  # fmt: skip
    """The definition ``@q.job`` registers for ``f`` (options already checked)."""
    from .context import JobContext

    job_name = check_job_type(name or f.__name__)
    params = parameters(f)
    for reserved in RESERVED_PARAMS:
        if any(p[0] == reserved for p in params):
            raise ConfigurationError(
                f"job {job_name!r} has a parameter named {reserved!r}, which .enqueue() "
                "reserves for the caller's connection; rename the parameter"
            )
    context_param = next(
        (name for name, _, _, note in params if note in (JobContext, "JobContext")), None
    )
    accepted, required = payload_names(params, context_param)
    return JobDefinition(
        name=job_name, fn=f, max_attempts=max_attempts, backoff=backoff, queue=queue,
        priority=priority, timeout=timeout, max_delay=max_delay, is_async=is_async(f),
        context_param=context_param, accepted=accepted, required=required,
        max_snooze=max_snooze, limit=limit,
    )  # fmt: skip


def check_max_snooze(value: Any) -> timedelta | None:
    """``max_snooze``: a positive ``timedelta``, or None for no bound."""
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise TypeError(
            f"max_snooze must be a timedelta (or None for no bound), got "
            f"{type(value).__name__}: {value!r}"
        )
    if value <= timedelta(0):
        raise ConfigurationError(
            f"max_snooze must be a positive timedelta, got {value!r}; pass None to let the "
            "job snooze without bound"
        )
    return value


def check_no_arguments_needed(definition: JobDefinition) -> None:
    """Raise ``ConfigurationError`` unless the job can run with no payload (a schedule's)."""
    try:
        definition.check_payload({})
    except TypeError:
        raise ConfigurationError(
            f"scheduled job {definition.name!r} is called with no arguments, but its "
            "function requires some; give them defaults (a JobContext parameter is fine)"
        ) from None


class JobFunction(_Generic[P, R]):
    """A function registered with ``@q.job``: call it directly, or ``.enqueue(**kwargs)``."""

    def __init__(self, queue: Enqueuer, definition: JobDefinition) -> None:
        self._queue = queue
        self._definition = definition
        self.name = definition.name
        """The job type: the name this function's jobs are stored and enqueued under."""
        self.__wrapped__ = definition.fn
        self.__doc__ = definition.fn.__doc__
        self.__name__ = definition.fn.__name__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._definition.fn(*args, **kwargs)  # type: ignore[no-any-return]

    def enqueue(self, *, conn: Any = None, **payload: Any) -> int:
        """Enqueue with ``payload`` as keyword arguments; ``conn=`` joins your transaction."""
        return self._queue.enqueue(self.name, payload, conn=conn)

    async def enqueue_async(self, *, conn: Any = None, **payload: Any) -> int:
        """``enqueue`` for async code; ``conn=`` takes an async connection or session."""
        return await self._queue.enqueue_async(self.name, payload, conn=conn)

    def with_options(self, **options: Any) -> _BoundEnqueue:
        """Enqueue with options: ``f.with_options(run_after=..., unique_key=...).enqueue(...)``."""
        return _BoundEnqueue(self, options)

    def __repr__(self) -> str:
        return f"<tickq job {self.name!r}>"


class _BoundEnqueue:
    def __init__(self, fn: JobFunction[Any, Any], options: dict[str, Any]) -> None:
        self.fn, self.options = fn, options

    def enqueue(self, *, conn: Any = None, **payload: Any) -> int:
        return self.fn._queue.enqueue(self.fn.name, payload, conn=conn, **self.options)

    async def enqueue_async(self, *, conn: Any = None, **payload: Any) -> int:
        return await self.fn._queue.enqueue_async(self.fn.name, payload, conn=conn, **self.options)
