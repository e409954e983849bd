"""Exceptions tickq raises, and the two a job may raise to steer its own fate."""

from __future__ import annotations


class TickqError(Exception):
    """Base class of every error tickq raises on purpose."""


class ConfigurationError(TickqError, ValueError):
    """A setting or argument is invalid; the message names it and says what is expected."""


class UnknownJobType(TickqError, LookupError):
    """No handler is registered under this job type."""


class JobNotFound(TickqError, LookupError):
    """No job with this id exists (it may have been pruned)."""


class InvalidTransition(TickqError):
    """The job is not in a state that allows this operation (e.g. retrying a done job)."""


class DatabaseUnavailable(TickqError):
    """The database could not be reached or dropped the connection; safe to try again."""


class SchemaMissing(TickqError):
    """tickq's tables are not there yet: run ``q.migrate()`` or ``tickq migrate``."""


class Cancel(Exception):
    """Raise inside a job to stop it for good (status ``cancelled``), without retries."""


class Retry(Exception):
    """Raise inside a job to retry it after ``delay`` seconds (counts as an attempt)."""

    def __init__(self, delay: float, reason: str = "") -> None:
        super().__init__(reason or f"retry requested in {delay:g}s")
        if delay < 0:
            raise ValueError(f"Retry delay must be >= 0 seconds, got {delay}")
        self.delay = float(delay)


class JobTimeout(TickqError, TimeoutError):
    """A job ran past its ``timeout``; the attempt counts as failed."""
