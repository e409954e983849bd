"""tickq: durable background jobs in your app's own database.

Jobs live in a table of your database (SQLite by default, Postgres to grow), are enqueued
in the same transaction as the change that caused them, retried with growing delays, and
marked failed loudly. See https://pypi.org/project/tickq/ and the README.

The public surface is the names in ``__all__`` below, plus the modules ``tickq.alerts``,
``tickq.metrics``, ``tickq.testing``, ``tickq.web``, ``tickq.webhooks``,
``tickq.schedulers`` and ``tickq.plan``; every other module is internal (its docstring
starts with "Internal:") and may change.
"""

from ._version import __version__
from .clock import FrozenClock
from .context import JobContext, current_job
from .errors import (
    Cancel,
    ConfigurationError,
    DatabaseUnavailable,
    InvalidTransition,
    JobNotFound,
    JobTimeout,
    Retry,
    SchemaMissing,
    Snooze,
    TickqError,
    UnknownJobType,
)
from .job import Job, JobState
from .queue import Queue

__all__ = [
    "Cancel",
    "ConfigurationError",
    "DatabaseUnavailable",
    "FrozenClock",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobState",
    "JobTimeout",
    "Queue",
    "Retry",
    "SchemaMissing",
    "Snooze",
    "TickqError",
    "UnknownJobType",
    "__version__",
    "current_job",
]
