"""The Django app: ``INSTALLED_APPS += ["tickq.contrib.django"]``."""

from __future__ import annotations

from django.apps import AppConfig


class TickqConfig(AppConfig):
    name = "tickq.contrib.django"
    label = "tickq"
    verbose_name = "tickq"

    def ready(self) -> None:
        # Each app's tasks.py is imported, so its @task functions (and their schedules) are
        # known to the worker and the tick before any job of theirs comes due.
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("tasks")
