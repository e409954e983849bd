"""Internal: who watches enqueues, attempts and other runs (OpenTelemetry, Sentry), and
the fast path when nobody does.

The hot path pays only ``tickq.runtime.watching()``: two dict lookups, and this module
is not imported, until an integration registers itself here (``watch``, e.g.
``tickq.contrib.sentry``) or the app imports OpenTelemetry's API. Until something
imports ``opentelemetry.trace`` nobody can have configured an SDK, so tickq neither
imports it nor spends anything on it (``tickq.logger`` reasons the same way about
``logging``).

A watcher gives three context managers, each yielding a scope the caller reports to:

- ``sending(jobs)`` around an insert: ``carry()`` is what each row keeps for the run
  (``meta["trace"]``: W3C ``traceparent``/``tracestate``), ``sent(ids)`` after;
- ``attempt(job)`` around one run of a job function: ``ended(outcome, exc)``;
- ``running(name, attributes)`` around any other unit of work: ``ended(report)``. Ticks
  use it (``tickq tick``); so should a workflow run or step, under a name of its own.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence
    from typing import Any, Protocol, TypeVar

    from .job import Job, NewJob
    from .store import Outcome

    T = TypeVar("T")

    class Scope(Protocol):
        def carry(self) -> Mapping[str, str]: ...
        def sent(self, ids: Sequence[int]) -> None: ...
        def ended(self, what: Any, exc: BaseException | None = None) -> None: ...

    class Watcher(Protocol):
        def sending(self, jobs: Sequence[NewJob]) -> Any: ...
        def attempt(self, job: Job) -> Any: ...
        def running(self, name: str, attributes: Mapping[str, Any]) -> Any: ...


WATCHERS: list[Watcher] = []
"""Registered watchers, OpenTelemetry's first once its API is imported."""
_otel = {"seen": False}


def watchers() -> list[Watcher]:
    """The watchers, empty (and false) on the fast path."""
    if not _otel["seen"] and "opentelemetry.trace" in sys.modules:
        _otel["seen"] = True
        try:
            from .otel import OtelWatcher

            WATCHERS.insert(0, OtelWatcher())
        except Exception as exc:  # an API too old or broken: jobs still run, untraced
            from .logger import log

            log.warning("tickq could not start its OpenTelemetry instrumentation (%s: %s); "
                        "pip install 'tickq[otel]' for a supported opentelemetry-api",
                        type(exc).__name__, exc)  # fmt: skip
    return WATCHERS


def watch(watcher: Watcher) -> None:
    """Add ``watcher`` (once) for every enqueue, attempt and run in this process."""
    if not any(type(w) is type(watcher) for w in WATCHERS):
        WATCHERS.append(watcher)


def queues(store: Any) -> None:
    """Let the watchers that gauge queues (OpenTelemetry's due and running counts) read
    ``store`` from now on; called by each cycle while someone watches."""
    for watcher in WATCHERS:
        gauge = getattr(watcher, "queues", None)
        if gauge is not None:
            gauge(store)


def unwatch(kind: type) -> None:
    """Remove the watchers of class ``kind`` (tests; an integration turned off)."""
    WATCHERS[:] = [w for w in WATCHERS if type(w) is not kind]


def sent(
    watching: Sequence[Watcher],
    jobs: Sequence[NewJob],
    insert: Callable[[Sequence[NewJob]], list[int]],
) -> list[int]:
    """``insert(jobs)`` inside each watcher's ``sending`` scope, the rows carrying what
    the scopes want carried (the producer span's context)."""
    with ExitStack() as stack:
        scopes = [stack.enter_context(w.sending(jobs)) for w in watching]
        jobs = carrying(jobs, scopes)
        ids = insert(jobs)
        for scope in scopes:
            scope.sent(ids)
        return ids


async def sent_async(
    watching: Sequence[Watcher],
    jobs: Sequence[NewJob],
    insert: Callable[[Sequence[NewJob]], Awaitable[list[int]]],
) -> list[int]:
    """``sent`` for an insert to await (``enqueue_async`` on the caller's connection)."""
    with ExitStack() as stack:
        scopes = [stack.enter_context(w.sending(jobs)) for w in watching]
        ids = await insert(carrying(jobs, scopes))
        for scope in scopes:
            scope.sent(ids)
        return ids


def carrying(jobs: Sequence[NewJob], scopes: Sequence[Scope]) -> Sequence[NewJob]:
    carried: dict[str, str] = {}
    for scope in scopes:
        carried.update(scope.carry())
    if not carried:
        return jobs
    import json

    return [
        job._replace(meta_json=json.dumps({**json.loads(job.meta_json or "{}"), "trace": carried}))
        for job in jobs
    ]


class Attempt:
    """One run of a job function inside each watcher's ``attempt`` scope; ``execute``
    notes the exception the job raised in ``raised``, then calls ``ended``."""

    __slots__ = ("_scopes", "_stack", "_watching", "job", "raised")

    def __init__(self, watching: Sequence[Watcher], job: Job) -> None:
        self.job, self._watching = job, watching
        self.raised: BaseException | None = None
        self._stack = ExitStack()
        self._scopes: list[Scope] = []

    def __enter__(self) -> Attempt:
        self._scopes = [self._stack.enter_context(w.attempt(self.job)) for w in self._watching]
        return self

    def ended(self, outcome: Outcome) -> Outcome:
        for scope in self._scopes:
            scope.ended(outcome, self.raised)
        return outcome

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)


def running(name: str, attributes: Mapping[str, Any], run: Callable[[], T]) -> T:
    """``run()`` inside each watcher's ``running`` scope; its result (a report dict) is
    what the scopes are told it came to. Without watchers, just ``run()``."""
    watching = watchers()
    if not watching:
        return run()
    with ExitStack() as stack:
        scopes = [stack.enter_context(w.running(name, attributes)) for w in watching]
        result = run()
        for scope in scopes:
            scope.ended(result)
        return result
