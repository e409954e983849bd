"""Every public entry point takes every option of its kind, and the value arrives.

The lists come from the options types (``JobOptions.fields``, ``EnqueueOptions.fields``):
add a field and these tests fail until each entry point takes it (or, for Django, until
it is said here why Django's API has no such option). Each value is a non-default one,
read back from the job definition or the stored job, so an entry point that takes an
option and drops it fails too.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import pickle
import re
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from tickq import Queue
from tickq.controls import Limit
from tickq.enqueueing import options_and_meta
from tickq.job_options import (
    DEFAULT_ENQUEUE_OPTIONS,
    DEFAULT_JOB_OPTIONS,
    EnqueueOptions,
    JobOptions,
)
from tickq.registry import JobDefinition, JobFunction
from tickq.webhooks import HMAC


def sample_key(payload: dict[str, Any]) -> str:
    """A ``concurrency_key`` function (a field name is checked against the job's signature,
    which differs between the entry points here)."""
    return str(payload.get("account", ""))


JOB_SAMPLES: dict[str, Any] = {
    "name": "sample_job",
    "max_attempts": 7,
    "backoff": (5, 9),
    "queue": "mail",
    "priority": 3,
    "timeout": 12.5,
    "max_delay": timedelta(minutes=3),
    "max_snooze": timedelta(hours=2),
    "concurrency": 2,
    "rate_limit": "10/m",
    "concurrency_key": sample_key,
}
"""A value for each job option, none of them its default."""
JOB_HELD = {**JOB_SAMPLES, "backoff": [5.0, 9.0, 9.0]}
"""How the definition holds them (a backoff as its policy: the first three delays)."""

ENQUEUE_SAMPLES: dict[str, Any] = {
    "run_after": datetime(2031, 2, 3, 4, 5, tzinfo=UTC),
    "unique_key": "sample-key",
    "unique_scope": "all",
    "priority": 3,
    "queue": "mail",
    "max_attempts": 7,
    "keep": True,
}
"""A value for each enqueue option, none of them its default."""

DJANGO_TASK_LACKS = {
    "name": "a task's job type is its module path",
    "queue": "Django's queue_name, chosen per enqueue",
    "priority": "Django's priority, chosen per enqueue",
    "max_delay": "not in TickqTask's options yet",
    "concurrency": "not in TickqTask's options yet",
    "rate_limit": "not in TickqTask's options yet",
    "concurrency_key": "not in TickqTask's options yet",
}
"""The job options a Django task (``@task(...)``, a ``TickqTask``) has no field for."""
DJANGO_USING = {"run_after": "run_after", "unique_key": "unique_key", "priority": "priority",
                "queue": "queue_name"}  # fmt: skip
"""Enqueue options as ``TickqTask.using()`` names them."""
DJANGO_ENQUEUE_LACKS = {
    "unique_scope": "using() takes unique_key only (scope 'active')",
    "max_attempts": "a task option (@task(max_attempts=)), applied to each enqueue",
    "keep": "not in using() yet: Django's results are kept by its own backend",
}


def held(value: Any) -> Any:
    """An option as the definition holds it, comparable with ``JOB_HELD`` (a backoff policy
    as its first three delays; the key function as itself)."""
    if value is sample_key or not callable(value):
        return value
    return [value(attempt) for attempt in (1, 2, 3)]


def assert_job_options_arrived(definition: JobDefinition | None) -> None:
    assert definition is not None
    assert {name: held(getattr(definition.options, name)) for name in JobOptions.fields} == JOB_HELD
    assert {name: held(getattr(definition, name)) for name in JobOptions.fields} == JOB_HELD
    assert definition.limit == Limit(2, 10, 60.0, keyed=True)


def test_the_samples_cover_every_option_with_a_value_other_than_its_default() -> None:
    assert list(JOB_SAMPLES) == list(JobOptions.fields)
    assert list(ENQUEUE_SAMPLES) == list(EnqueueOptions.fields)
    for name in JobOptions.fields:
        assert held(getattr(DEFAULT_JOB_OPTIONS, name)) != JOB_HELD[name], name
    for name in EnqueueOptions.fields:
        assert getattr(DEFAULT_ENQUEUE_OPTIONS, name) != ENQUEUE_SAMPLES[name], name


# -- signatures: each lists the options type's parameters, with the same types and defaults


def keyword_parameters(fn: Callable[..., Any], *own: str) -> dict[str, tuple[Any, Any]]:
    """``fn``'s keyword-only parameters but ``own``: name -> (annotation text, default)."""
    found = inspect.signature(fn).parameters.values()
    return {p.name: (p.annotation, p.default) for p in found
            if p.kind is p.KEYWORD_ONLY and p.name not in own}  # fmt: skip


@pytest.mark.parametrize("options", [JobOptions, EnqueueOptions])
def test_the_constructor_takes_the_fields_in_order(options: type[Any]) -> None:
    assert list(keyword_parameters(options.__init__)) == list(options.fields)


@pytest.mark.parametrize(
    ("entry", "own"), [(Queue.job, ()), (Queue.webhook, ("verify", "max_body"))]
)
def test_each_job_decorator_lists_the_job_options(
    entry: Callable[..., Any], own: tuple[str]
) -> None:
    assert keyword_parameters(entry, *own) == keyword_parameters(JobOptions.__init__)


@pytest.mark.parametrize(
    ("entry", "own"),
    # options_and_meta: what Queue._new_job and an enqueue_many item take
    [(Queue.enqueue, ("conn",)), (Queue.enqueue_async, ("conn",)), (options_and_meta, ("meta",))],
)
def test_each_enqueue_lists_the_enqueue_options(entry: Callable[..., Any], own: tuple[str]) -> None:
    assert keyword_parameters(entry, *own) == keyword_parameters(EnqueueOptions.__init__)


def test_the_typing_overload_of_q_job_lists_what_its_definition_does() -> None:
    tree = ast.parse((ROOT / "src" / "tickq" / "queue.py").read_text())
    queue = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Queue")
    spelled = [
        [(a.arg, ast.unparse(a.annotation or a), ast.unparse(d or a))
         for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)]
        for node in ast.walk(queue)
        if isinstance(node, ast.FunctionDef) and node.name == "job" and node.args.kwonlyargs
    ]  # fmt: skip
    assert len(spelled) == 2 and spelled[0] == spelled[1]  # the overload and the def


# -- job options arrive in the definition


def test_q_job_takes_every_job_option(tmp_path: Path) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}")
    q.job(**JOB_SAMPLES)(lambda: None)
    assert_job_options_arrived(q._definition(JOB_SAMPLES["name"]))


def test_q_webhook_takes_every_job_option(tmp_path: Path) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}")
    verify = HMAC("s" * 32, header="X-Signature")
    q.webhook("/hooks/sample", verify=verify, **JOB_SAMPLES)(lambda event: None)
    assert_job_options_arrived(q._definition(JOB_SAMPLES["name"]))
    assert q._runtime.webhooks["/hooks/sample"].job == JOB_SAMPLES["name"]


# -- enqueue options arrive in the stored job


ENQUEUES: dict[str, Callable[[Queue, JobFunction[Any, Any], dict[str, Any]], int]] = {
    "q.enqueue": lambda q, fn, options: q.enqueue(fn.name, {}, **options),
    "q.enqueue_async": lambda q, fn, options: asyncio.run(q.enqueue_async(fn.name, {}, **options)),
    "q.enqueue_many": lambda q, fn, options: q.enqueue_many([(fn.name, {}, options)])[0],
    "q._new_job": lambda q, fn, options: q._runtime.insert([q._new_job(fn.name, {}, **options)])[0],
    "fn.with_options().enqueue": lambda q, fn, options: fn.with_options(**options).enqueue(),
    "fn.with_options().enqueue_async": lambda q, fn, options: asyncio.run(
        fn.with_options(**options).enqueue_async()
    ),
}


@pytest.mark.parametrize("entry", list(ENQUEUES))
def test_every_enqueue_takes_every_enqueue_option(queue: Queue, entry: str) -> None:
    @queue.job()
    def sample() -> None: ...

    enqueue = ENQUEUES[entry]
    job_id = enqueue(queue, sample, ENQUEUE_SAMPLES)
    job = queue.get_job(job_id)
    assert job is not None
    for name, value in ENQUEUE_SAMPLES.items():
        if name == "unique_scope":  # not a column: "all" also finds a finished job
            queue.cancel(job_id)
            assert enqueue(queue, sample, ENQUEUE_SAMPLES) == job_id
        else:
            assert getattr(job, name) == value, name


# -- Django: a task's options, and using()'s


def django_run(python: str, tmp_path: Path, task: dict[str, Any], using: dict[str, Any]) -> Any:
    def encoded(value: Any) -> Any:
        if isinstance(value, timedelta):
            return {"timedelta": value.total_seconds()}
        if isinstance(value, datetime):
            return {"datetime": value.isoformat()}
        return value

    spec = {"task": {n: encoded(v) for n, v in task.items()},
            "using": {n: encoded(v) for n, v in using.items()}}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TICKQ_TEST_DB": str(tmp_path / "dj.db"),
           "TICKQ_TEST_OPTIONS": json.dumps(spec)}  # fmt: skip
    env.pop("DJANGO_SETTINGS_MODULE", None)
    script = ROOT / "tests" / "apps" / "django_options.py"
    done = subprocess.run([python, str(script)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("django", ["5.2+backport", "6.1"])
def test_django_tasks_take_their_job_options_and_using_its_enqueue_options(
    django: str, tmp_path: Path
) -> None:
    from test_django import python_for

    python = python_for(django)
    first = django_run(python, tmp_path, {}, {})
    takes = [name for name in JobOptions.fields if name in first["task_fields"]]
    assert set(JobOptions.fields) == set(takes) | set(DJANGO_TASK_LACKS)
    assert not set(takes) & set(DJANGO_TASK_LACKS)
    assert set(EnqueueOptions.fields) == set(DJANGO_USING) | set(DJANGO_ENQUEUE_LACKS)
    using = {DJANGO_USING[name]: ENQUEUE_SAMPLES[name] for name in DJANGO_USING}
    (tmp_path / "again").mkdir()
    got = django_run(python, tmp_path / "again", {n: JOB_SAMPLES[n] for n in takes}, using)
    for name in takes:
        expected = JOB_HELD[name]
        if isinstance(expected, timedelta):
            expected = {"timedelta": expected.total_seconds()}
        assert got["definition"][name] == expected, name
    stored = {
        **{n: ENQUEUE_SAMPLES[n] for n in DJANGO_USING},
        "max_attempts": JOB_SAMPLES["max_attempts"],
    }
    for name, value in stored.items():
        shown = {"datetime": value.isoformat()} if isinstance(value, datetime) else value
        assert got["job"][name] == shown, name


# -- the options types themselves


def test_options_are_read_only_and_checked_again_when_replaced() -> None:
    options = JobOptions(**JOB_SAMPLES)
    with pytest.raises(AttributeError, match=r"read-only; use \.replace\(priority=\.\.\.\)"):
        options.priority = 5  # type: ignore[misc]
    assert options.replace(priority=5).priority == 5 and options.priority == 3
    with pytest.raises(TypeError, match="priority must be an int, got str: 'x'"):
        options.replace(priority="x")
    enqueue = EnqueueOptions(**ENQUEUE_SAMPLES)
    assert pickle.loads(pickle.dumps(enqueue)) == enqueue and hash(enqueue) == hash(
        EnqueueOptions(**ENQUEUE_SAMPLES)
    )
    assert enqueue != EnqueueOptions() and "unique_scope='all'" in repr(enqueue)


@pytest.mark.parametrize(
    ("option", "value", "error", "message"),
    [
        ("timeout", float("nan"), ValueError, "timeout must be positive seconds, got nan"),
        ("timeout", 0, ValueError, "timeout must be positive seconds, got 0"),
        ("timeout", "5", TypeError, "timeout must be a number of seconds, got str: '5'"),
        ("max_delay", timedelta(0), ValueError, "max_delay must be positive, got 0:00:00"),
        ("max_delay", 60, TypeError, "max_delay must be a timedelta, got int: 60"),
    ],
)
def test_every_job_decorator_refuses_a_bad_option_with_one_message(
    tmp_path: Path, option: str, value: Any, error: type[Exception], message: str
) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}")
    verify = HMAC("s" * 32, header="X-Signature")
    with pytest.raises(error, match=re.escape(message)):
        q.job(**{option: value})
    with pytest.raises(error, match=re.escape(message)):
        q.webhook("/hooks/bad", verify=verify, **{option: value})
    assert q.job_names() == []


def test_with_options_checks_them_at_once(tmp_path: Path) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}")

    @q.job()
    def sample() -> None: ...

    with pytest.raises(TypeError, match="priority must be an int, got str"):
        sample.with_options(priority="high")
    with pytest.raises(TypeError, match="unexpected keyword argument 'prority'"):
        sample.with_options(prority=1)
