"""tickq as the backend of Django's Tasks framework (``django.tasks``, or the
``django-tasks`` backport on Django 5.2).

.. code-block:: python

    INSTALLED_APPS = [..., "tickq.contrib.django"]
    TASKS = {"default": {"BACKEND": "tickq.contrib.django.TickqBackend",
                         "QUEUES": ["default", "emails"],
                         "OPTIONS": {"DATABASE": "default"}}}

Jobs are rows of tickq's tables in that Django database, enqueued on Django's own connection:
inside ``transaction.atomic()`` they commit or roll back with your data. See docs/django.md.
The ``tickq`` CLI reaches the default backend's Queue as ``tickq.contrib.django:q``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TickqBackend", "TickqTask", "backend_for", "queue", "schedule"]


def __getattr__(name: str) -> Any:
    # Lazy: Django imports this package while it populates INSTALLED_APPS.
    if name == "q":  # the CLI's APP: tickq jobs tickq.contrib.django:q
        return __getattr__("queue")()
    if name in __all__:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.backend"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
