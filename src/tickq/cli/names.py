"""Queue and job type names typed on the command line, checked against what the app
registers and the database holds, so a typo (``--type sned``) is refused with the nearest
known name instead of matching nothing."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..errors import ConfigurationError
from ..queue import Queue

DEFAULT_QUEUE = "default"


def check_type(q: Queue, job_type: str | None) -> None:
    """Refuse a job type that no registered job and no stored job has."""
    if job_type is None or job_type in q.job_names() or q.list_jobs(type=job_type, limit=1):
        return
    raise ConfigurationError(unknown("job type", job_type, known_types(q)))


def check_queue(q: Queue, queue: str | None, hint: str = "") -> None:
    """Refuse a queue that no registered job uses and no stored job is in."""
    if queue is None or queue in known_queues(q, quick=True) or q.list_jobs(queue=queue, limit=1):
        return
    raise ConfigurationError(unknown("queue", queue, known_queues(q), hint))


def known_types(q: Queue) -> set[str]:
    stats = q.stats()
    processed = (t for types in stats["processed"].values() for t in types)
    return {*q.job_names(), *stats["by_type"], *processed}


def known_queues(q: Queue, quick: bool = False) -> set[str]:
    """The queues of the registered jobs, the default one and the paused ones; unless
    ``quick``, also every queue the database has seen."""
    names = {DEFAULT_QUEUE, *q.paused()}
    names |= {d.queue for n in q.job_names() if (d := q._definition(n)) is not None}
    if not quick:
        stats = q.stats()
        names |= {*stats["by_queue"], *stats["processed"]}
    return names


def unknown(kind: str, value: str, known: Iterable[str], hint: str = "") -> str:
    """``no queue 'emial' is … in the database; did you mean 'emails'? Known queues: …``."""
    names = sorted(known)
    close = difflib.get_close_matches(value, names, n=1)
    text = f"no {kind} {value!r} is registered by the app or found in the database"
    text += f"; did you mean {close[0]!r}?" if close else "."
    text += f" Known {kind}s: {', '.join(map(repr, names)) or 'none'}"
    return text + (f"; {hint}" if hint else "")
