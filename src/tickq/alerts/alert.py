"""One alert: what happened, in a title and a few lines a person can act on."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..job import Frozen

TYPE_CHECKING = False  # typing and dataclasses cost a waking host milliseconds of import
if TYPE_CHECKING:
    from typing import Any

KINDS = ("failed", "repeated_failures", "tick_overdue")
SHOWN_IDS = 10


class Alert(Frozen):
    """What a sink receives. ``kind`` is ``failed`` (jobs ran out of attempts),
    ``repeated_failures`` (many failed attempts of one type, still retrying) or
    ``tick_overdue``; ``title`` is one line, ``text`` says what happened and what to do."""

    __slots__ = ()
    _fields = ("kind", "title", "text", "job_type", "failed_jobs", "failed_attempts",
               "window_start", "window_end", "job_ids", "last_error")  # fmt: skip

    if TYPE_CHECKING:
        kind: str
        title: str
        text: str
        job_type: str | None
        failed_jobs: int
        failed_attempts: int
        window_start: str | None
        window_end: str | None
        job_ids: list[int]
        last_error: str | None

    def __new__(
        cls, kind: str, title: str, text: str, job_type: str | None = None,
        failed_jobs: int = 0, failed_attempts: int = 0, window_start: str | None = None,
        window_end: str | None = None, job_ids: list[int] | None = None,
        last_error: str | None = None,
    ) -> Alert:  # fmt: skip
        return tuple.__new__(cls, (
            kind, title, text, job_type, failed_jobs, failed_attempts, window_start,
            window_end, list(job_ids or []), last_error,
        ))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        data = dict(zip(self._fields, self, strict=True))
        data["job_ids"] = list(self.job_ids)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Alert:
        return cls(**{k: v for k, v in data.items() if k in cls._fields})


def failures_alert(
    job_type: str, start: datetime, end: datetime, summary: dict[str, Any], threshold: int
) -> Alert | None:
    """The alert for one type's failures in one window, or None when none is due."""
    jobs, attempts = summary["failed_jobs"], summary["failed_attempts"]
    when = _window(start, end)
    if jobs:
        kind = "failed"
        title = f"tickq: {_plural(jobs, 'job')} of type {job_type!r} failed"
        lead = (f"{_plural(jobs, 'job')} of type {job_type!r} ran out of attempts and failed "
                f"{when} ({_plural(attempts, 'failed attempt')} of this type in that "
                "window).")  # fmt: skip
        todo = f"Retry them all, once fixed: tickq retry APP --failed --type {job_type}"
    elif attempts >= threshold:
        kind = "repeated_failures"
        title = f"tickq: {_plural(attempts, 'attempt')} of {job_type!r} failed"
        lead = (f"{_plural(attempts, 'attempt')} of jobs of type {job_type!r} failed {when} "
                f"(alert threshold: {threshold}); tickq keeps retrying them.")  # fmt: skip
        todo = "If this continues they will fail for good; look at the error now."
    else:
        return None
    ids = summary["job_ids"]
    lines = [lead, "", f"Latest error: {_first_lines(summary['last_error'])}"]
    if ids:
        lines.append(f"Jobs: {', '.join(map(str, ids[:SHOWN_IDS]))} (see: tickq show {ids[0]})")
    lines.append(todo)
    return Alert(
        kind=kind, title=title, text="\n".join(lines), job_type=job_type,
        failed_jobs=jobs, failed_attempts=attempts, window_start=start.isoformat(),
        window_end=end.isoformat(), job_ids=ids[:SHOWN_IDS], last_error=summary["last_error"],
    )  # fmt: skip


def tick_overdue_alert(
    last_tick_at: datetime | None, expected_every: timedelta, now: datetime
) -> Alert:
    """The alert saying the tick (the external scheduler's call) has not come in time."""
    if last_tick_at is None:
        since = "No tick has ever run"
    else:
        since = (f"The last tick ran at {last_tick_at:%Y-%m-%d %H:%M} UTC, "
                 f"{_duration(now - last_tick_at)} ago")  # fmt: skip
    text = (
        f"{since}; one is expected every {_duration(expected_every)}. Until it comes, "
        "scheduled jobs don't fire and queued jobs wait.\n"
        "Check the external scheduler that calls the tick (e.g. the GitHub Actions "
        "workflow: is it enabled, are its URL and token secrets right?) and the app's logs."
    )
    return Alert(
        kind="tick_overdue", title="tickq: the tick is overdue", text=text,
        window_start=last_tick_at.isoformat() if last_tick_at else None,
        window_end=now.isoformat(),
    )  # fmt: skip


def _window(start: datetime, end: datetime) -> str:
    return f"between {start:%H:%M} and {end:%H:%M} UTC on {start:%Y-%m-%d}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _first_lines(error: str | None, lines: int = 3) -> str:
    if not error:
        return "(none recorded)"
    head = error.split("\nTraceback (most recent call last):", 1)[0].strip()
    kept = head.splitlines()[:lines]
    return "\n  ".join(kept)


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 3600 == 0 and seconds >= 3600:
        return _plural(seconds // 3600, "hour")
    if seconds >= 120:
        return _plural(round(seconds / 60), "minute")
    return _plural(seconds, "second")
