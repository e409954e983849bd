"""Django's Tasks API from ``django.tasks`` (Django 6+) or the ``django_tasks`` backport."""

from __future__ import annotations

try:
    from django.tasks import TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError, TaskResult
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json
except ImportError:  # Django 5.2: pip install django-tasks
    try:
        from django_tasks import TaskResultStatus, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskContext, TaskError, TaskResult
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
        from django_tasks.exceptions import TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
        from django_tasks.utils import normalize_json
    except ImportError:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "tickq.contrib.django needs Django's Tasks framework: Django 6+, or on Django 5.2 "
            "pip install 'tickq[django]' (the django-tasks backport)"
        ) from None

__all__ = [
    "BaseTaskBackend", "InvalidTask", "Task", "TaskContext", "TaskError", "TaskResult",
    "TaskResultDoesNotExist", "TaskResultStatus", "normalize_json", "task_backends",
    "task_enqueued", "task_finished", "task_started",
]  # fmt: skip
