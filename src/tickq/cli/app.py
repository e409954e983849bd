"""Find the user's ``Queue`` from ``module:attribute`` (or ``TICKQ_APP``)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import ConfigurationError
from ..queue import Queue

TICKQ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
IMPORTLIB_DIR = os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep


def add_app_argument(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument(
        "app",
        nargs="?" if not required or os.environ.get("TICKQ_APP") else None,
        default=os.environ.get("TICKQ_APP"),
        metavar="APP",
        help="module:attribute naming your Queue, e.g. myapp.jobs:q (default: $TICKQ_APP)",
    )


def load_app(spec: str | None) -> Queue:
    """Import ``module:attribute`` and return the Queue it names."""
    if not spec:
        raise ConfigurationError(
            "no app given: pass APP as module:attribute (e.g. myapp.jobs:q) or set TICKQ_APP"
        )
    if "://" in spec:
        from ..redact import redact_url

        raise ConfigurationError(
            f"APP {redact_url(spec)!r} is a database URL, not module:attribute naming your "
            "Queue (e.g. myapp.jobs:q); `tickq migrate --url URL` takes a URL, and a Queue() "
            "made without one reads $TICKQ_DATABASE_URL"
        )
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"APP must look like module:attribute, got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    setup_django()
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        if _django_not_set_up(exc):
            raise ConfigurationError(
                f"{module_name!r} uses Django, which is not set up: set "
                "DJANGO_SETTINGS_MODULE (e.g. mysite.settings) and run tickq again"
            ) from exc
        if _not_found(exc, module_name):
            raise ConfigurationError(
                f"cannot import {module_name!r} for APP {spec!r}: run tickq from your "
                "project's folder or put it on PYTHONPATH"
            ) from exc
        raise AppImportFailed(spec, exc) from exc
    target = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigurationError(f"{module_name!r} has no attribute {attr!r}") from None
    if not isinstance(target, Queue):
        raise ConfigurationError(f"{spec} is a {type(target).__name__}, not a tickq.Queue")
    return target


class AppImportFailed(ConfigurationError):
    """The app's module raised while being imported: a bug in the user's code, shown with
    the frames of their code only (tickq's and importlib's frames are noise to them)."""

    def __init__(self, spec: str, exc: BaseException) -> None:
        import traceback  # only a failing app pays its import (and linecache's, tokenize's)

        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        super().__init__(f"importing APP {spec!r} failed in your code (traceback above): {error}")
        self.user_traceback = user_traceback(exc)


def user_traceback(exc: BaseException) -> str:
    """``exc``'s traceback without the frames of tickq and of the import machinery."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _machinery(f.filename)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    return "".join(lines + traceback.format_exception_only(type(exc), exc))


def _machinery(filename: str) -> bool:
    return (
        filename.startswith(TICKQ_DIR)
        or filename.startswith("<frozen importlib")
        or filename.startswith(IMPORTLIB_DIR)
    )


def _not_found(exc: Exception, module_name: str) -> bool:
    return (
        isinstance(exc, ModuleNotFoundError)
        and bool(exc.name)
        and module_name.startswith(exc.name or "")
    )


def setup_django() -> None:
    """With ``DJANGO_SETTINGS_MODULE`` set, set Django up (once) before the app is imported,
    so jobs can use models; a worker without it would fail every job (AppRegistryNotReady)."""
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        return
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()


def _django_not_set_up(exc: BaseException) -> bool:
    names = {"ImproperlyConfigured", "AppRegistryNotReady"}
    return type(exc).__module__ == "django.core.exceptions" and type(exc).__name__ in names
