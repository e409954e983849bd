"""Internal: the ``Queue``'s enqueue methods (a mixin of the facade), over its ``Runtime``.

The user-facing docstrings live here; each method builds the ``EnqueueOptions`` once and
hands them on; the checks live there and in ``tickq.enqueue``.
"""

from __future__ import annotations

from .job_options import DEFAULT_ENQUEUE_OPTIONS, EnqueueOptions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from datetime import datetime, timedelta
    from typing import Any

    from .clock import Clock
    from .enqueue import JobKind
    from .job import NewJob
    from .runtime import Runtime


class Enqueueing:
    """The ``Queue``'s enqueue methods (a mixin of the facade), over its ``Runtime``."""

    __slots__ = ()
    if TYPE_CHECKING:
        _runtime: Runtime

    def _new_job(
        self, job_type: str, payload: Mapping[str, Any] | None = None, **options: Any
    ) -> NewJob:
        """Validate one job and return the row to insert (no I/O): ``options`` are those of
        ``enqueue`` (checked by ``options_and_meta``) and ``meta``."""
        enqueue_options, meta = options_and_meta(**options)
        return self._runtime.new_job(job_type, payload, enqueue_options, meta)

    def enqueue(
        self,
        job_type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        conn: Any = None,
        run_after: datetime | timedelta | None = None,
        unique_key: str | None = None,
        unique_scope: str = "active",
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        keep: bool = False,
    ) -> int:
        """Store one job and return its id.

        With ``conn=`` the job is inserted in that connection's open transaction: commit and
        the job exists, roll back and it never did. With ``unique_key`` a second enqueue
        while one is pending or running (``unique_scope="all"``: while one exists at all)
        returns the existing job's id instead of adding another.

        The job receives exactly ``payload``, or nothing is stored: a value JSON would
        change or can't carry, a payload that doesn't fit the function (names, simple
        annotations) or a bad option raises ``TypeError`` / ``ValueError`` naming the field
        or option, the same on every backend (see docs/payloads.md). Parameters annotated
        with ``datetime``, ``date``, ``Decimal``, ``UUID``, an ``Enum``, a dataclass, a
        ``TypedDict`` or a Pydantic model take those types, converted to JSON here and
        rebuilt for the function (docs/payload-types.md).
        """
        options = EnqueueOptions(
            run_after=run_after, unique_key=unique_key, unique_scope=unique_scope,
            priority=priority, queue=queue, max_attempts=max_attempts, keep=keep,
        )  # fmt: skip
        return self._enqueue(job_type, payload, options, conn)

    def _enqueue(
        self,
        job_type: str,
        payload: Mapping[str, Any] | None,
        options: EnqueueOptions,
        conn: Any = None,
    ) -> int:
        """``enqueue`` with its options checked."""
        return self._runtime.insert([self._runtime.new_job(job_type, payload, options)], conn)[0]

    def _enqueue_json(
        self, job_type: str, payload: Mapping[str, Any], options: EnqueueOptions
    ) -> int:
        """``enqueue`` of a payload that is JSON from outside (the CLI): typed parameters
        take their JSON forms, checked against the annotations the same way."""
        job = self._runtime.new_job(job_type, payload, options, external=True)
        return self._runtime.insert([job])[0]

    async def enqueue_async(
        self,
        job_type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        conn: Any = None,
        run_after: datetime | timedelta | None = None,
        unique_key: str | None = None,
        unique_scope: str = "active",
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        keep: bool = False,
    ) -> int:
        """``enqueue`` for async code: ``conn=`` takes a psycopg ``AsyncConnection`` or a
        SQLAlchemy ``AsyncConnection`` / ``AsyncSession``."""
        options = EnqueueOptions(
            run_after=run_after, unique_key=unique_key, unique_scope=unique_scope,
            priority=priority, queue=queue, max_attempts=max_attempts, keep=keep,
        )  # fmt: skip
        return await self._enqueue_async(job_type, payload, options, conn)

    async def _enqueue_async(
        self,
        job_type: str,
        payload: Mapping[str, Any] | None,
        options: EnqueueOptions,
        conn: Any = None,
    ) -> int:
        """``enqueue_async`` with its options checked."""
        job = self._runtime.new_job(job_type, payload, options)
        if conn is None:
            import asyncio

            return (await asyncio.to_thread(self._runtime.insert, [job]))[0]
        from .runtime import watching
        from .store.foreign import insert_on_async

        watchers = watching()
        if not watchers:
            return (await insert_on_async(self._runtime.store, conn, [job]))[0]
        from .observe import sent_async

        store = self._runtime.store
        return (await sent_async(watchers, [job], lambda js: insert_on_async(store, conn, js)))[0]

    def enqueue_many(
        self,
        jobs: Iterable[
            tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], dict[str, Any]]
        ],
        *,
        conn: Any = None,
    ) -> list[int]:
        """Store many jobs at once: ``[(type, payload), (type, payload, {options}), ...]``.

        One statement per chunk of 1,000 on Postgres, one transaction on SQLite; returns
        the ids in input order. All or nothing: an invalid job stores none of them, and its
        error ends with its index in ``jobs``.
        """
        rows: list[NewJob] = []
        kinds: dict[str, JobKind] = {}  # each type's look-ups, done once per batch
        clock = self._runtime.clock
        for index, item in enumerate(jobs):
            try:
                rows.append(self._batch_job(item, kinds, clock))
            except (TypeError, ValueError, LookupError) as exc:
                at_index(exc, index)
                raise
        return self._runtime.insert(rows, conn)

    def _batch_job(self, item: Any, kinds: dict[str, JobKind], clock: Clock) -> NewJob:
        """One item of ``enqueue_many``'s jobs as a checked row."""
        if type(item) is tuple and len(item) == 2:  # most items: no list built for *rest
            job_type, payload = item
            options, meta = DEFAULT_ENQUEUE_OPTIONS, None
        else:
            job_type, payload, *rest = item
            options, meta = options_and_meta(**rest[0]) if rest else (DEFAULT_ENQUEUE_OPTIONS, None)
        kind = kinds.get(job_type) if type(job_type) is str else None  # a str subclass: refused
        if kind is None:
            kind = kinds[job_type] = self._runtime.job_kind(job_type)
        return kind.new_job(clock, payload, options, meta)


def options_and_meta(
    *,
    run_after: datetime | timedelta | None = None,
    unique_key: str | None = None,
    unique_scope: str = "active",
    priority: int | None = None,
    queue: str | None = None,
    max_attempts: int | None = None,
    keep: bool = False,
    meta: Mapping[str, Any] | None = None,
) -> tuple[EnqueueOptions, Mapping[str, Any] | None]:
    """An ``enqueue_many`` item's options (``enqueue``'s, checked once here) and its
    ``meta``."""
    options = EnqueueOptions(
        run_after=run_after, unique_key=unique_key, unique_scope=unique_scope,
        priority=priority, queue=queue, max_attempts=max_attempts, keep=keep,
    )  # fmt: skip
    return options, meta


def at_index(exc: BaseException, index: int) -> None:
    """End ``exc``'s message with ``enqueue_many``'s index of the job at fault (an error
    whose arguments are not one message is left as it is)."""
    if len(exc.args) == 1 and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]} (enqueue_many: the job at index {index}; none stored)",)
