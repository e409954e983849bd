"""Internal: the options of a job, checked once where a caller passes them, so every backend
stores the same thing and no stored row can stop the queue. Types are refused with
``TypeError``, values with ``ConfigurationError`` (a ``ValueError``); each message names
the option.

``JobOptions`` are a job type's (``@q.job``, ``@q.webhook``, a Django task), ``EnqueueOptions``
one enqueue's (``q.enqueue``, ``fn.with_options``...). Each entry point builds one once and
hands it on whole, so no layer re-spells (or forgets) an option.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .clock import require_aware
from .controls import check_concurrency_key, job_limit
from .errors import ConfigurationError
from .retry import as_backoff

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Self

    from .controls import Limit
    from .retry import Backoff

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
"""What an ``INTEGER`` column holds on both backends: priority and max_attempts live there."""
UNIQUE_SCOPES = ("active", "all")
MAX_NAME_BYTES = 1000
"""The longest job type or queue name, in bytes of UTF-8, on both backends: Postgres
indexes them (one B-tree entry holds ~2,700 bytes, and some hold a type and a queue), and a
queue name is the payload of ``NOTIFY`` (under 8,000 bytes)."""
MAX_UNIQUE_KEY_BYTES = 2000
"""The longest ``unique_key``, in bytes of UTF-8, on both backends (a unique index holds it)."""
DEFAULT_MAX_SNOOZE = timedelta(hours=24)
"""How long a job may keep snoozing when ``@q.job`` doesn't say: long enough for the batch
APIs that promise results within a day, short enough that a job waiting for something that
never comes fails loudly (and alerts) the next day instead of polling forever."""


_set = object.__setattr__


class Options:
    """Immutable options, checked once by the constructor. ``fields`` names them in the
    order of the entry points' keyword arguments (a test holds every entry point to it)."""

    __slots__ = ()
    fields: tuple[str, ...] = ()

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            _set(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only; use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def as_dict(self) -> dict[str, Any]:
        """The options as keyword arguments of the constructor."""
        return {name: getattr(self, name) for name in self.fields}

    def replace(self, **changes: Any) -> Self:
        """A copy with some options changed, checked again."""
        return type(self)(**{**self.as_dict(), **changes})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Options) or type(other) is not type(self):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash((type(self), *self.as_dict().values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.as_dict().items())
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), self.as_dict())


def _rebuilt(cls: type[Options], values: dict[str, Any]) -> Options:
    return cls(**values)


class JobOptions(Options):
    """How a job type runs: what ``@q.job`` takes (see ``Queue.job`` for each option).

    Held as checked: ``backoff`` as its policy (``(attempt) -> seconds | None``), and the
    concurrency and rate limits also as one ``limit`` (``controls.Limit``, or None; keyed
    when ``concurrency_key`` is set).
    """

    fields = ("name", "max_attempts", "backoff", "queue", "priority", "timeout", "max_delay",
              "max_snooze", "concurrency", "rate_limit", "concurrency_key")  # fmt: skip
    __slots__ = (*fields, "limit")

    if TYPE_CHECKING:
        name: str | None
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

    def __init__(
        self,
        *,
        name: str | None = None,
        max_attempts: int = 4,
        backoff: Sequence[float] | Backoff | None = None,
        queue: str = "default",
        priority: int = 0,
        timeout: float | None = None,
        max_delay: timedelta | None = None,
        max_snooze: timedelta | None = DEFAULT_MAX_SNOOZE,
        concurrency: int | None = None,
        rate_limit: str | None = None,
        concurrency_key: str | Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        self._set(
            max_attempts=check_max_attempts(max_attempts), priority=check_priority(priority),
            max_snooze=check_max_snooze(max_snooze),
            limit=job_limit(concurrency, rate_limit, concurrency_key),
            concurrency=concurrency, rate_limit=rate_limit, timeout=check_timeout(timeout),
            concurrency_key=check_concurrency_key(concurrency_key),
            queue=check_queue(queue), backoff=as_backoff(backoff),
            max_delay=check_max_delay(max_delay),
            name=None if name is None else check_job_type(name),
        )  # fmt: skip


class EnqueueOptions(Options):
    """How one enqueue stores its job: what ``q.enqueue`` takes besides the job type, its
    payload and ``conn``. None for ``priority``, ``queue`` or ``max_attempts``: the job
    type's own. ``run_after`` is held as given (a ``timedelta`` counts from the enqueue),
    a ``datetime`` in UTC. ``keep=True``: the finished job is never pruned by retention
    (``tickq prune`` and ``Queue.prune`` still delete it)."""

    fields = ("run_after", "unique_key", "unique_scope", "priority", "queue", "max_attempts",
              "keep")  # fmt: skip
    __slots__ = fields

    if TYPE_CHECKING:
        run_after: datetime | timedelta | None
        unique_key: str | None
        unique_scope: str
        priority: int | None
        queue: str | None
        max_attempts: int | None
        keep: bool

    def __init__(
        self,
        *,
        run_after: datetime | timedelta | None = None,
        unique_key: str | None = None,
        unique_scope: str = "active",
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        keep: bool = False,
    ) -> None:
        # One per enqueue: set directly, which costs half what ``_set(**values)`` does.
        _set(self, "unique_scope", check_unique_scope(unique_scope))
        _set(self, "queue", None if queue is None else check_queue(queue))
        _set(self, "priority", None if priority is None else check_priority(priority))
        attempts = None if max_attempts is None else check_max_attempts(max_attempts)
        _set(self, "max_attempts", attempts)
        _set(self, "run_after", check_run_after(run_after))
        _set(self, "unique_key", check_unique_key(unique_key))
        if not isinstance(keep, bool):
            raise TypeError(f"keep must be True or False, got {type(keep).__name__}: {keep!r}")
        _set(self, "keep", keep)


def check_timeout(value: Any) -> float | None:
    """``timeout``: None, or a positive number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"timeout must be a number of seconds, got {type(value).__name__}: {value!r}"
        )
    if not value > 0:  # NaN too
        raise ConfigurationError(f"timeout must be positive seconds, got {value}")
    return value


def check_max_delay(value: Any) -> timedelta | None:
    """``max_delay``: None (the default, 15 minutes), or a positive ``timedelta``."""
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise TypeError(f"max_delay must be a timedelta, got {type(value).__name__}: {value!r}")
    if value <= timedelta(0):
        raise ConfigurationError(f"max_delay must be positive, got {value}")
    return value


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


def check_run_after(value: Any) -> datetime | timedelta | None:
    """``run_after``: None, a ``timedelta`` from now, or an aware ``datetime`` (in UTC)."""
    if value is None or isinstance(value, timedelta):
        return value
    if isinstance(value, datetime):
        return require_aware(value, "run_after")
    raise TypeError(f"run_after must be a datetime or timedelta, got {type(value).__name__}")


def check_priority(value: Any) -> int:
    """``priority``: an int within ``INT_MIN``..``INT_MAX``; higher runs first."""
    return _int("priority", value, INT_MIN)


def check_max_attempts(value: Any) -> int:
    """``max_attempts``: an int from 1 (one attempt, no retry) to ``INT_MAX``."""
    return _int("max_attempts", value, 1)


def check_queue(value: Any, *, bounded: bool = True) -> str:
    """``queue``: a non-empty name of at most ``MAX_NAME_BYTES`` (``bounded=False``: of
    any length, to resume a queue paused before the limit)."""
    text = check_text("queue", value)
    if not text:
        raise ConfigurationError("queue must be a non-empty name, got ''")
    return check_size("queue", text, MAX_NAME_BYTES) if bounded else text


def check_job_type(value: Any) -> str:
    """A job type: a str of at most ``MAX_NAME_BYTES``."""
    return check_name("job type", value)


def check_name(option: str, value: Any) -> str:
    """A name tickq stores and indexes (job type, schedule): at most ``MAX_NAME_BYTES``."""
    return check_size(option, check_text(option, value), MAX_NAME_BYTES)


def check_unique_key(value: Any) -> str | None:
    """``unique_key``: None or a string of at most ``MAX_UNIQUE_KEY_BYTES``."""
    if value is None:
        return None
    text = check_text("unique_key", value)
    return check_size("unique_key", text, MAX_UNIQUE_KEY_BYTES, KEY_HINT)


KEY_HINT = ", e.g. to a hash of it (hashlib.sha256(key.encode()).hexdigest())"


def check_size(option: str, text: str, limit: int, hint: str = "") -> str:
    """``text`` if it is at most ``limit`` bytes of UTF-8, else one line naming the limit."""
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > limit:
        raise ConfigurationError(
            f"{option} {text[:40]!r}... is {size} bytes long (UTF-8); at most {limit} fit "
            f"every backend (Postgres indexes it): shorten it{hint}"
        )
    return text


def check_unique_scope(value: Any) -> str:
    if type(value) is not str or value not in UNIQUE_SCOPES:
        raise ConfigurationError(f"unique_scope must be 'active' or 'all', got {value!r}")
    return value


def check_text(option: str, value: Any) -> str:
    """A str both backends store as is: no NUL character, no lone surrogate."""
    if type(value) is not str:
        raise TypeError(f"{option} must be a str, got {type(value).__name__}: {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigurationError(
                f"{option} {value!r} contains a lone surrogate, which a database can't store"
            ) from None
    if "\x00" in value:
        raise ConfigurationError(
            f"{option} {value!r} contains a NUL character, which Postgres can't store"
        )
    return value


def _int(option: str, value: Any, low: int) -> int:
    if type(value) is not int:
        raise TypeError(f"{option} must be an int, got {type(value).__name__}: {value!r}")
    if value < low:
        raise ConfigurationError(f"{option} must be >= {low}, got {value}")
    if value > INT_MAX:
        raise ConfigurationError(f"{option} must be <= {INT_MAX} (a 32-bit integer), got {value}")
    return value


DEFAULT_JOB_OPTIONS = JobOptions()
"""What a job type gets that ``@q.job`` doesn't set; also a job of a type this process
doesn't know (``Queue(strict=False)``)."""
DEFAULT_ENQUEUE_OPTIONS = EnqueueOptions()
"""An enqueue without options: everything as the job type says."""
