"""``manage.py migrate`` creates tickq's tables in each database a TickqBackend uses."""

from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string


def migrate_alias(alias: str) -> list[int]:
    """Apply tickq's migrations in Django database ``alias`` if a tickq backend uses it."""
    from .backend import TickqBackend, backend_for

    applied: list[int] = []
    for name, params in (getattr(settings, "TASKS", None) or {}).items():
        backend_class = import_string(params.get("BACKEND", ""))
        if isinstance(backend_class, type) and issubclass(backend_class, TickqBackend):
            backend = backend_for(name)
            if backend.database == alias:
                applied += backend.queue.migrate()
    return applied
