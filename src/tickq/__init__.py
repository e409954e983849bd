"""tickq: durable background jobs in your app's own database.

Jobs live in a table of your database (SQLite by default, Postgres to grow), are enqueued
in the same transaction as the change that caused them, retried with growing delays, and
marked failed loudly. See https://pypi.org/project/tickq/ and the README.

The public surface is stated once, below: the names in ``__all__``, the modules in
``_PUBLIC_MODULES`` (their own ``__all__``) and the classes in ``_PUBLIC_TYPES``, which
you hold without importing them (``@q.job`` returns a ``JobFunction``). Everything else is
internal and may change, whatever its name; many internal modules also say so at the top
of their docstring ("Internal:"). tests/test_public_surface.py checks that the reference
(docs/reference.md) documents exactly this surface.
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
    StepFailed,
    TickqError,
    UnknownJobType,
    WorkflowMismatch,
)
from .job import Job, JobState
from .queue import Queue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .workflow.context import WorkflowContext
del TYPE_CHECKING  # not a name of the package

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
    "StepFailed",
    "TickqError",
    "UnknownJobType",
    "WorkflowContext",
    "WorkflowMismatch",
    "__version__",
    "current_job",
]

_PUBLIC_MODULES = (
    "tickq.alerts",
    "tickq.contrib.django",
    "tickq.contrib.sentry",
    "tickq.dashboard",
    "tickq.logfmt",
    "tickq.metrics",
    "tickq.plan",
    "tickq.plan.hosts",
    "tickq.retention",
    "tickq.retry",
    "tickq.schedulers",
    "tickq.testing",
    "tickq.web",
    "tickq.webhooks",
)
_PUBLIC_TYPES = (
    "tickq.queue.JobFunction",
    "tickq.job.Attempt",
    "tickq.workflow.facade.WorkflowFunction",
    "tickq.workflow.context.StepHandle",
    "tickq.workflow.records.WorkflowRun",
    "tickq.workflow.records.WorkflowStep",
)


def __getattr__(name: str) -> object:
    """``tickq.WorkflowContext`` is imported when first asked for: a waking host that runs
    no workflow step does not pay for the module (``import tickq`` on every wake-up)."""
    if name == "WorkflowContext":
        from .workflow.context import WorkflowContext

        globals()[name] = WorkflowContext
        return WorkflowContext
    raise AttributeError(f"module 'tickq' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
