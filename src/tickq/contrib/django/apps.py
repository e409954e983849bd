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
        from django.core.signals import request_finished
        from django.db.backends.signals import connection_created
        from django.utils.module_loading import autodiscover_modules

        from .backend import let_go

        # tickq's own connections end where Django's do (see let_go).
        request_finished.connect(let_go, dispatch_uid="tickq-let-go")
        connection_created.connect(let_go, dispatch_uid="tickq-let-go-nodb")
        autodiscover_modules("tasks")
