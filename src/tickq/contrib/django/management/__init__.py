"""tickq's management commands: ``tickq_worker`` and ``tickq_tick``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ....queue import Queue


def queue_of(alias: str) -> Queue:
    """The Queue of ``TASKS[alias]``; a ``CommandError`` (one line, no traceback) when
    there is no such alias or it is not a TickqBackend."""
    from django.core.management.base import CommandError

    from ....errors import ConfigurationError
    from ..backend import backend_for

    try:
        return backend_for(alias).queue
    except ConfigurationError as exc:
        raise CommandError(f"--backend {alias}: {exc}") from None
