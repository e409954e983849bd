"""Internal: the job types a ``Queue`` knows (``JobDefinition``), how ``@q.job`` builds
them, and the ``JobFunction`` it returns (public as ``tickq.queue.JobFunction``).

The facade fills a ``Registry``; the drivers (cycle, pool, worker) only read it.
"""

from __future__ import annotations

from operator import attrgetter

from .controls import concurrency_key_of
from .errors import ConfigurationError
from .job import Frozen
from .job_options import DEFAULT_ENQUEUE_OPTIONS, EnqueueOptions, JobOptions, check_job_type
from .job_options import DEFAULT_MAX_SNOOZE as DEFAULT_MAX_SNOOZE
from .payload_types import PayloadTypes
from .signature import is_async, parameters, payload_names, signature_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from datetime import timedelta
    from typing import Any, Generic, ParamSpec, Protocol, TypeVar

    from .controls import Limit
    from .retry import Backoff

    P = ParamSpec("P")
    R = TypeVar("R")

    class Enqueuer(Protocol):
        """The ``Queue`` a job function enqueues through."""

        def _enqueue(
            self, job_type: str, payload: Mapping[str, Any], options: EnqueueOptions, conn: Any
        ) -> int: ...
        async def _enqueue_async(
            self, job_type: str, payload: Mapping[str, Any], options: EnqueueOptions, conn: Any
        ) -> int: ...

    class _Generic(Generic[P, R]): ...

else:
    P = R = None

    class _Generic:
        """``JobFunction[P, R]`` at run time, without ``typing.Generic``."""

        __slots__ = ()

        def __class_getitem__(cls, params: object) -> type:
            return cls


RESERVED_PARAMS = ("conn",)


class JobDefinition(Frozen):
    """How to run one job type; built by ``@q.job``. Its options (``JobOptions``, with the
    name resolved) read as its own attributes too: ``definition.max_attempts``..."""

    __slots__ = ()
    _fields = ("fn", "options", "is_async", "context_param", "accepted", "required", "types")
    _docs = {
        "accepted": "Keyword names the function takes; None: it takes **kwargs.",
        "types": "Its typed parameters' converters (``PayloadTypes``), built on first use.",
        "options": "The job type's ``JobOptions``; its name is the job type's.",
    }

    if TYPE_CHECKING:
        fn: Callable[..., Any]
        options: JobOptions
        is_async: bool
        context_param: str | None
        accepted: frozenset[str] | None
        required: frozenset[str]
        types: PayloadTypes
        # read from ``options``:
        name: str
        max_attempts: int
        backoff: Backoff
        queue: str
        priority: int
        timeout: float | None
        max_delay: timedelta | None
        max_snooze: timedelta | None
        concurrency: int | None
        rate_limit: str | None
        concurrency_key: str | Callable[[dict[str, Any]], str] | None
        limit: Limit | None

    def __new__(
        cls,
        fn: Callable[..., Any],
        options: JobOptions,
        is_async: bool,
        context_param: str | None,
        accepted: frozenset[str] | None = None,
        required: frozenset[str] = frozenset(),
        types: PayloadTypes | None = None,
    ) -> JobDefinition:
        types = types or PayloadTypes(fn, context_param)
        return tuple.__new__(cls, (fn, options, is_async, context_param, accepted, required,
                                   types))  # fmt: skip

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

    def key_of(self, payload: Mapping[str, Any]) -> str | None:
        """The concurrency key of a job with ``payload`` (None: the type has none); raises
        ``TypeError`` naming the job and the value at fault."""
        key = self.options.concurrency_key
        return None if key is None else concurrency_key_of(self.name, key, payload)

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


def _option(name: str) -> property:
    # attrgetter: read on every run of a job, and no Python frame of its own
    return property(attrgetter(f"options.{name}"), doc=f"``options.{name}``: see ``Queue.job``.")


for _name in (*JobOptions.fields, "limit"):  # a new option reads as an attribute too
    setattr(JobDefinition, _name, _option(_name))
del _name


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

    def rate_limited(self, job_type: str) -> bool:
        """True when ``job_type`` declares a rate limit (for the whole type or per key)."""
        definition = self._definitions.get(job_type)
        limit = definition.limit if definition is not None else None
        return limit is not None and limit.rate is not None

    def __contains__(self, job_type: object) -> bool:
        return job_type in self._definitions


def define(f: Callable[..., Any], options: JobOptions) -> JobDefinition:
    """The definition of job function ``f`` with ``options`` (already checked), named
    ``options.name`` or else after the function."""
    from .context import JobContext

    job_name = check_job_type(options.name or f.__name__)
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
    check_key_field(job_name, options.concurrency_key, accepted, context_param)
    named = options if options.name == job_name else options.replace(name=job_name)
    return JobDefinition(fn=f, options=named, is_async=is_async(f), context_param=context_param,
                         accepted=accepted, required=required)  # fmt: skip


def check_key_field(
    job_name: str, key: object, accepted: frozenset[str] | None, context_param: str | None
) -> None:
    """Raise ``ConfigurationError`` if ``concurrency_key`` names a field the job can't take."""
    if not isinstance(key, str) or (accepted is None and key != context_param):
        return
    if key not in (accepted or ()):
        raise ConfigurationError(
            f"concurrency_key {key!r} of job {job_name!r} is not one of its parameters "
            f"({', '.join(sorted(accepted or ())) or 'none'}); name a payload field it takes, "
            "or pass a function of the payload"
        )


def check_no_arguments_needed(definition: JobDefinition) -> None:
    """Raise ``ConfigurationError`` unless the job can run with no payload (a schedule's)."""
    try:
        definition.check_payload({})
    except TypeError:
        raise ConfigurationError(
            f"scheduled job {definition.name!r} is called with no arguments, but its "
            "function requires some; give them defaults (a JobContext parameter is fine)"
        ) from None
    try:
        definition.key_of({})
    except TypeError as exc:
        raise ConfigurationError(
            f"scheduled job {definition.name!r} is limited per key, but a schedule's jobs "
            f"have an empty payload ({exc}); give it a concurrency_key function that returns "
            "a key for an empty payload too"
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
        return self._queue._enqueue(self.name, payload, DEFAULT_ENQUEUE_OPTIONS, conn)

    async def enqueue_async(self, *, conn: Any = None, **payload: Any) -> int:
        """``enqueue`` for async code; ``conn=`` takes an async connection or session."""
        return await self._queue._enqueue_async(self.name, payload, DEFAULT_ENQUEUE_OPTIONS, conn)

    def with_options(self, **options: Any) -> _BoundEnqueue:
        """Enqueue with options: ``f.with_options(run_after=..., unique_key=...).enqueue(...)``
        (those of ``Queue.enqueue``, checked here)."""
        return _BoundEnqueue(self, EnqueueOptions(**options))

    def __repr__(self) -> str:
        return f"<tickq job {self.name!r}>"


class _BoundEnqueue:
    def __init__(self, fn: JobFunction[Any, Any], options: EnqueueOptions) -> None:
        self.fn, self.options = fn, options

    def enqueue(self, *, conn: Any = None, **payload: Any) -> int:
        return self.fn._queue._enqueue(self.fn.name, payload, self.options, conn)

    async def enqueue_async(self, *, conn: Any = None, **payload: Any) -> int:
        return await self.fn._queue._enqueue_async(self.fn.name, payload, self.options, conn)
