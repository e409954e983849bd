"""Internal: the limits a job type may declare (``@q.job(concurrency=, rate_limit=,
concurrency_key=)``), checked once where they are declared, and the key that a keyed
type's limits apply to, computed once per job at enqueue. The database enforces them
(``store``)."""

from __future__ import annotations

from .errors import ConfigurationError
from .job import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
"""Rate limit periods: ``10/s``, ``100/m``, ``1000/h``."""
INT_MAX = 2**31 - 1
RATE_EXAMPLE = '"10/s", "100/m" or "1000/h" (starts per second, minute or hour)'


class Limit(Frozen):
    """A job type's limits: at most ``concurrency`` running at once and at most ``rate``
    starts within any ``per`` seconds (None: no such limit); ``keyed``: per distinct
    ``concurrency_key`` rather than for the whole type."""

    __slots__ = ()
    _fields = ("concurrency", "rate", "per", "keyed")

    if TYPE_CHECKING:
        concurrency: int | None
        rate: int | None
        per: float | None
        keyed: bool

    def __new__(
        cls, concurrency: int | None, rate: int | None, per: float | None, keyed: bool = False
    ) -> Limit:
        return tuple.__new__(cls, (concurrency, rate, per, keyed))

    @property
    def rate_text(self) -> str | None:
        """The rate limit as ``"10/s"`` (None when the type has none)."""
        if self.rate is None or self.per is None:
            return None
        unit = next((u for u, s in UNITS.items() if s == self.per), None)
        return f"{self.rate}/{unit}" if unit else f"{self.rate}/{self.per:g}s"

    def describe(self) -> str:
        """``concurrency 2, rate 10/s`` for tables and logs."""
        parts = [f"concurrency {self.concurrency}"] if self.concurrency is not None else []
        parts += [f"rate {self.rate_text}"] if self.rate is not None else []
        return ", ".join(parts) + (" per key" if self.keyed else "")


def check_concurrency_limit(value: Any) -> int | None:
    """``concurrency``: None, or how many jobs of the type may run at once (an int >= 1)."""
    if value is None:
        return None
    if type(value) is not int:
        raise ConfigurationError(
            f"concurrency must be an int (how many jobs of this type may run at once), "
            f"got {type(value).__name__}: {value!r}"
        )
    if not 1 <= value <= INT_MAX:
        raise ConfigurationError(
            f"concurrency must be at least 1 (how many jobs of this type may run at once; "
            f"pause the queue to run none), got {value}"
        )
    return value


def parse_rate_limit(value: Any) -> tuple[int, float] | None:
    """``rate_limit``: None, or ``"<count>/<unit>"`` -> (count, period in seconds)."""
    if value is None:
        return None
    if type(value) is not str:
        raise ConfigurationError(
            f"rate_limit must be a str like {RATE_EXAMPLE}, got {type(value).__name__}: {value!r}"
        )
    count, slash, unit = value.strip().partition("/")
    count, unit = count.strip(), unit.strip()
    if not (slash and count.isascii() and count.isdigit() and unit in UNITS):
        raise ConfigurationError(f"rate_limit must look like {RATE_EXAMPLE}, got {value!r}")
    if not 1 <= int(count) <= INT_MAX:
        raise ConfigurationError(
            f"rate_limit must allow at least 1 start per period (pause the queue to run "
            f"none), got {value!r}"
        )
    return int(count), UNITS[unit]


def job_limit(concurrency: Any, rate_limit: Any, concurrency_key: Any = None) -> Limit | None:
    """The ``Limit`` of ``@q.job(concurrency=, rate_limit=, concurrency_key=)``, or None
    when neither limit is set; raises ``ConfigurationError`` naming a bad value."""
    most = check_concurrency_limit(concurrency)
    rate = parse_rate_limit(rate_limit)
    keyed = check_concurrency_key(concurrency_key) is not None
    if most is None and rate is None:
        if keyed:
            raise ConfigurationError(
                f"concurrency_key={concurrency_key!r} limits nothing by itself: give "
                "concurrency= (how many of one key run at once) or rate_limit= (how many of "
                "one key start per period) too"
            )
        return None
    count, per = rate or (None, None)
    return Limit(most, count, per, keyed)


MAX_KEY_BYTES = 1000
"""The longest concurrency key, in bytes of UTF-8 (Postgres indexes it with the type)."""


def check_concurrency_key(value: Any) -> Any:
    """``concurrency_key``: None, the name of a payload field, or a callable taking the
    payload (a dict) and returning the key (a str)."""
    if value is None or callable(value):
        return value
    if type(value) is not str or not value.isidentifier():
        raise ConfigurationError(
            'concurrency_key must be the name of a payload field (e.g. "account_id") or a '
            f"function of the payload returning a str, got {type(value).__name__}: {value!r}"
        )
    return value


def concurrency_key_of(job_type: str, key: Any, payload: Mapping[str, Any]) -> str:
    """The concurrency key of one job of ``job_type`` (a keyed type: ``key`` is its
    ``concurrency_key``); raises ``TypeError`` naming the job and the value at fault."""
    if callable(key):
        try:
            value = key(dict(payload))
        except Exception as exc:
            raise TypeError(
                f"concurrency_key of job {job_type!r} raised {type(exc).__name__}: {exc} "
                f"(payload keys: {sorted(payload)}); make it return a str for every payload "
                "this job is enqueued with"
            ) from exc
        if type(value) is not str:
            raise TypeError(
                f"concurrency_key of job {job_type!r} must return a str, got "
                f"{type(value).__name__}: {value!r}"
            )
    elif key not in payload:
        raise TypeError(
            f"job {job_type!r} is limited per {key!r} (its concurrency_key), but the payload "
            f"has no {key!r} (keys: {sorted(payload)}); pass {key}=..."
        )
    else:
        value = payload[key]
        if type(value) is int:
            value = str(value)
        elif type(value) is not str:
            raise TypeError(
                f"job {job_type!r} is limited per {key!r} (its concurrency_key): {key} must be "
                f"a str or an int, got {type(value).__name__}: {value!r}"
            )
    return _fits(job_type, value)


def _fits(job_type: str, key: str) -> str:
    size = len(key) if key.isascii() else len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES or "\x00" in key or not _encodable(key):
        raise TypeError(
            f"concurrency key {key[:40]!r} of job {job_type!r} can't be stored: at most "
            f"{MAX_KEY_BYTES} bytes of UTF-8, no NUL, no lone surrogate ({size} bytes); "
            "e.g. hash it (hashlib.sha256(key.encode()).hexdigest())"
        )
    return key


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
