"""Internal: run one claimed job and turn what it did into its next transition."""

from __future__ import annotations

from time import perf_counter

from .context import JobContext, _current, stop_requested, stoppable
from .errors import Cancel, JobTimeout, Retry, Snooze, Suspend
from .job import Job, out_of_attempts
from .payload import Unreadable
from .retry import steps
from .runtime import watching
from .signals import raised_by_signal
from .store import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime, timedelta
    from typing import Any

    from .observe import Attempt
    from .registry import JobDefinition

    Seen = Attempt | None

MAX_ERROR_CHARS = 8000
UNKNOWN_TYPE_BACKOFF = steps((60, 300, 1800))


def execute(job: Job, definition: JobDefinition | None, known: Callable[[], list[str]]) -> Outcome:
    """Run ``job`` with its handler and map the result or exception to an ``Outcome``:
    one of ``job.OUTCOMES``, the transitions ``store.record`` applies."""
    watchers = watching()
    if not watchers:
        return _execute(job, definition, known, None)
    from .observe import Attempt

    with Attempt(watchers, job) as attempt:
        return attempt.ended(_execute(job, definition, known, attempt))


def _execute(
    job: Job, definition: JobDefinition | None, known: Callable[[], list[str]], seen: Seen
) -> Outcome:
    started = perf_counter()
    if stop_requested(job):
        return _not_started(job, started)
    reason = unrunnable(job, definition)
    if reason:
        return _unrunnable(job, reason, started)
    if definition is None:
        return _unknown_type(job, known())
    token = _current.set(job)
    try:
        result = dump_result(invoke(definition, job))
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, GeneratorExit too: the job's
        if raised_by_signal(exc):
            raise  # from a signal's handler (Ctrl-C, a server's sys.exit): the process stops
        if seen is not None:
            seen.raised = exc
        return settle(job, definition, exc, started)
    finally:
        _current.reset(token)
    return Outcome(job, "succeeded", None, 0.0, perf_counter() - started, result)


async def execute_async(job: Job, definition: JobDefinition) -> Outcome:
    """``execute`` for an ``async def`` job, awaited on the caller's running event loop."""
    watchers = watching()
    if not watchers:
        return await _execute_async(job, definition, None)
    from .observe import Attempt

    with Attempt(watchers, job) as attempt:
        return attempt.ended(await _execute_async(job, definition, attempt))


async def _execute_async(job: Job, definition: JobDefinition, seen: Seen) -> Outcome:
    started = perf_counter()
    if stop_requested(job):
        return _not_started(job, started)
    reason = unrunnable(job, definition)
    if reason:
        return _unrunnable(job, reason, started)
    token = _current.set(job)
    try:
        coro = definition.fn(**job_kwargs(definition, job))
        value = await _within(coro, definition.timeout, job)
        result = dump_result(value)
    except BaseException as exc:
        cancelled = type(exc).__name__ == "CancelledError"  # asyncio's, not imported here
        if raised_by_signal(exc) or (cancelled and not stop_requested(job)):
            raise  # a real signal, or this task cancelled from outside (lease lost, shutdown)
        if seen is not None:
            seen.raised = exc
        return settle(job, definition, exc, started)
    finally:
        _current.reset(token)
    return Outcome(job, "succeeded", None, 0.0, perf_counter() - started, result)


def dump_result(value: Any) -> str | None:
    """The job function's return value as JSON text to store (None stays NULL); a value
    JSON can't carry fails the attempt (``Job.result`` would not give it back)."""
    if value is None:
        return None
    import json

    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(
            f"the job returned a {type(value).__name__} that is not JSON-serialisable "
            f"({exc}); return None, or a str, number, bool, list or dict to store a result"
        ) from None


def settle(job: Job, definition: JobDefinition, exc: BaseException, started: float) -> Outcome:
    """What raising ``exc`` means for the job: cancelled, snoozed, retried later, or failed.
    An attempt asked to stop (``q.cancel``) ends cancelled, whatever it raised."""
    if stop_requested(job) and not isinstance(exc, Cancel):
        return _stopped(job, exc, started)
    match exc:
        case Cancel():
            return Outcome(job, "cancelled", format_error(exc), 0.0, perf_counter() - started)
        case Snooze():
            return _snooze_or_fail(job, definition.max_snooze, exc.seconds, started)
        case Suspend():  # a workflow's driver waits: its run is recorded, nothing failed
            return Outcome(job, "suspended", None, exc.seconds, perf_counter() - started)
        case Retry():
            return _retry_or_fail(job, format_error(exc), exc.delay, started)
        case UnfitPayload():
            return _unrunnable(job, str(exc), started)
        case _:
            return _retry_or_fail(job, format_error(exc), definition.backoff(job.attempts), started)


def _stopped(job: Job, exc: BaseException, started: float) -> Outcome:
    asked = f"Cancel: cancel requested while attempt {job.attempts} was running; it "
    if type(exc).__name__ == "CancelledError":
        error = asked + "was cancelled at an await"
    else:
        error = asked + "then raised " + format_error(exc)
    return Outcome(job, "cancelled", error, 0.0, perf_counter() - started)


def _not_started(job: Job, started: float) -> Outcome:
    error = f"Cancel: cancel requested before attempt {job.attempts} started; it did not run"
    return Outcome(job, "cancelled", error, 0.0, perf_counter() - started)


def _retry_or_fail(job: Job, error: str, delay: float | None, started: float) -> Outcome:
    elapsed = perf_counter() - started
    if delay is None or out_of_attempts(job.attempts, job.max_attempts):
        return Outcome(job, "failed", error, 0.0, elapsed)
    return Outcome(job, "retried", error, delay, elapsed)


def _snooze_or_fail(
    job: Job, max_snooze: timedelta | None, seconds: float, started: float
) -> Outcome:
    """Snoozed for ``seconds`` (its attempt given back), cut short at the end of its
    ``max_snooze`` so the job gets a last run there; failed once that end has passed."""
    elapsed = perf_counter() - started
    if max_snooze is None:
        return Outcome(job, "snoozed", None, seconds, elapsed)
    now = _claimed_at(job)
    since = job.snoozed_since or now
    left = (since + max_snooze - now).total_seconds()
    if left > 0:
        return Outcome(job, "snoozed", None, min(seconds, left), elapsed)
    return Outcome(job, "failed", _snoozed_too_long(job, max_snooze, since), 0.0, elapsed)


def _claimed_at(job: Job) -> datetime:
    """When this run was claimed, on the store's clock: the wait left is measured from
    there, so a snooze cut short lands at or past the end, and the run then fails."""
    if job.attempted_at is None:
        from datetime import UTC, datetime

        return datetime.now(UTC)
    return job.attempted_at


def _snoozed_too_long(job: Job, max_snooze: timedelta, since: datetime) -> str:
    return (
        f"SnoozeLimitExceeded: job {job.id} {job.type} has snoozed {job.snoozes} time(s) "
        f"since {since.isoformat(timespec='seconds')}, which reaches its max_snooze of "
        f"{max_snooze}; it fails instead of snoozing again (raise an error or return once "
        "the wait is hopeless, or give @q.job a longer max_snooze, or None for no bound)"
    )


def _unrunnable(job: Job, reason: str, started: float) -> Outcome:
    """A job that can never run as stored fails now, without using up retries."""
    error = f"UnrunnableJob: {reason}; it fails without a retry (retrying can't help)"
    return Outcome(job, "failed", error, 0.0, perf_counter() - started)


def unrunnable(job: Job, definition: JobDefinition | None) -> str | None:
    """Why ``job`` can never run as stored (unreadable row, payload that can't fit the
    function's parameters), or None."""
    if type(job.payload) is Unreadable:
        return job.payload.reason
    if definition is None or not (problem := definition.unfit(job.payload)):
        return None
    from .signature import signature_text

    return f"payload does not fit {definition.name}{signature_text(definition.fn)}: {problem}"


def _unknown_type(job: Job, known: list[str]) -> Outcome:
    error = (
        f"UnknownJobType: no handler is registered for job type {job.type!r} in this process "
        f"(registered: {', '.join(sorted(known)) or 'none'}); register it with @q.job, or "
        "make sure the module defining it is imported by the worker"
    )
    return _retry_or_fail(job, error, UNKNOWN_TYPE_BACKOFF(job.attempts), perf_counter())


def job_kwargs(definition: JobDefinition, job: Job) -> dict[str, Any]:
    """The payload as keyword arguments (typed parameters rebuilt), plus the ``JobContext``
    when the function takes one (built then, and made what ``current_job()`` returns)."""
    payload = job.payload
    if definition.types.fields():
        try:
            payload = definition.types.load(payload, definition.name)
        except TypeError as exc:
            raise UnfitPayload(str(exc)) from None
    if not definition.context_param:
        return payload
    ctx = JobContext.of(job)
    _current.set(ctx)
    return {**payload, definition.context_param: ctx}


class UnfitPayload(TypeError):
    """A stored payload whose typed values can't be rebuilt: the job can never run."""


def invoke(definition: JobDefinition, job: Job) -> Any:
    """Call the job function with the payload as keyword arguments, within its timeout."""
    kwargs = job_kwargs(definition, job)
    if definition.is_async:
        return run_coroutine(definition.fn, kwargs, definition.timeout, job)
    if definition.timeout is None:
        return definition.fn(**kwargs)
    return run_with_timeout(definition.fn, kwargs, definition.timeout)


def run_with_timeout(fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
    """Run a sync job in a daemon thread; past ``timeout`` the attempt fails.

    Python cannot stop a thread: the function keeps running in the background until it
    returns, and whatever it returns then is ignored.
    """
    import threading

    box: dict[str, Any] = {}
    ctx = _copy_context()

    def target() -> None:
        try:
            box["result"] = ctx.run(fn, **kwargs)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"tickq-job-{fn.__name__}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise JobTimeout(
            f"job exceeded its timeout of {timeout:g}s; its thread was left to finish in the "
            "background and its result will be ignored"
        )
    if "error" in box:
        raise box["error"]
    return box.get("result")


def run_coroutine(
    fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float | None, job: Job | None = None
) -> Any:
    """Run an ``async def`` job to completion; past ``timeout`` (or asked to stop) it is
    cancelled."""
    import asyncio
    import threading

    async def main() -> Any:
        return await _within(fn(**kwargs), timeout, job)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    # Called from inside an event loop (e.g. an async web handler): use a fresh thread.
    ctx = _copy_context()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = ctx.run(asyncio.run, main())
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("result")


async def _within(coro: Any, timeout: float | None, job: Job | None = None) -> Any:
    import asyncio
    from contextlib import nullcontext

    scope = asyncio.timeout(timeout)
    try:
        with stoppable(job) if job is not None else nullcontext():
            async with scope:
                return await coro
    except TimeoutError as exc:
        if not scope.expired():
            raise  # the job's own TimeoutError (e.g. from an HTTP client), not ours
        raise JobTimeout(
            f"async job exceeded its timeout of {timeout:g}s and was cancelled"
        ) from exc


def _copy_context() -> Any:
    import contextvars

    return contextvars.copy_context()


def format_error(exc: BaseException) -> str:
    """``Type: message`` then the traceback, bounded to ``MAX_ERROR_CHARS``."""
    text = plain_traceback(exc)
    if text is None:
        import traceback

        te = traceback.TracebackException.from_exception(exc, compact=True)
        text = "".join(_without_carets(te).format())
    head = f"{type(exc).__name__}: {exc}"
    full = f"{head}\n{text}"
    if len(full) <= MAX_ERROR_CHARS:
        return full
    keep = MAX_ERROR_CHARS // 2
    return f"{full[:keep]}\n... [{len(full) - 2 * keep} characters cut] ...\n{full[-keep:]}"


def plain_traceback(exc: BaseException) -> str | None:
    """What ``traceback.format_exception(exc)`` prints with no carets (see
    ``_without_carets``), written out here for the common exception, a fifth of the cost:
    not chained, without notes, not a group or a syntax error, no frame repeating itself.
    None for any other: the traceback module formats it (and folds repeated frames)."""
    if (
        exc.__cause__ is not None
        or (exc.__context__ is not None and not exc.__suppress_context__)
        or getattr(exc, "__notes__", None) is not None
        or isinstance(exc, (SyntaxError, BaseExceptionGroup))
    ):
        return None
    import linecache

    lines, seen, last = ["Traceback (most recent call last):\n"], set(), None
    tb = exc.__traceback__
    while tb is not None:
        code, lineno = tb.tb_frame.f_code, tb.tb_lineno
        here = (code.co_filename, lineno, code.co_name)
        if lineno is None or here == last:
            return None
        if code.co_filename not in seen:
            seen.add(code.co_filename)
            linecache.checkcache(code.co_filename)  # as traceback does: the source may be new
        linecache.lazycache(code.co_filename, tb.tb_frame.f_globals)
        line = linecache.getline(code.co_filename, lineno).strip()
        lines.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n')
        if line:
            lines.append(f"    {line}\n")
        last, tb = here, tb.tb_next
    if len(lines) == 1:
        lines.clear()  # no frames: the exception line alone
    lines.append(_exception_line(exc))
    return "".join(lines)


def _exception_line(exc: BaseException) -> str:
    """The last line ``traceback`` prints for ``exc``: its type (with its module unless
    builtin or __main__), then its message if it has one."""
    kind = type(exc)
    name, module = kind.__qualname__, kind.__module__
    if module not in ("__main__", "builtins"):
        name = f"{module if isinstance(module, str) else '<unknown>'}.{name}"
    try:
        message = str(exc)
    except Exception:
        message = "<exception str() failed>"
    return f"{name}: {message}\n" if message else f"{name}\n"


def _without_carets(te: Any) -> Any:
    """``te`` (a ``traceback.TracebackException``) with no ``^^^^`` under its lines, as
    Python prints it under ``-X no_debug_ranges``: placing them parses each line's source
    again, most of what formatting a traceback costs (some 200 µs of a 3-frame one), and an
    attempt that raised would cost several times one that succeeded."""
    seen: set[int] = set()
    todo = [te]
    while todo:
        t = todo.pop()
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        for frame in t.stack:
            frame.colno = frame.end_colno = None
        todo.extend((t.__cause__, t.__context__, *(getattr(t, "exceptions", None) or ())))
    return te
