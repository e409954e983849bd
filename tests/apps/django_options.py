"""A Django project in one file: one task declared with tickq options, enqueued through
``using()`` with enqueue options; prints as JSON what arrived in its job definition and
its stored job, and which options ``TickqTask`` has of its own.

Set by the environment: ``TICKQ_TEST_DB`` (an SQLite file) and ``TICKQ_TEST_OPTIONS``
(JSON ``{"task": {...}, "using": {...}}``; ``{"timedelta": seconds}`` and
``{"datetime": iso}`` stand for those types).
"""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime, timedelta
from typing import Any

import django
from django.conf import settings


def decoded(value: Any) -> Any:
    if isinstance(value, dict) and "timedelta" in value:
        return timedelta(seconds=value["timedelta"])
    if isinstance(value, dict) and "datetime" in value:
        return datetime.fromisoformat(value["datetime"])
    return value


def shown(value: Any) -> Any:
    if isinstance(value, timedelta):
        return {"timedelta": value.total_seconds()}
    if isinstance(value, datetime):
        return {"datetime": value.isoformat()}
    if callable(value):  # a backoff policy: its first delays
        return [value(attempt) for attempt in (1, 2, 3)]
    return value


spec = json.loads(os.environ["TICKQ_TEST_OPTIONS"])
task_options = {name: decoded(v) for name, v in spec["task"].items()}
using = {name: decoded(v) for name, v in spec["using"].items()}
try:
    import django.tasks  # Django 6+

    backport = []
except ImportError:
    backport = ["django_tasks"]
settings.configure(
    INSTALLED_APPS=["tickq.contrib.django", *backport],
    DATABASES={
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["TICKQ_TEST_DB"]}
    },
    TASKS={
        "default": {
            "BACKEND": "tickq.contrib.django.TickqBackend",
            "QUEUES": ["default", using.get("queue_name", "default")],
        }
    },
    USE_TZ=True,
)
django.setup()

from django.core.management import call_command  # noqa: E402

from tickq.contrib.django import queue  # noqa: E402
from tickq.contrib.django.backend import TickqTask  # noqa: E402
from tickq.contrib.django.compat import Task  # noqa: E402

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


def noop() -> None: ...


if __name__ == "__main__":
    call_command("migrate", verbosity=0)
    declared = task(**task_options)(noop)
    result = declared.using(**using).enqueue()
    q = queue()
    definition = q._definition(declared.module_path)
    job = q.get_job(int(result.id))
    assert definition is not None and job is not None
    inherited = {f.name for f in dataclasses.fields(Task)}
    print(json.dumps({
        "task_fields": [f.name for f in dataclasses.fields(TickqTask) if f.name not in inherited],
        "definition": {name: shown(value) for name, value in definition.options.as_dict().items()},
        "job": {name: shown(getattr(job, name)) for name in job._fields},
    }))  # fmt: skip
